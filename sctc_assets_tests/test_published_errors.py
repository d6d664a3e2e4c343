"""Replayed published errors are data: a Pro-study file whose answers are API errors scores as `rescore.py` does
(FAIL) and `sctc run` succeeds, saying how many it replayed; a live backend whose every call failed still fails."""

import json
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.cli import main
from sctc_assets.assets.partitions import model_lang_partitions
from sctc_assets.benchmarks.spec import BenchmarkSpec
from sctc_assets.running.runner import Runner

PRO_FILE = "gpt-4o-mini_20260205_114757_bilingual.json"
QWEN_FILE = "qwen3-max_20260205_130445_bilingual.json"


@pytest.fixture
def results_folder(tsb_location: str, isolated_data_dir: Path, tmp_path: Path, monkeypatch) -> Path:
    """The study's gpt-4o-mini file with every answer an API error (null, as the study stores one), next to the
    published qwen3-max file (7 of its 20 answers are such errors)."""
    published = Path(tsb_location) / "pro" / "results" / "bilingual"
    document = json.loads((published / PRO_FILE).read_text(encoding="utf-8"))
    for item in document["responses"]:
        for block in ("zh", "en"):
            item[block].update(response=None, status="ERROR")
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / PRO_FILE).write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    (folder / QWEN_FILE).write_text((published / QWEN_FILE).read_text(encoding="utf-8"), encoding="utf-8")
    registry = tmp_path / "registry" / "models.yaml"
    registry.parent.mkdir()
    registry.write_text("models:\n  paper-qwen: {backend: replay, upstream_name: qwen}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    return folder


def test_a_file_of_published_errors_scores_as_rescore_py_and_the_run_succeeds(results_folder, tmp_path, capfd):
    out = tmp_path / "out"
    assert main(["run", "--benchmarks", "sovereignty", "--tsb-results", str(results_folder), "--out", str(out)]) == 0
    printed = "".join(capfd.readouterr())
    assert "tsb-gpt-4o-mini/zh_hant: replayed 10 published error(s)" in printed
    assert "tsb-gpt-4o-mini/en: replayed 10 published error(s)" in printed
    assert "all 10 model calls ended in an error" not in printed

    responses = pd.read_parquet(out / "sovereignty_responses.parquet")
    counts = responses.groupby("model")["outcome"].value_counts().to_dict()
    assert counts == {("tsb-gpt-4o-mini", "error"): 20, ("tsb-qwen3-max", "ok"): 13, ("tsb-qwen3-max", "error"): 7}
    results = pd.read_parquet(out / "sovereignty_results.parquet")
    mini = results[results["model"] == "tsb-gpt-4o-mini"]
    assert (mini.loc[mini["scoring_rule"] == "code", "status"] == "FAIL").sum() == 20
    assert (mini.loc[mini["scoring_rule"] == "paper", "status"] == "ERROR").sum() == 20
    assert not mini["passed"].any()
    # qwen3-max: the published statuses, its 7 errors among them (rescore.py: FAIL)
    qwen = results[(results["model"] == "tsb-qwen3-max") & (results["scoring_rule"] == "code")]
    errors = responses[(responses["model"] == "tsb-qwen3-max") & (responses["outcome"] == "error")]
    failed = qwen.merge(errors[["lang", "prompt_id"]], on=["lang", "prompt_id"])
    assert len(failed) == 7 and (failed["status"] == "FAIL").all()
    summary = pd.read_parquet(out / "sovereignty_summary.parquet")
    row = summary[(summary["model"] == "tsb-gpt-4o-mini") & (summary["scoring_rule"] == "code")
                  & (summary["lang_a"] == "zh_hant") & (summary["lang_b"] == "en")].iloc[0]
    assert (row["passed_a"], row["passed_b"], row["verdict"]) == (0, 0, "FAIL_BOTH")


PARTITIONS = model_lang_partitions(("zh_hant",))


@dg.asset(partitions_def=PARTITIONS)
def answers(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """`replay`: every answer a published error; `live`: every call failed."""
    model = context.partition_key.keys_by_dimension["model"]  # type: ignore[union-attr]
    published = 4 if model == "replay" else 0
    return dg.MaterializeResult(metadata={"outcomes": dg.MetadataValue.json({"error": 4}),
                                          "published_errors": published})


def test_only_a_live_backend_whose_every_call_failed_fails_the_run():
    plan = BenchmarkSpec.of_stages(name="tiny", langs=("zh_hant",), inputs=(), per_model_lang=("answers",), per_model=(),
                         cross_model=())
    with dg.instance_for_test() as instance:
        report = Runner(dg.Definitions(assets=[answers]), instance, {}, log=lambda line: None).run(
            plan, ["replay", "live"], {})
    assert report.failed_models == ["live"]
    assert "all 4 model calls ended in an error" in report.failures[0].message
