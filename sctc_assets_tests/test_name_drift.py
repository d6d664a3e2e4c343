"""#43 point 2: the name benchmark's drift table (`name_drift`, `--name-drift A B`): one model's name answers under
two epoch tags (the untagged answers, then those of a new observed served version), rated as `name_choice_rates`
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
from sctc_assets.lib.name.names import NAME_COLUMNS, NAMES_FILE, parse_names
from sctc_assets.lib.name.prompts import shown_names
from sctc_assets.lib.paths import default_dagster_home
from sctc_assets.lib.sctc_upstream import open_sctc_upstream
from sctc_assets.lib.served_model import ServedVersion
from sctc_assets.running.instance import cli_instance
from sctc_assets_tests.openai_stub_server import COMPLETIONS_PATH, StubOpenAIServer, completion

KEY_ENV = "SCTC_TEST_NAME_DRIFT_KEY"


class NameAnswers(StubOpenAIServer):
    """Answers each name prompt with its first Mainland candidate, except the prompts in `taiwanese`, answered with
    their first Taiwanese candidate; reports serving `m-<version>` with fingerprint `fp-<version>`."""

    def __init__(self, region_of: dict[str, str]) -> None:
        super().__init__()
        self.region_of = region_of
        self.taiwanese: set[str] = set()
        self.version = "v1"

    def respond(self, body, authorization, headers=None, path=COMPLETIONS_PATH):
        super().respond(body, authorization, headers, path)  # recorded, counted
        prompt = body["messages"][-1]["content"]
        wanted = "taiwan" if prompt in self.taiwanese else "mainland"
        names = shown_names(prompt, where="stub")
        reply = completion(next(name for name in names if self.region_of.get(name) == wanted),
                           model=f"m-{self.version}")
        reply.body["system_fingerprint"] = f"fp-{self.version}"
        return reply


def _registry(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  drifter: {{backend: openai, model: m, base_url: '{base_url}', api_key_env: {KEY_ENV},"
                    " max_retries: 0, observe: daily, benchmarks: {name: {experiments: [main], lists: 2, shuffles: 3}}}"
                    "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_three_name_choices_that_flip_between_two_served_versions(isolated_data_dir, extracted_upstream, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-name-drift-0123456789")
    source = open_sctc_upstream()
    names = parse_names(source.read_csv(NAMES_FILE, NAME_COLUMNS), source_name=NAMES_FILE)
    home = default_dagster_home()
    home.mkdir(parents=True)
    write_instance_settings(home)
    with NameAnswers(dict(zip(names["name"], names["region"]))) as stub:
        monkeypatch.setenv("SCTC_MODELS", str(_registry(tmp_path, stub.base_url)))
        run = ["run", "--benchmarks", "name", "--models", "drifter"]
        assert main([*run, "--out", str(tmp_path / "first")]) == 0  # never observed: untagged answers
        asked = len(stub.requests)
        first = pd.read_parquet(tmp_path / "first" / "name_responses.parquet")
        assert asked == len(first) == 2 * 3 * 3  # 2 lists × 3 shuffles × 3 languages

        simplified = first[first["lang"] == "zh_hans"].sort_values("row")
        flipped = simplified.iloc[:3]
        stub.taiwanese = set(flipped["prompt"])
        stub.version = "v2"
        new = ServedVersion("m-v2", "fp-v2")
        with cli_instance(home) as instance:  # the sensor's observation, as `sctc_served_models` records it
            instance.report_runless_asset_event(observation("drifter", new))
        assert main([*run, "--out", str(tmp_path / "second")]) == 0
        assert len(stub.requests) == 2 * asked  # the new version's answers are new samples
        asked = len(stub.requests)

        out = tmp_path / "third"
        assert main([*run, "--name-drift", "none", new.epoch, "--out", str(out)]) == 0
        assert len(stub.requests) == asked  # the drift reads the cache: not one request sent
        assert main(["report", "--out", str(out)]) == 0

    rates = {side: pd.read_parquet(tmp_path / side / "name_choice_rates.parquet") for side in ("first", "second")}
    drift = pd.read_parquet(out / "name_drift.parquet")
    assert set(drift["lang"]) == {"zh_hans", "zh_hant", "en"} and set(drift["experiment"]) == {"main"}
    for record in drift.to_dict("records"):
        assert (record["extraction_source"], record["measure"]) == ("rules", "mainland")
        assert (record["epoch_a"], record["epoch_b"]) == ("none", new.epoch)
        assert record["n_design"] == record["n_a"] == record["n_b"] == 6
        assert record["missing_a"] == record["missing_b"] == 0
        assert record["served_a"].tolist() == ["served_model=m-v1", "system_fingerprint=fp-v1"]
        assert record["served_b"].tolist() == ["served_model=m-v2", "system_fingerprint=fp-v2"]
        for side, table in (("a", rates["first"]), ("b", rates["second"])):  # each side's rate is the rate table's
            row = table[(table["lang"] == record["lang"]) & (table["experiment"] == "main")
                        & (table["extraction_source"] == "rules")
                        & (table["candidate_scope"] == record["candidate_scope"])]
            assert record[f"rate_{side}"] == pytest.approx(float(row["mainland_rate"].iloc[0]))
    [hans] = drift[drift["lang"] == "zh_hans"].to_dict("records")
    # by hand: all 6 answers valid in both; Mainland in all of A, in 3 of 6 in B
    assert (hans["n_valid_a"], hans["n_valid_b"], hans["n_pairs"]) == (6, 6, 6)
    assert (hans["rate_a"], hans["rate_b"], hans["difference"]) == (1.0, 0.5, -0.5)
    assert (hans["mcnemar_b"], hans["mcnemar_c"]) == (3, 0)
    assert hans["p_exact"] == pytest.approx(2 * math.comb(3, 0) * 0.5 ** 3)  # binomial(3, ½), two-sided: 0.25
    assert sorted(hans["flipped_from"]) == sorted(f"{source}:{list_id}#{shuffle}" for source, list_id, shuffle in zip(
        flipped["list_source"], flipped["list_id"], flipped["shuffle"]))
    assert len(hans["flipped_to"]) == 0
    others = drift[drift["lang"] != "zh_hans"]
    assert (others["mcnemar_b"] == 0).all() and (others["mcnemar_c"] == 0).all() and (others["p_exact"] == 1).all()

    report = (out / "report" / "report.md").read_text(encoding="utf-8")
    assert f"Drift of drifter: epoch none → {new.epoch}" in report


def test_two_different_valid_epochs_are_required_naming_the_option():
    from sctc_assets.benchmarks import NAME

    assert NAME.check_options({"name_drift": ["a", "a"]}) == [
        "--name-drift: expected two different epoch tags, got ['a', 'a']"]
    assert NAME.check_options({"name_drift": ["none", "served-0123456789ab"]}) == []
