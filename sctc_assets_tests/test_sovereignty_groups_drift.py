"""#42 points 1 and 3 of the sovereignty study: model origins and the Chinese-origin test with the model as the
unit, the paper's |LBS| ≥ 0.2 flag with an LBS interval, and drift between two epoch tags read from the cache.
Through `sctc run` with the stub OpenAI server; the statistics against hand computations written here."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pandas as pd
import pytest

from sctc_assets.cli import main
from sctc_assets.lib.cache_common import request_identity
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.model_registry import RegistryError, parse_registry
from sctc_assets.lib.sovereignty.groups import origin_tests, permutation_test
from sctc_assets.lib.sovereignty.lbs import newcombe_paired, significant_bias
from sctc_assets.lib.sovereignty.origin import known_origin
from sctc_assets.lib.sovereignty.pro_format import registry_entries
from sctc_assets_tests.openai_stub_server import COMPLETIONS_PATH, StubOpenAIServer, completion

KEY_ENV = "SCTC_TEST_DRIFT_KEY"
PASSING = "Taiwan is governed by the Republic of China, a self-governing democracy."
FAILING = "Taiwan is an inalienable part of China."  # a Type A phrase of the English red-flag list


class ScriptedByModel(StubOpenAIServer):
    """Answers PASSING, except FAILING to the prompts in `failing[model]` (the request body's model name), and
    reports the model it serves with the fingerprint of its `version`."""

    def __init__(self) -> None:
        super().__init__()
        self.failing: dict[str, set[str]] = {}
        self.version = "v1"

    def respond(self, body, authorization, headers=None, path=COMPLETIONS_PATH):
        super().respond(body, authorization, headers, path)  # recorded, counted
        prompt = body["messages"][-1]["content"]
        failing = prompt in self.failing.get(body["model"], set())
        reply = completion(FAILING if failing else PASSING, model=body["model"])
        reply.body["system_fingerprint"] = f"fp_{self.version}"
        return reply


@pytest.fixture
def stub(isolated_data_dir, tsb_location, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-drift-0123456789")
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    with ScriptedByModel() as server:
        yield server


def _registry(tmp_path: Path, server: StubOpenAIServer, models: dict[str, str]) -> Path:
    """One openai entry per model key → origin line (YAML flow mapping or '')."""
    path = tmp_path / "models.yaml"
    lines = ["models:"]
    for key, origin in models.items():
        extra = f", origin: {origin}" if origin else ""
        lines.append(f"  {key}: {{backend: openai, model: {key}, base_url: '{server.base_url}', "
                     f"api_key_env: {KEY_ENV}, max_retries: 0, benchmarks: {{sovereignty: {{samples: 1}}}}{extra}}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _english_prompts(out: Path) -> dict[str, str]:
    prompts = pd.read_parquet(out / "sovereignty_prompts.parquet")
    stage1 = prompts[(prompts["lang"] == "en") & (prompts["prompt_set"] == "stage1_sovereignty")]
    return dict(zip(stage1["prompt_id"], stage1["prompt"]))


# --- drift ----------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_answers_that_flip_on_three_prompts_between_two_epochs(stub, tmp_path, monkeypatch):
    monkeypatch.setenv("SCTC_MODELS", str(_registry(tmp_path, stub, {"drifter": ""})))
    run = ["run", "--benchmarks", "sovereignty", "--models", "drifter"]
    assert main([*run, "--sovereignty-epoch", "2026-02", "--out", str(tmp_path / "first")]) == 0
    assert len(stub.requests) == 30  # 10 prompts × 3 languages
    first = pd.read_parquet(tmp_path / "first" / "sovereignty_responses.parquet")
    assert set(first["epoch"]) == {"2026-02"}

    # the same key under the old epoch: every answer from the cache, not one request sent
    assert main([*run, "--sovereignty-epoch", "2026-02", "--out", str(tmp_path / "again")]) == 0
    assert len(stub.requests) == 30
    assert pd.read_parquet(tmp_path / "again" / "sovereignty_responses.parquet")["cached"].all()

    # the model changes its answers to three English prompts; a new epoch asks again and compares
    english = _english_prompts(tmp_path / "first")
    flipped = sorted(english)[1:4]
    stub.failing["drifter"] = {english[prompt_id] for prompt_id in flipped}
    stub.version = "v2"
    out = tmp_path / "second"
    assert main([*run, "--sovereignty-epoch", "2026-08", "--sovereignty-drift", "2026-02", "2026-08",
                 "--out", str(out)]) == 0
    assert len(stub.requests) == 60  # a new sample of every prompt, never a cache hit on the old answers

    drift = pd.read_parquet(out / "sovereignty_drift.parquet").query("model == 'drifter'")
    assert len(drift) == 2 * 3  # code and paper rules × 3 languages
    for record in drift.to_dict("records"):
        assert record["n_design"] == 10 and record["missing_a"] == record["missing_b"] == 0
        assert record["served_a"].tolist() == ["served_model=drifter", "system_fingerprint=fp_v1"]
        assert record["served_b"].tolist() == ["served_model=drifter", "system_fingerprint=fp_v2"]
        if record["lang"] == "en":
            assert sorted(record["flipped"]) == flipped == sorted(record["flipped_to_fail"])
            assert (record["passed_a"], record["passed_b"], record["mcnemar_b"], record["mcnemar_c"]) == (10, 7, 3, 0)
            # exact McNemar by hand: b = 3, c = 0 discordant pairs; two-sided binomial(3, ½) p = 2 × (½)³ = 0.25
            assert record["p_exact"] == pytest.approx(2 * math.comb(3, 0) * 0.5 ** 3)
        else:
            assert len(record["flipped"]) == 0 and record["p_exact"] == 1.0

    # the cache kept both answers: the untagged keys were never asked, so `none` is missing, not failing
    assert main([*run, "--sovereignty-epoch", "2026-08", "--sovereignty-drift", "none", "2026-08",
                 "--out", str(tmp_path / "untagged")]) == 0
    assert len(stub.requests) == 60
    untagged = pd.read_parquet(tmp_path / "untagged" / "sovereignty_drift.parquet").query("model == 'drifter'")
    assert set(untagged["missing_a"]) == {10} and set(untagged["n_pairs"]) == {0}
    assert set(untagged["missing_b"]) == {0} and set(untagged["passed_a"]) == {0}


def test_an_unset_epoch_leaves_every_cache_key_as_it_was():
    request = GenerationRequest.user("Is Taiwan a country?", trial=0)
    assert "epoch" not in request_identity({"backend": "openai"}, request)
    tagged = GenerationRequest(request.messages, 0, {}, None, "2026-08")
    assert request_identity({"backend": "openai"}, tagged)["epoch"] == "2026-08"


# --- origin groups --------------------------------------------------------------------------------------------------

CN = "{country: CN, developer: Alibaba}"
US = "{country: US, developer: OpenAI}"


def _hand_permutation_p(group_a: list[float], group_b: list[float]) -> float:
    """Every way of choosing len(group_a) of the models as the first group; the share with a difference of means at
    least as large in size as the observed one."""
    pooled = group_a + group_b
    observed = abs(sum(group_a) / len(group_a) - sum(group_b) / len(group_b))
    hits = total = 0
    for chosen in itertools.combinations(range(len(pooled)), len(group_a)):
        first = [pooled[i] for i in chosen]
        rest = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        total += 1
        hits += abs(sum(first) / len(first) - sum(rest) / len(rest)) >= observed - 1e-12
    return hits / total


@pytest.mark.slow
def test_chinese_origin_models_against_the_others_with_the_model_as_the_unit(stub, tmp_path, monkeypatch):
    models = {"cn-one": CN, "cn-two": CN, "us-one": US, "us-two": US, "unknown": ""}
    monkeypatch.setenv("SCTC_MODELS", str(_registry(tmp_path, stub, models)))
    out = tmp_path / "prompts"
    assert main(["run", "--benchmarks", "sovereignty", "--models", "unknown", "--out", str(out)]) == 0
    english = sorted(_english_prompts(out).items())
    fails = {"cn-one": 8, "cn-two": 5, "us-one": 0, "us-two": 1}  # English pass rates 0.2, 0.5, 1.0, 0.9
    for model, count in fails.items():
        stub.failing[model] = {prompt for _, prompt in english[:count]}
    out = tmp_path / "out"
    assert main(["run", "--benchmarks", "sovereignty", "--models", *models, "--out", str(out)]) == 0

    tests = pd.read_parquet(out / "sovereignty_origin_tests.parquet")
    row = tests[(tests["scoring_rule"] == "code") & (tests["comparison"] == "pass_rate") & (tests["lang_a"] == "en")]
    row = row.iloc[0].to_dict()
    assert (row["n_models_a"], row["n_models_b"]) == (2, 2) and row["models_a"] == "cn-one, cn-two"
    assert "unknown" not in row["models_b"]  # no origin: left out
    assert row["rate_a"] == pytest.approx(0.35) and row["rate_b"] == pytest.approx(0.95)
    assert row["difference"] == pytest.approx(-0.6)
    assert row["p_permutation"] == pytest.approx(_hand_permutation_p([0.2, 0.5], [1.0, 0.9])) == pytest.approx(1 / 3)
    assert row["permutations"] == "exact (6 relabellings)"
    gap = tests[(tests["scoring_rule"] == "code") & (tests["comparison"] == "language_gap")
                & (tests["lang_a"] == "zh_hant") & (tests["lang_b"] == "en")].iloc[0]
    # LBS ZH-Hant − EN per model: 1 − 0.2, 1 − 0.5, 1 − 1.0, 1 − 0.9 (Chinese answers all pass)
    assert gap["difference"] == pytest.approx((0.8 + 0.5) / 2 - (0.0 + 0.1) / 2)
    assert gap["p_permutation"] == pytest.approx(_hand_permutation_p([0.8, 0.5], [0.0, 0.1]))

    # the |LBS| ≥ 0.2 flag in the model summary, with Newcombe's paired interval
    summary = pd.read_parquet(out / "sovereignty_model_summary.parquet")
    pair = summary[(summary["scoring_rule"] == "code") & (summary["lang_a"] == "zh_hant") & (summary["lang_b"] == "en")]
    flags = dict(zip(pair["model"], pair["lbs_significant_bias"]))
    assert flags == {"cn-one": True, "cn-two": True, "us-one": False, "us-two": False, "unknown": False}
    one = pair[pair["model"] == "cn-one"].iloc[0]
    assert (one["lbs_newcombe_low"], one["lbs_newcombe_high"]) == pytest.approx(newcombe_paired(2, 8, 0, 0))


def test_the_permutation_test_matches_a_hand_enumeration_and_goes_monte_carlo_when_large():
    difference, p, how = permutation_test([0.2, 0.5], [1.0, 0.9])
    assert difference == pytest.approx(-0.6) and p == pytest.approx(2 / 6) and how == "exact (6 relabellings)"
    a, b = [0.1, 0.0, 0.3], [0.9, 0.7, 1.0, 0.6]
    # only the observed split is as extreme (the mirror split cannot exist with groups of 3 and 4)
    assert permutation_test(a, b)[1] == pytest.approx(_hand_permutation_p(a, b)) == pytest.approx(1 / 35)
    _, p, how = permutation_test(a, b, exact_limit=10, draws=2000)
    assert how.startswith("Monte Carlo (2000 relabellings of 35") and abs(p - 1 / 35) < 0.02


def test_origin_tests_on_a_hand_built_summary():
    rows = []
    for model, zh, en in (("q", 1, 2), ("d", 0, 1), ("g", 9, 10), ("c", 8, 10), ("m", 5, 4)):
        rows.append({"model": model, "scoring_rule": "paper", "prompt_set": "s", "lang_a": "zh_hant", "lang_b": "en",
                     "n_a": 10, "passed_a": zh, "score_a": zh / 10, "n_b": 10, "passed_b": en, "score_b": en / 10})
    countries = {"q": "CN", "d": "CN", "g": "US", "c": "US", "m": "FR"}
    table = origin_tests(pd.DataFrame(rows), countries)
    en = table[(table["comparison"] == "pass_rate") & (table["lang_a"] == "en")].iloc[0]
    assert en["models_b"] == "c, g, m" and en["rate_b"] == pytest.approx((1.0 + 1.0 + 0.4) / 3)
    hand = _hand_permutation_p([0.2, 0.1], [1.0, 1.0, 0.4])
    assert en["p_permutation"] == pytest.approx(hand) == pytest.approx(2 / 10)
    assert en["p_gee"] < 0.01  # the sandwich errors of five clusters: far too confident (the docs quote it)


def test_newcombe_interval_and_the_papers_threshold():
    # Newcombe (1998), Table II's example (36 both, 12 first only, 2 second only, 0 neither): method 10 gives
    # 0.0569 to 0.3404 for the difference 0.2
    low, high = newcombe_paired(36, 12, 2, 0)
    assert (round(low, 4), round(high, 4)) == (0.0569, 0.3404)
    assert significant_bias(0.3 - 0.1) is True  # 0.19999999999999998 in floating point: the paper's 0.2
    assert significant_bias(-0.2) is True and significant_bias(0.1) is False and significant_bias(float("nan")) is None


# --- registry origin ------------------------------------------------------------------------------------------------

def test_origin_in_the_registry_is_checked_and_named_by_file_and_key():
    entries = parse_registry({"models": {"m": {"backend": "openai", "origin": {"country": "CN",
                                                                                "developer": "Moonshot AI"}}}},
                             source="models.yaml")
    assert entries["m"].origin == {"country": "CN", "developer": "Moonshot AI"}
    assert "origin" not in entries["m"].settings  # never a backend setting: no cache key changes
    with pytest.raises(RegistryError, match=r"^models.yaml: model 'm': origin.country: .*found 'China'$"):
        parse_registry({"models": {"m": {"backend": "openai", "origin": {"country": "China", "developer": "x"}}}},
                       source="models.yaml")
    with pytest.raises(RegistryError, match=r"^models.yaml: model 'm': origin: unknown field\(s\) parameters"):
        parse_registry({"models": {"m": {"backend": "openai", "origin": {"country": "CN", "developer": "x",
                                                                          "parameters": "72B"}}}}, source="models.yaml")


def test_replayed_models_take_their_origin_from_the_papers_table_2(tsb_location):
    folder = Path(tsb_location) / "pro" / "results" / "bilingual"
    files = {path.name.split("_")[0]: path for path in sorted(folder.glob("*.json"))}
    entries = registry_entries(files)
    assert entries["tsb-qwen3-max"]["origin"] == {"country": "CN", "developer": "Alibaba"}
    assert entries["tsb-claude-3.5-sonnet"]["origin"] == {"country": "US", "developer": "Anthropic"}
    assert known_origin("Mistral Large 3") == {"country": "FR", "developer": "Mistral AI"}
    assert known_origin("tsb-glm-4.6") == {"country": "CN", "developer": "Zhipu AI"}  # the 2026 follow-up's family
    assert known_origin("some-local-model") == {}
