"""The term benchmark through Dagster: in-process materializations, partitions, cache and the `sctc` CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.definitions import defs, shared_resources
from sctc_assets.benchmarks import TERM
from sctc_assets.cli import main
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.running.runner import Runner
from sctc_assets.assets.sensors import model_registry_sensor
from sctc_assets_tests.fakes import count_calls

REPO = Path(__file__).resolve().parents[1]
MOUSE_S = "定义为'{d}'的是什么，请用一个词回答？"


def _registry(tmp_path: Path, calls: Path, extra: str = "") -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n"
        f"  fake-a: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: a, calls_file: '{calls}',"
        " default_answer: '复印件', benchmarks: {term: {trials: 2, prompt_variants: [1]}}}\n"
        f"  fake-b: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: b, calls_file: '{calls}',"
        " default_answer: '滑鼠', benchmarks: {term: {trials: 1, prompt_variants: [1, 2]}}}\n"
        "  paper-qwen: {backend: replay, upstream_name: qwen}\n" + extra,
        encoding="utf-8")
    return path


@pytest.fixture
def environment(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch):
    calls = tmp_path / "calls.log"
    monkeypatch.setenv("SCTC_MODELS", str(_registry(tmp_path, calls)))
    return calls


def _materializations(instance: dg.DagsterInstance, asset: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    records = instance.fetch_materializations(dg.AssetKey(asset), limit=1000).records
    for record in records:
        key = record.partition_key or ""
        counts[key] = counts.get(key, 0) + 1
    return counts


def test_definitions_load_without_torch_and_list_every_asset():
    names = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert set(TERM.tables) <= names
    assert {"term_model_lang", "term_per_model", "term_cross_model"} <= {job.name for job in defs.jobs}
    out = subprocess.run([sys.executable, "-c", "import sys, sctc_assets.definitions; print('torch' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_dagster_definitions_validate():
    result = subprocess.run([sys.executable, "-m", "dagster", "definitions", "validate", "-w",
                             str(REPO / "workspace.yaml")], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation successful" in result.stdout + result.stderr


def test_registry_sensor_adds_partitions(environment):
    with dg.DagsterInstance.ephemeral() as instance:
        context = dg.build_sensor_context(instance=instance, resources={"models": shared_resources()["models"]})
        result = model_registry_sensor(context)
        requested = [key for request in result.dynamic_partitions_requests for key in request.partition_keys]
        assert requested == ["fake-a", "fake-b", "paper-qwen"]
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, requested)
        assert model_registry_sensor(context).skip_reason


@pytest.mark.slow
def test_materialize_partitions_rerun_one_model_and_the_backfill_path(environment):
    calls = environment
    with dg.DagsterInstance.ephemeral() as instance:
        runner = Runner(defs, instance, shared_resources(), log=lambda message: None)
        report = runner.run(TERM, ["fake-a", "fake-b", "paper-qwen"], {})
        assert report.ok, report.failures
        # fake-a: 2 trials × 1 variant × 110 terms, fake-b: 1 trial × 2 variants × 110, both languages
        assert count_calls(calls) == 2 * 110 * 2 + 1 * 2 * 110 * 2

        storage = shared_resources()["io_manager"]
        rates = pd.concat(pd.read_parquet(p) for p in Path(storage._root(), "term_choice_rates").glob("*.parquet"))
        qwen = rates[(rates.model == "paper-qwen") & (rates.label_source == "upstream") & (rates.prompt_variant == 1)
                     & (rates.subset == "all")].set_index("lang")
        assert qwen.loc["zh_hans", ["pct_correct", "pct_misaligned", "pct_incorrect"]].round(2).tolist() == [54.48, 0.73, 44.79]
        assert qwen.loc["zh_hant", ["pct_correct", "pct_misaligned", "pct_incorrect"]].round(2).tolist() == [13.27, 36.85, 49.88]
        # fake-a always answers 复印件, the Mainland term for "photocopy" (term 0); both of our sources agree
        for source in ("rules", "lexicon"):
            fake_a = rates[(rates.model == "fake-a") & (rates.subset == "all")
                           & (rates.label_source == source)].set_index("lang")
            assert fake_a.loc["zh_hans", "n"] == 220 and fake_a.loc["zh_hant", "n"] == 220
            assert fake_a.loc["zh_hans", "n_correct"] == 2 and fake_a.loc["zh_hant", "n_misaligned"] == 2
        assert set(rates[rates.model == "fake-a"].label_source) == {"rules", "lexicon"}  # no published labels

        # Rerunning one unchanged model materializes nothing: its partitions are left as they are.
        before = {asset: _materializations(instance, asset) for asset in ("term_responses", "term_choice_rates")}
        report = runner.run(TERM, ["fake-a"], {})
        after = {asset: _materializations(instance, asset) for asset in ("term_responses", "term_choice_rates")}
        changed = {asset: sorted(k for k in after[asset] if after[asset][k] != before[asset].get(k)) for asset in after}
        assert changed == {"term_responses": [], "term_choice_rates": []}
        assert ("term_responses", "fake-a", "zh_hant") in report.unchanged
        assert count_calls(calls) == 880

        # What a UI backfill runs: the partitioned job, one run per partition, through the same cache.
        job = defs.resolve_job_def("term_model_lang")
        for lang in ("zh_hans", "zh_hant"):
            result = job.execute_in_process(partition_key=dg.MultiPartitionKey({"model": "fake-b", "lang": lang}),
                                            instance=instance, resources=shared_resources())
            assert result.success
        assert count_calls(calls) == 880

        tests = pd.read_parquet(Path(storage._root(), "term_choice_tests.parquet"))
        assert set(tests.model) == {"fake-a", "fake-b", "paper-qwen"}
        assert {"t_p_bh", "z_p_bh", "ci_low_s", "cohens_h"} <= set(tests.columns)


@pytest.mark.slow
def test_cli_run_writes_tables_and_reports_failures(environment, tmp_path, capsys, monkeypatch):
    # An endpoint nobody listens on: every call fails at run time (a missing key is refused before the run starts).
    registry = _registry(tmp_path, environment, extra="  down: {backend: openai, model: m, api_key_env: '', base_url:"
                                                      " 'http://127.0.0.1:9/v1', max_retries: 0, timeout_s: 5,"
                                                      " benchmarks: {term: {trials: 1}}}\n")
    out = tmp_path / "out"
    status = main(["run", "--models", "fake-a", "paper-qwen", "down", "--registry", str(registry), "--out", str(out),
                   "--prompt-variants", "1"])
    printed = capsys.readouterr()
    assert status == 1
    assert "down" in printed.err and "all 110 model calls ended in an error" in printed.err
    assert "term: stages failed for down" in printed.err
    assert "down: its rows in" not in printed.err  # this run wrote its error rows, so no earlier run is blamed
    written = {path.stem for path in out.glob("*.parquet")}
    assert {"regional_terms", "term_prompts", "term_responses", "term_labels", "term_choice_rates",
            "term_choice_tests", "term_misalignment_by_term", "term_misalignment_summary",
            "term_variant_correlations"} <= written
    responses = pd.read_parquet(out / "term_responses.parquet")
    assert set(responses.model) == {"fake-a", "paper-qwen", "down"}
    assert set(responses.loc[responses.model == "down", "outcome"]) == {"error"}
    assert set(responses.prompt_variant) == {1}
    assert "paper-qwen" in printed.out and "54.48" in printed.out
    labels = pd.read_parquet(out / "term_labels.parquet")
    assert list(labels.columns[:8]) == ["model", "lang", "prompt_variant", "term_id", "trial", "response",
                                        "label_source", "label"]
    assert set(labels.label) <= {"correct", "misaligned", "incorrect"}


@pytest.mark.slow
def test_judge_labels_through_a_registered_judge(environment, tmp_path, monkeypatch):
    registry = _registry(tmp_path, environment,
                         extra="  judge: {backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: judge, default_answer: '1'}\n")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    status = main(["run", "--models", "fake-a", "--judge", "judge", "--out", str(tmp_path / "out")])
    assert status == 0
    labels = pd.read_parquet(tmp_path / "out" / "term_labels.parquet")
    judge = labels[labels.label_source == "judge"]
    rules = labels[labels.label_source == "rules"]
    assert len(judge) == len(rules) == 440
    # the judge says "correct" to everything, but misaligned answers stay misaligned
    assert set(judge.label) == {"correct", "misaligned"}
    assert (judge.label == "misaligned").sum() == (rules.label == "misaligned").sum()
