"""The review benchmark through Dagster and `sctc run`: inputs without models, model × format partitions, the
response cache, the registry's per-model settings, other exports, and one real run of the embedded model."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.benchmarks import REVIEWS
from sctc_assets.cli import main
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.lib.paths import REPO_DATA_DIR, default_cache_path
from sctc_assets.running.runner import Runner
from sctc_assets_tests.fakes import count_calls

INPUTS = {"raw_reviews", "review_varieties", "review_pairs", "review_prompts"}
EMBEDDED = "qwen2.5-coder-0.5b-instruct"


def _registry(tmp_path: Path, calls: Path) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n"
        f"  fake-a: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: a, calls_file: '{calls}',"
        " default_answer: '8', default: true}\n"
        f"  fake-nosys: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: nosys, calls_file: '{calls}',"
        " default_answer: 'Score: 8', benchmarks: {reviews: {system_role: false, max_pairs: 4,"
        " translation_control: false}}}\n"
        "  paper-qwen: {backend: replay, upstream_name: qwen, default: true}\n", encoding="utf-8")
    return path


@pytest.fixture
def calls(isolated_data_dir, tmp_path, monkeypatch):
    calls = tmp_path / "calls.log"
    monkeypatch.setenv("SCTC_MODELS", str(_registry(tmp_path, calls)))
    monkeypatch.delenv("SCTC_REVIEWS", raising=False)
    return calls


def _materialized(instance: dg.DagsterInstance, asset: str) -> list[str]:
    records = instance.fetch_materializations(dg.AssetKey(asset), limit=100).records
    return sorted(record.partition_key or "" for record in records)


def test_without_models_only_the_inputs_run(calls, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "--benchmarks", "reviews", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert {path.stem for path in out.glob("*.parquet")} == INPUTS
    assert "Aligned review pairs: 12" in printed and "surplus_in_cell" in printed and "No model run" in printed
    assert count_calls(calls) == 0


@pytest.mark.slow
def test_models_answer_every_format_through_partitions_and_the_cache(calls):
    with dg.DagsterInstance.ephemeral() as instance:
        runner = Runner(defs, instance, shared_resources(), log=lambda message: None)
        report = runner.run(REVIEWS, ["fake-a", "fake-nosys"], {})
        # fake-nosys never gives a score the paper's parser accepts: each of its partitions fails its
        # usable_answers check (an ERROR), and nothing else fails
        assert sorted(failure.stage for failure in report.failures) == [
            f"reviews: fake-nosys/{fmt}" for fmt in ("plain", "shuffled", "structured")], report.failures
        assert all("usable_answers" in failure.message for failure in report.failures)
        assert _materialized(instance, "review_predictions") == sorted(
            f"{fmt}|{model}" for fmt in ("plain", "shuffled", "structured") for model in ("fake-a", "fake-nosys"))
        checks = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [dg.AssetCheckKey(dg.AssetKey("review_pairs"), "review_pairs_aligned")])
        assert all(record.status.value == "SUCCEEDED" for record in checks.values()) and checks
        first = count_calls(calls)
        # shuffled prompts equal to plain ones (single-part reviews, unchanged orders) come from the cache
        assert 12 * 2 * 2 * 2 < first < 12 * 2 * 2 * 3 + 4 * 2 * 3

        storage = Path(os.environ["SCTC_DATA_DIR"], "storage")
        predictions = pd.concat(pd.read_parquet(path) for path in (storage / "review_predictions").rglob("*.parquet"))
        by_model = predictions.groupby("model").size().to_dict()
        assert by_model == {"fake-a": 3 * 12 * 2 * 2, "fake-nosys": 3 * 4 * 2}
        assert set(predictions[predictions.model == "fake-a"].status) == {"valid"}
        nosys = predictions[predictions.model == "fake-nosys"]
        assert set(nosys.status) == {"invalid"} and set(nosys.response) == {"Score: 8"}
        assert set(nosys.version) == {"original"} and set(nosys.pair_id) == {0, 1, 2, 3}

        with sqlite3.connect(default_cache_path()) as db:
            requests = [json.loads(row[0]) for row in db.execute("SELECT request FROM responses")]
        roles = {request["model"]: {m["role"] for r in requests if r["model"] == request["model"]
                                    for m in r["messages"]} for request in requests}
        assert roles == {"a": {"system", "user"}, "nosys": {"user"}}

        metrics = pd.concat(pd.read_parquet(path) for path in (storage / "review_metrics").glob("*.parquet"))
        overall = metrics[(metrics.analysis == "length") & (metrics.subset == "all")].set_index(["model", "format"])
        assert overall.loc[("fake-a", "plain"), "n_pairs"] == 12
        assert overall.loc[("fake-nosys", "plain"), ["n_pairs", "n_excluded"]].tolist() == [0, 4]
        translation = metrics[metrics.analysis == "translation"]
        assert set(translation.model) == {"fake-a"} and len(translation) == 6

        # Re-running one model re-reads the cache; a UI backfill runs the partitioned job through it too.
        runner.run(REVIEWS, ["fake-a"], {})
        job = defs.resolve_job_def("reviews_model_format")
        result = job.execute_in_process(partition_key=dg.MultiPartitionKey({"model": "fake-nosys", "format": "plain"}),
                                        instance=instance, resources=shared_resources())
        assert result.success and count_calls(calls) == first


def test_another_export_with_mapped_columns_and_regions(calls, tmp_path, capsys):
    export = tmp_path / "export.jsonl"
    rows = [{"id": f"x{i}", "hotel": "H", "region": region, "stars": 9, "review_title": title,
             "positive_review": "", "negative_review": ""}
            for i, (region, title) in enumerate([("Taiwan", "很讚"), ("China", "很赞"), ("Taiwan", "超讚"),
                                                 ("China", "超赞"), ("Japan", "よい")])]
    export.write_text("\n".join(json.dumps(row, ensure_ascii=False) for row in rows), encoding="utf-8")
    out = tmp_path / "out"
    status = main(["run", "--benchmarks", "reviews", "--reviews", str(export), "--reviews-columns", "review_id=id",
                   "hotel_id=hotel", "nationality=region", "score=stars", "--reviews-varieties", "taiwan=tw",
                   "CHINA=cn", "--reviews-seed", "7", "--models", "fake-a", "paper-qwen", "--max-pairs", "1",
                   "--no-translation-control", "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 0
    assert "skipping paper-qwen" in printed
    pairs = pd.read_parquet(out / "review_pairs.parquet")
    assert len(pairs) == 2 and set(pairs.review_id_tw) == {"x0", "x2"}
    predictions = pd.read_parquet(out / "review_predictions.parquet")
    assert len(predictions) == 3 * 2 and set(predictions.pair_id) == {0}
    assert "Unpaired reviews: 1 of 5: {'unknown_variety': {'unknown': 1}}" in printed


def test_an_export_without_a_required_column_fails_naming_it(calls, tmp_path, capsys):
    export = tmp_path / "export.csv"
    pd.DataFrame({"hotel__booking_id": [1], "user_nationality": ["tw"], "review_title": ["好"],
                  "positive_review": [""], "negative_review": [""]}).to_csv(export, index=False)
    assert main(["run", "--benchmarks", "reviews", "--reviews", str(export), "--out", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert "export.csv: missing required column(s) for score (column 'score')" in error


@pytest.mark.slow
def test_the_embedded_model_rates_the_shipped_pairs_in_every_format(isolated_data_dir, tmp_path, capsys, monkeypatch):
    """All twelve shipped pairs, as written and converted, in the three formats: 144 answers, about two minutes
    on two CPU cores with the model load."""
    monkeypatch.setenv("SCTC_MODELS", str(REPO_DATA_DIR / "models.yaml"))
    monkeypatch.delenv("SCTC_REVIEWS", raising=False)
    shared_models = REPO_DATA_DIR / "models"  # the joined model file, kept where every other run finds it
    shared_models.mkdir(exist_ok=True)
    (isolated_data_dir / "models").symlink_to(shared_models, target_is_directory=True)
    out = tmp_path / "out"
    status = main(["run", "--benchmarks", "reviews", "--models", EMBEDDED, "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    predictions = pd.read_parquet(out / "review_predictions.parquet")
    assert len(predictions) == 3 * 12 * 2 * 2 and set(predictions.format) == {"structured", "plain", "shuffled"}
    assert set(predictions.outcome) == {"ok"} and predictions.response.notna().all()
    assert (predictions.status == "valid").mean() > 0.5, predictions[["format", "response"]]
    metrics = pd.read_parquet(out / "review_metrics.parquet")
    overall = metrics[(metrics.analysis == "length") & (metrics.subset == "all")]
    assert overall.format.tolist() == ["structured", "plain", "shuffled"]
    assert (overall.n_pairs + overall.n_excluded == 12).all() and (overall.n_pairs > 6).all()
    assert overall.delta_mse.notna().all() and overall.delta_acc.notna().all()
    assert len(metrics[metrics.analysis == "translation"]) == 6
    assert f"| {EMBEDDED} | structured |" in printed


def test_the_hf_config_flag_reaches_load_dataset(calls, tmp_path, capsys, monkeypatch):
    import datasets

    from sctc_assets.cli import _parser

    options = vars(_parser().parse_args(["run", "--benchmarks", "reviews", "--reviews-hf", "user/reviews",
                                         "--reviews-hf-config", "zh-TW", "--reviews-split", "test"]))
    assert REVIEWS.config(options)["raw_reviews"] == {"hf_dataset": "user/reviews", "hf_split": "test",
                                                           "hf_config": "zh-TW"}
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    folder = tmp_path / "hotel-reviews"
    (folder / "data").mkdir(parents=True)
    datasets.Dataset.from_dict({"hotel__booking_id": [1], "user_nationality": ["tw"], "score": [9],
                                "review_title": ["好"], "positive_review": [""], "negative_review": [""]}).to_parquet(
        folder / "data" / "train-00000-of-00001.parquet")
    status = main(["run", "--benchmarks", "reviews", "--reviews-hf", str(folder), "--reviews-hf-config", "no-such",
                   "--out", str(tmp_path / "out")])
    assert status == 1
    assert f"{folder}[train] (config no-such): cannot load" in capsys.readouterr().err
