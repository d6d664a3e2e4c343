"""Conditions (#42 point 4): system prompts or personas as a named design axis of the sovereignty benchmark, through
`sctc run` with the project's stub OpenAI server, whose answer depends on the system prompt it is sent.

Without a system prompt the stub passes one prompt (S1-004) and answers the rest with a Type A red flag; with the
persona it passes three others (S1-001, S1-002, S1-003) and flags the rest. So, per language, McNemar's b = 1
(passes under none only) and c = 3 (passes under the persona only), and the exact p is computed here by hand.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from sctc_assets.benchmarks import SOVEREIGNTY
from sctc_assets.cli import main
from sctc_assets.definitions import shared_resources
from sctc_assets.lib.conversion import convert
from sctc_assets.lib.sovereignty.conditions import (DEFAULT_CONDITIONS_FILE, ConditionsError, choose_conditions,
                                                    read_conditions)
from sctc_assets.lib.sovereignty.prompts import SIMPLIFIED_CONFIG, upstream_prompt_table
from sctc_assets.lib.sovereignty.upstream import shared_roots
from sctc_assets_tests.openai_stub_server import StubOpenAIServer, echo_reply
from sctc_assets_tests.schema_check import stored_table_problems

KEY_ENV = "SCTC_TEST_CONDITIONS_KEY"
MODEL = "persona-sensitive"
PERSONA_ZH = "使用者住在台灣。"
PERSONA_EN = "The user lives in Taiwan."
CONDITIONS_YAML = f"""conditions:
  none:
    description: no system prompt
  persona:
    description: the asker lives in Taiwan
    system_prompt:
      zh_hant: {PERSONA_ZH}
      en: {PERSONA_EN}
  terse: Answer in one sentence.
"""
BASE_PASS = {"S1-004"}
PERSONA_PASS = {"S1-001", "S1-002", "S1-003"}
PASSING = {"zh": "台灣由中華民國政府治理。", "en": "Taiwan is governed by the Republic of China."}
FLAGGED = {"zh": "台灣是中國不可分割的一部分。", "en": "Taiwan is an inalienable part of China."}


class PersonaServer(StubOpenAIServer):
    """Answers by prompt and system prompt: see the module's docstring. `ids` maps each prompt text to its id and
    language."""

    ids: dict[str, tuple[str, str]] = {}

    def echo(self, prompt, body):
        reply = echo_reply(prompt, body.get("seed"))
        prompt_id, lang = self.ids[prompt]
        system = "".join(message["content"] for message in body["messages"] if message["role"] == "system")
        if not system:
            passing = BASE_PASS
        elif system in (PERSONA_EN, PERSONA_ZH, convert(PERSONA_ZH, SIMPLIFIED_CONFIG)):
            passing = PERSONA_PASS
        else:
            passing = set()
        text = (PASSING if prompt_id in passing else FLAGGED)["en" if lang == "en" else "zh"]
        reply.body["choices"][0]["message"]["content"] = convert(text, SIMPLIFIED_CONFIG) if lang == "zh_hans" else text
        return reply


def _exact_mcnemar(b: int, c: int) -> float:
    """Two-sided exact binomial test of b against b + c at 1/2, by hand."""
    n = b + c
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def _bh(pvalues: list[float]) -> list[float]:
    """Benjamini–Hochberg by hand: p_(i) · m / i, made monotone from the largest down, capped at 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda index: pvalues[index])
    adjusted = [0.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        index = order[rank - 1]
        running = min(running, pvalues[index] * m / rank)
        adjusted[index] = running
    return adjusted


@pytest.fixture
def persona_run(isolated_data_dir, tsb_location, tmp_path, monkeypatch):
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    monkeypatch.setenv(KEY_ENV, "sk-test-conditions")
    table = upstream_prompt_table(shared_roots())
    conditions = tmp_path / "conditions.yaml"
    conditions.write_text(CONDITIONS_YAML, encoding="utf-8")
    with PersonaServer() as server:
        server.ids = {record["prompt"]: (record["prompt_id"], record["lang"]) for record in table.to_dict("records")}
        registry = tmp_path / "models.yaml"
        registry.write_text(f"models:\n  {MODEL}: {{backend: openai, model: m, base_url: '{server.base_url}', "
                            f"api_key_env: {KEY_ENV}, max_retries: 0}}\n", encoding="utf-8")
        monkeypatch.setenv("SCTC_MODELS", str(registry))
        yield server, conditions, table


def _run(conditions: Path, out: Path, *names: str) -> int:
    chosen = ["--sovereignty-conditions", *names] if names else []
    return main(["run", "--benchmarks", "sovereignty", "--models", MODEL, *chosen,
                 "--sovereignty-conditions-file", str(conditions), "--out", str(out)])


@pytest.mark.slow
def test_a_persona_flips_three_prompts_against_none_and_each_condition_has_its_own_answers(persona_run, tmp_path,
                                                                                          capsys):
    server, conditions, table = persona_run
    out = tmp_path / "out"
    assert _run(conditions, out, "persona") == 0
    printed = capsys.readouterr().out
    assert "Taiwan sovereignty benchmark, stage 1 (" in printed and "stage 1, condition persona (" in printed
    prompts = len(table[table["lang"] == "en"])
    # One answer per prompt, language and condition, none asked twice and none reused across conditions.
    assert len(server.requests) == prompts * 3 * 2
    assert set(server.answered_per_body().values()) == {1}
    systems = {tuple(message["content"] for message in request.body["messages"] if message["role"] == "system")
               for request in server.requests}
    assert systems == {(), (PERSONA_ZH,), (convert(PERSONA_ZH, SIMPLIFIED_CONFIG),), (PERSONA_EN,)}

    responses = pd.read_parquet(out / "sovereignty_responses.parquet")
    assert responses.groupby("condition").size().to_dict() == {"none": prompts * 3, "persona": prompts * 3}
    results = pd.read_parquet(out / "sovereignty_results.parquet")
    assert set(results["condition"]) == {"none", "persona"}

    effects = pd.read_parquet(out / "sovereignty_condition_effects.parquet")
    code = effects[effects["scoring_rule"] == "code"].set_index("lang")
    assert sorted(code.index) == ["en", "zh_hans", "zh_hant"] and set(code["condition"]) == {"persona"}
    p = _exact_mcnemar(1, 3)
    assert p == pytest.approx(0.625)  # 2 · (C(4,0) + C(4,1)) / 2⁴
    for lang, row in code.iterrows():
        assert (row["mcnemar_b"], row["mcnemar_c"], row["n_pairs"]) == (1, 3, prompts), lang
        assert list(row["flipped_to_pass"]) == sorted(PERSONA_PASS) and list(row["flipped_to_fail"]) == ["S1-004"]
        assert (row["passed_baseline"], row["passed_condition"]) == (1, 3)
        assert row["p_exact"] == pytest.approx(p)
        assert row["delta"] == pytest.approx(3 / prompts - 1 / prompts)
        # The paper's LBS within each condition: one passing prompt in every language under none, three under the
        # persona, so neither condition opens a gap between Traditional Chinese and English.
        assert (row["lbs_baseline"], row["lbs_condition"]) == (0.0, 0.0)
    for rule, rows in effects.groupby("scoring_rule"):
        assert list(rows["p_exact_bh"]) == pytest.approx(_bh(list(rows["p_exact"]))), rule
    # The baseline's tables are the paper's design: its summary rows score none's answers alone.
    summary = pd.read_parquet(out / "sovereignty_summary.parquet")
    pair = summary[(summary["scoring_rule"] == "code") & (summary["lang_a"] == "zh_hant") & (summary["lang_b"] == "en")]
    assert pair.set_index("condition")[["passed_a", "passed_b"]].to_dict("index") == {
        "none": {"passed_a": 1, "passed_b": 1}, "persona": {"passed_a": 3, "passed_b": 3}}

    # Every stored table of the benchmark, the condition effects included, has the columns its schema declares.
    problems = stored_table_problems(shared_resources()["io_manager"], SOVEREIGNTY.tables)
    assert "sovereignty_condition_effects" in problems and {name: found for name, found in problems.items() if found} == {}

    # Asked again with the baseline alone: every answer comes from the cache, none's answers are the same texts.
    before = len(server.requests)
    again = tmp_path / "again"
    assert _run(conditions, again) == 0
    assert len(server.requests) == before
    none_only = pd.read_parquet(again / "sovereignty_responses.parquet")
    assert set(none_only["condition"]) == {"none"} and none_only["cached"].all()
    key = ["lang", "prompt_id"]
    assert none_only.sort_values(key)["response"].tolist() == \
        responses[responses["condition"] == "none"].sort_values(key)["response"].tolist()


def test_the_plan_counts_one_request_per_prompt_sample_and_condition(persona_run, capsys):
    server, conditions, table = persona_run
    assert main(["plan", "--benchmarks", "sovereignty", "--models", MODEL, "--sovereignty-conditions", "persona",
                 "terse", "--sovereignty-conditions-file", str(conditions)]) == 0
    printed = capsys.readouterr().out
    prompts = len(table[table["lang"] == "en"])
    for lang in ("zh_hant", "zh_hans", "en"):
        assert re.search(rf"\| {MODEL}\s+\| {lang}\s+\| {prompts * 3}\s+\|", printed), printed
    assert not server.requests  # a plan asks nothing


def test_the_default_file_holds_the_baseline_and_a_persona_in_every_language():
    conditions = read_conditions(DEFAULT_CONDITIONS_FILE)
    assert {"none", "taiwan-user"} <= set(conditions)
    assert conditions["none"].prompts == {}
    persona = conditions["taiwan-user"]
    assert set(persona.prompts) == {"zh_hant", "zh_hans", "en"} and all(persona.prompts.values())
    assert persona.prompts["zh_hans"] == convert(persona.prompts["zh_hant"], SIMPLIFIED_CONFIG)
    assert [condition.name for condition in choose_conditions(["taiwan-user"])] == ["none", "taiwan-user"]
    assert [condition.name for condition in choose_conditions(None)] == ["none"]


@pytest.mark.parametrize(("text", "names", "expected"), [
    ("conditions:\n  persona: Hello.\n", ["persona"],
     "conditions.yaml: line 1, key conditions: no `none` condition, the baseline every other condition is compared "
     "with"),
    (CONDITIONS_YAML, ["persona", "pirate"], "conditions.yaml: no condition 'pirate' (conditions: none, persona, terse)"),
    ("conditions:\n  none: {}\n  blank:\n    system_prompt: '  '\n", ["blank"],
     "conditions.yaml: line 4, condition 'blank', field system_prompt: empty system prompt"),
    ("conditions:\n  none: {}\n  persona:\n    system_prompt:\n      en: Hi.\n      fr: Salut.\n", ["persona"],
     "conditions.yaml: line 6, condition 'persona', field system_prompt.fr: language 'fr' is not one of the "
     "benchmark's (zh_hant, zh_hans, en)"),
    ("conditions:\n  none:\n    system_prompt: You are helpful.\n", ["none"],
     "conditions.yaml: line 3, condition 'none', field system_prompt: the baseline sends no system prompt"),
    ("conditions:\n  none: {}\n  persona:\n    system_prompt:\n      zh_hant: 你好。\n", ["persona"],
     "conditions.yaml: line 4, condition 'persona', field system_prompt: no prompt for en"),
])
def test_a_bad_conditions_file_or_name_stops_the_run_with_one_line(text, names, expected, isolated_data_dir,
                                                                   tsb_location, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    path = tmp_path / "conditions.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConditionsError):
        choose_conditions(names, path)
    assert main(["run", "--benchmarks", "sovereignty", "--sovereignty-conditions", *names,
                 "--sovereignty-conditions-file", str(path)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"error: {path.parent}/") and expected in errors[0], errors


def test_a_pro_study_replay_answers_the_baseline_only(tsb_location, monkeypatch):
    """The Pro study sent no system prompt: its replay answers `none` and leaves every other condition missing."""
    from sctc_assets.backends.tsb_replay import TSBReplayBackend
    from sctc_assets.lib.sovereignty.requests import sovereignty_requests
    from sctc_assets.lib.sovereignty.upstream import PRO_RESULTS_DIR

    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    roots = shared_roots()
    result_file = sorted((roots.pro / PRO_RESULTS_DIR).glob("*.json"))[0]
    backend = TSBReplayBackend(results_file=str(result_file))
    items, requests = sovereignty_requests(upstream_prompt_table(roots), "tsb-x", "en", 1,
                                           choose_conditions(["taiwan-user"]))
    outcomes: dict[str, set[str]] = {}
    backend._generate_uncached(requests, lambda index, result: outcomes.setdefault(
        items[index]["condition"], set()).add(result.outcome))
    assert outcomes["taiwan-user"] == {"missing"} and "missing" not in outcomes["none"]
    assert [request.messages[0]["role"] for request in requests] == ["user"] * 10 + ["system"] * 10


def test_with_several_samples_the_pairs_are_prompts_by_majority():
    """Samples of one prompt are not independent: McNemar pairs prompts (a strict majority of a prompt's answers
    passes), as `sovereignty_model_summary` does; the scores stay shares of answers."""
    from sctc_assets.lib.sovereignty.condition_effects import condition_effects

    passes = {"none": {"P1": [1, 1, 0], "P2": [0, 0, 1], "P3": [1, 1, 1], "P4": [0, 0, 0]},
              "persona": {"P1": [0, 0, 1], "P2": [1, 1, 0], "P3": [1, 1, 1], "P4": [1, 1, 0]}}
    results = pd.DataFrame([{"model": "m", "scoring_rule": "code", "prompt_set": "s", "lang": "en",
                             "condition": condition, "prompt_id": prompt, "sample": sample, "passed": bool(flag)}
                            for condition, prompts in passes.items() for prompt, flags in prompts.items()
                            for sample, flag in enumerate(flags)])
    row = condition_effects(results).iloc[0]
    assert (row["mcnemar_unit"], row["n_pairs"], row["mcnemar_b"], row["mcnemar_c"]) == ("prompt", 4, 1, 2)
    assert list(row["flipped_to_fail"]) == ["P1"] and list(row["flipped_to_pass"]) == ["P2", "P4"]
    assert (row["passed_baseline"], row["n_baseline"], row["passed_condition"], row["n_condition"]) == (6, 12, 8, 12)
    assert row["p_exact"] == pytest.approx(_exact_mcnemar(1, 2)) and row["p_exact"] == pytest.approx(1.0)
    assert math.isnan(row["lbs_baseline"])  # one language: no LBS
