"""#43 point 2: the term benchmark's drift table (`term_drift`, `--term-drift A B`): one model's term answers under
two epoch tags (the untagged answers, then those of a new observed served version), rated as `term_choice_rates`
rates them and paired answer by answer with the exact McNemar test, read from the response cache alone.
Through `sctc run` with the stub OpenAI server; the statistics against hand computations written here."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from sctc_assets.assets.served_models import observation
from sctc_assets.cli import main
from sctc_assets.lib.dagster_home import write_instance_settings
from sctc_assets.lib.drift import paired_flips
from sctc_assets.lib.paths import default_dagster_home
from sctc_assets.lib.sctc_upstream import open_sctc_upstream
from sctc_assets.lib.served_model import ServedVersion
from sctc_assets.lib.term.prompts import upstream_term_prompts
from sctc_assets.running.instance import cli_instance
from sctc_assets_tests.openai_stub_server import COMPLETIONS_PATH, StubOpenAIServer, completion

KEY_ENV = "SCTC_TEST_TERM_DRIFT_KEY"


class TermAnswers(StubOpenAIServer):
    """Answers each term prompt with its region's first form, except the prompts in `misaligned`, answered with the
    other region's first form; reports serving `m-<version>` with fingerprint `fp-<version>`."""

    def __init__(self, forms: dict[str, tuple[str, str]]) -> None:
        super().__init__()
        self.forms = forms
        self.misaligned: set[str] = set()
        self.version = "v1"

    def respond(self, body, authorization, headers=None, path=COMPLETIONS_PATH):
        super().respond(body, authorization, headers, path)  # recorded, counted
        prompt = body["messages"][-1]["content"]
        expected, other = self.forms.get(prompt, ("", ""))
        reply = completion(other if prompt in self.misaligned else expected, model=f"m-{self.version}")
        reply.body["system_fingerprint"] = f"fp-{self.version}"
        return reply


def _registry(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  drifter: {{backend: openai, model: m, base_url: '{base_url}', api_key_env: {KEY_ENV},"
                    " max_retries: 0, observe: daily, benchmarks: {term: {trials: 1, prompt_variants: [1]}}}\n",
                    encoding="utf-8")
    return path


def _clean(prompts: pd.DataFrame) -> list[dict]:
    """Simplified first-trial prompts of variant 1 whose two first forms share no text (either answer is labelled
    without doubt: the expected form correct, the other region's misaligned)."""
    rows = prompts[(prompts["lang"] == "zh_hans") & (prompts["prompt_variant"] == 1) & (prompts["trial"] == 0)]
    return [row for row in rows.to_dict("records")
            if not any(a in b or b in a for a in row["expected"] for b in row["other_region"])]


@pytest.mark.slow
def test_three_answers_that_flip_between_two_served_versions(isolated_data_dir, extracted_upstream, tmp_path,
                                                             monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-term-drift-0123456789")
    prompts = upstream_term_prompts(open_sctc_upstream())
    forms = {row["prompt"]: (row["expected"][0], row["other_region"][0]) for row in prompts.to_dict("records")}
    home = default_dagster_home()
    home.mkdir(parents=True)
    write_instance_settings(home)
    with TermAnswers(forms) as stub:
        monkeypatch.setenv("SCTC_MODELS", str(_registry(tmp_path, stub.base_url)))
        run = ["run", "--benchmarks", "term", "--models", "drifter"]
        # Never observed: the answers are untagged (epoch `none`). 110 terms × 2 languages, one trial, variant 1.
        assert main([*run, "--out", str(tmp_path / "first")]) == 0
        asked = len(stub.requests)
        assert asked == 220

        # The provider serves a new version, which answers three Simplified prompts with the other region's term.
        flipped = sorted(_clean(prompts), key=lambda row: row["term_id"])[:3]
        stub.misaligned = {row["prompt"] for row in flipped}
        stub.version = "v2"
        new = ServedVersion("m-v2", "fp-v2")
        with cli_instance(home) as instance:  # the sensor's observation, as `sctc_served_models` records it
            instance.report_runless_asset_event(observation("drifter", new))
        assert main([*run, "--out", str(tmp_path / "second")]) == 0
        assert len(stub.requests) == asked + 220  # the new version's answers are new samples, never cache hits
        asked = len(stub.requests)

        out = tmp_path / "third"
        assert main([*run, "--term-drift", "none", new.epoch, "--out", str(out)]) == 0
        assert len(stub.requests) == asked  # the drift reads the cache: not one request sent

    first = pd.read_parquet(tmp_path / "first" / "term_choice_rates.parquet")
    second = pd.read_parquet(tmp_path / "second" / "term_choice_rates.parquet")
    drift = pd.read_parquet(out / "term_drift.parquet")
    assert len(drift) == 2 * 2  # two languages × (correct, misaligned), prompt variant 1
    for record in drift.to_dict("records"):
        assert (record["model"], record["prompt_variant"], record["label_source"]) == ("drifter", 1, "rules")
        assert (record["epoch_a"], record["epoch_b"]) == ("none", new.epoch)
        assert record["n_design"] == record["n_a"] == record["n_b"] == record["n_pairs"] == 110
        assert record["missing_a"] == record["missing_b"] == 0
        assert record["served_a"].tolist() == ["served_model=m-v1", "system_fingerprint=fp-v1"]
        assert record["served_b"].tolist() == ["served_model=m-v2", "system_fingerprint=fp-v2"]
        # each side's rate is the rate table's, of the run that asked it (rules labels, all terms)
        for side, rates in (("a", first), ("b", second)):
            row = rates[(rates["lang"] == record["lang"]) & (rates["prompt_variant"] == 1)
                        & (rates["label_source"] == "rules") & (rates["subset"] == "all")]
            assert record[f"pct_{side}"] == pytest.approx(float(row[f"pct_{record['measure']}"].iloc[0]))
        assert record["diff_pct_points"] == pytest.approx(record["pct_b"] - record["pct_a"])
    names = sorted(f"{row['term_id']}#0" for row in flipped)
    zh_hans = drift[drift["lang"] == "zh_hans"].set_index("measure")
    correct, misaligned = zh_hans.loc["correct"], zh_hans.loc["misaligned"]
    # by hand: three of 110 answers left the correct label for the misaligned one, and nothing came back
    assert correct["pct_a"] - correct["pct_b"] == pytest.approx(3 / 110 * 100)
    assert misaligned["pct_b"] - misaligned["pct_a"] == pytest.approx(3 / 110 * 100)
    assert (correct["mcnemar_b"], correct["mcnemar_c"]) == (3, 0)
    assert (misaligned["mcnemar_b"], misaligned["mcnemar_c"]) == (0, 3)
    assert sorted(correct["flipped_from"]) == names == sorted(misaligned["flipped_to"])
    assert len(correct["flipped_to"]) == len(misaligned["flipped_from"]) == 0
    # exact McNemar: b + c = 3 discordant pairs, all one way; two-sided binomial(3, ½) p = 2 × (½)³ = 0.25
    hand = 2 * math.comb(3, 0) * 0.5 ** 3
    assert correct["p_exact"] == pytest.approx(hand) and misaligned["p_exact"] == pytest.approx(hand)
    zh_hant = drift[drift["lang"] == "zh_hant"]
    assert (zh_hant["mcnemar_b"] == 0).all() and (zh_hant["mcnemar_c"] == 0).all() and (zh_hant["p_exact"] == 1).all()
    assert (zh_hant["diff_pct_points"] == 0).all()

    # the report's term part shows the drift table, with the served versions
    assert main(["report", "--out", str(out)]) == 0
    report = (out / "report" / "report.md").read_text(encoding="utf-8")
    assert f"Drift of drifter: epoch none → {new.epoch}" in report
    assert "served_model=m-v1, system_fingerprint=fp-v1 → served_model=m-v2, system_fingerprint=fp-v2" in report


def test_the_pairing_counts_each_way_and_tests_exactly():
    a = pd.Series([True, True, False, False, True], index=["w", "x", "y", "z", "only-a"])
    b = pd.Series([False, True, True, True], index=["w", "x", "y", "z"])
    pairs = paired_flips(a, b)
    assert (pairs["n_pairs"], pairs["mcnemar_b"], pairs["mcnemar_c"]) == (4, 1, 2)
    assert pairs["lost"] == ["w"] and sorted(pairs["gained"]) == ["y", "z"]
    # exact two-sided binomial: P(X ≤ 1) × 2 for X ~ Bin(3, ½) = 2 × (1 + 3) / 8 = 1, capped at 1
    assert pairs["p_exact"] == pytest.approx(min(1.0, 2 * (math.comb(3, 0) + math.comb(3, 1)) / 8))


def test_two_different_valid_epochs_are_required_naming_the_option(capsys):
    from sctc_assets.benchmarks import TERM

    assert TERM.check_options({"term_drift": ["2026-02", "2026-02"]}) == [
        "--term-drift: expected two different epoch tags, got ['2026-02', '2026-02']"]
    assert TERM.check_options({"term_drift": ["none", "bad tag"]})[0].startswith("--term-drift: epoch tag 'bad tag'")
    assert TERM.check_options({"term_drift": ["none", "served-0123456789ab"]}) == []
