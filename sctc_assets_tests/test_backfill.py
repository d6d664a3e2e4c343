"""A UI backfill of the answer assets, launched through the webserver's GraphQL and run by Dagster's backfill daemon
(`ui_backfill.py`), runs one partition per run: each partition keeps its own data version, so a backfill of unchanged
answers leaves everything downstream fresh (Dagster gives all partitions of a run over a range one data version,
dagster-io/dagster#34013), an item set's answers backfill like the built-in benchmarks', and every run carries the
`sctc/*` tags `sctc run` gives its runs (issue 38, points 1, 2 and 9)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from sctc_assets.benchmarks import TERM
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.resources.run_tags import sctc_run_tags
from sctc_assets.running.runner import Runner
from sctc_assets_tests.fakes import count_calls, write_two_term_fakes
from sctc_assets_tests.ui_backfill import ui, write_instance

REPO = Path(__file__).resolve().parents[1]
GRAPH = defs.resolve_asset_graph()
MODELS = ("fake-a", "fake-b")
TERM_KEYS = [f"{lang}|{model}" for model in MODELS for lang in ("zh_hans", "zh_hant")]
# Made up for this test (no upstream data): two concepts, regions cn/tw.
ITEMS = """concept_id,category,definition_zh_hans,definition_zh_hant,definition_source,term_cn,term_tw
k1,交通,一种两人并排骑的车,,hand,双座车,雙座車
k3,日用,用来擦桌子的布,用來擦桌子的布,,抹桌布,抹布
"""


def test_no_asset_backfills_a_range_of_partitions_in_one_run():
    # A run over a range gives all its partitions one data version: every asset runs one partition per run.
    assert {key.to_user_string(): GRAPH.get(key).backfill_policy for key in GRAPH.materializable_asset_keys
            if GRAPH.get(key).backfill_policy not in (None, dg.BackfillPolicy.multi_run(1))} == {}


def test_a_run_sctc_did_not_start_is_tagged_from_its_assets_or_job_and_its_partition():
    partition = {"dagster/partition": "zh_hant|fake-a", "dagster/partition/lang": "zh_hant",
                 "dagster/partition/model": "fake-a"}
    expected = {"sctc/benchmark": "term", "sctc/stage": "per_model_lang", "sctc/model": "fake-a",
                "sctc/lang": "zh_hant"}
    assert sctc_run_tags(["term_responses", "term_labels"], "__ASSET_JOB", partition) == expected
    assert sctc_run_tags([], "term_model_lang", partition) == expected  # the named job, from the launchpad
    assert sctc_run_tags(["term_choice_rates"], "__ASSET_JOB", {"dagster/partition": "fake-b"}) == {
        "sctc/benchmark": "term", "sctc/stage": "per_model", "sctc/model": "fake-b"}
    assert sctc_run_tags([], "term_cross_model", {}) == {"sctc/benchmark": "term", "sctc/stage": "cross_model"}
    assert sctc_run_tags(["regional_terms", "term_power"], "__ASSET_JOB", {}) == {"sctc/benchmark": "term"}
    assert sctc_run_tags(["term_responses", "name_responses"], "__ASSET_JOB", {}) == {}


@pytest.fixture
def fakes(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch) -> Path:
    path, calls = write_two_term_fakes(tmp_path)
    monkeypatch.setenv("SCTC_MODELS", str(path))
    home = write_instance(tmp_path / "dagster_home")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return calls


def _run_tags(run: dict) -> dict:
    return {key: value for key, value in run["tags"].items() if key.startswith("sctc/")}


@pytest.mark.slow
def test_a_ui_backfill_of_unchanged_answers_leaves_everything_downstream_fresh(fakes):
    calls = fakes
    with dg.DagsterInstance.get() as instance:
        assert Runner(defs, instance, shared_resources(), log=lambda line: None).run(TERM, list(MODELS), {}).ok
        asked = count_calls(calls)
        downstream = ["term_judgements", "term_labels"]
        with ui(instance) as front:
            before = front.stale(["term_responses", *downstream])
            assert {status["status"] for partitions in before.values() for status in partitions.values()} == {"FRESH"}

            # The backfill a person launches from the asset graph: term_responses, 2 models × 2 languages.
            _, status, runs = front.backfill(["term_responses"], TERM_KEYS)
            assert status == "COMPLETED_SUCCESS", runs
            assert count_calls(calls) == asked  # the replays come from the response cache
            after = front.stale(["term_responses", *downstream])
            assert {(asset, key): state for asset, partitions in after.items() for key, state in partitions.items()
                    if state["status"] != "FRESH"} == {}
            # One run per partition
            assert sorted(run["tags"]["dagster/partition"] for run in runs) == sorted(TERM_KEYS)
            assert {run["status"] for run in runs} == {"SUCCESS"}
            # Each partition has its own data version again, the one its answers had before.
            for key in TERM_KEYS:
                records = instance.fetch_materializations(
                    dg.AssetRecordsFilter(dg.AssetKey("term_responses"), asset_partitions=[key]), limit=2).records
                assert len(records) == 2
                assert len({record.asset_materialization.tags["dagster/data_version"] for record in records}) == 1

            # point 9: the UI's runs carry the tags `sctc run` gives its own, so the Runs page filters them alike.
            for run in runs:
                lang, model = run["tags"]["dagster/partition"].split("|")
                assert _run_tags(run) == {"sctc/benchmark": "term", "sctc/stage": "per_model_lang", "sctc/model": model,
                                          "sctc/lang": lang}, run
            assert {run["id"] for run in runs if run["tags"]["sctc/model"] == "fake-a"} <= set(
                front.runs_tagged("sctc/model", "fake-a"))


@pytest.mark.slow
def test_a_ui_backfill_of_an_item_sets_answers_succeeds_partition_by_partition(isolated_data_dir, tmp_path):
    # An item set registered as `sctc run --term-items … --item-set-name street` leaves it in the data folder; its
    # assets exist in a process started with it registered, so the UI and its daemon run in a fresh process.
    items = tmp_path / "street.csv"
    items.write_text(ITEMS, encoding="utf-8")
    (isolated_data_dir / "item_sets.yaml").write_text(
        f"item_sets:\n  street:\n    source: {items}\n    varieties: [zh-CN, zh-TW]\n", encoding="utf-8")
    registry, calls = write_two_term_fakes(tmp_path)
    keys = [f"{model}|{variety}" for model in MODELS for variety in ("zh-CN", "zh-TW")]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({
        "home": str(tmp_path / "dagster_home"), "models": list(MODELS),
        "inputs": ["terms_street_items", "terms_street_prompts"], "assets": ["terms_street_responses"],
        "partitions": keys, "stale": ["terms_street_responses"], "tagged": [["sctc/model", "fake-b"]]}),
        encoding="utf-8")
    env = {**os.environ, "SCTC_MODELS": str(registry), "DAGSTER_HOME": str(tmp_path / "dagster_home"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "sctc_assets_tests.ui_backfill", str(spec)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])

    assert result["status"] == "COMPLETED_SUCCESS", result["runs"]
    assert sorted(run["tags"]["dagster/partition"] for run in result["runs"]) == sorted(keys)
    assert {run["status"] for run in result["runs"]} == {"SUCCESS"}
    assert {key: state["status"] for key, state in result["stale"]["terms_street_responses"].items()} == {
        key: "FRESH" for key in keys}
    assert count_calls(calls) == 2 * 2 * 2  # 2 models × 2 varieties × 2 concepts, one trial of one variant
    for run in result["runs"]:
        model, variety = run["tags"]["dagster/partition"].split("|")
        assert _run_tags(run) == {"sctc/benchmark": "terms_street", "sctc/stage": "per_model_lang", "sctc/model": model,
                                  "sctc/variety": variety}, run
    assert sorted(result["tagged"]["sctc/model=fake-b"]) == sorted(
        run["id"] for run in result["runs"] if run["tags"]["sctc/model"] == "fake-b")
