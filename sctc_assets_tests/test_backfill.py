"""A backfill of the answer assets runs once for a range of partitions (their single-run backfill policy), so a
local model is loaded once per backfill instead of once per partition; each partition is still stored, scored and
described on its own. The run requests are the ones Dagster's backfill daemon builds."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
from dagster._core.definitions.automation_tick_evaluation_context import build_run_requests_with_backfill_policies
from dagster._core.definitions.events import AssetKeyPartitionKey
from dagster._core.definitions.partitions.context import partition_loading_context

from sctc_assets.assets.partition_ranges import RANGE_MARK
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.partitions import MODELS_PARTITION_NAME
from sctc_assets_tests.fakes import count_calls, every_asset, write_two_term_fakes

GRAPH = defs.resolve_asset_graph()
EVERY_ASSET = every_asset(defs)
KEYS = [dg.MultiPartitionKey({"model": model, "lang": lang})
        for model in ("fake-a", "fake-b") for lang in ("zh_hans", "zh_hant")]


@pytest.fixture
def registry(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch) -> Path:
    path, calls = write_two_term_fakes(tmp_path)
    monkeypatch.setenv("SCTC_MODELS", str(path))
    return calls


def _run_requests(instance, asset: str, keys) -> list[dg.RunRequest]:
    with partition_loading_context(dynamic_partitions_store=instance):  # as the backfill daemon calls it
        return build_run_requests_with_backfill_policies(
            [AssetKeyPartitionKey(dg.AssetKey(asset), str(key)) for key in keys], GRAPH, instance)


def test_the_answer_assets_of_every_benchmark_backfill_in_single_runs():
    from sctc_assets.assets.catalog import CATALOG, GENERATION

    for name, entry in CATALOG.items():
        node = GRAPH.get(dg.AssetKey(name))
        single_run = node.backfill_policy == dg.BackfillPolicy.single_run()
        assert single_run == (entry.calls == GENERATION), name
        if single_run:
            assert getattr(defs.get_assets_def(name).op.compute_fn.decorated_fn, RANGE_MARK, False), name


def test_one_run_answers_a_range_of_partitions_and_stores_each(registry):
    calls = registry
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, ["fake-a", "fake-b"])
        assert dg.materialize(EVERY_ASSET, selection=["regional_terms", "term_prompts"], instance=instance,
                              resources=shared_resources()).success

        # What the backfill daemon launches. One model, every language: one run (the model loads once).
        one_model = _run_requests(instance, "term_responses", KEYS[:2])
        assert [(r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"])
                for r in one_model] == [("zh_hans|fake-a", "zh_hant|fake-a")]
        # Several models: Dagster 1.13 groups a multi-partition range by the dimension with fewer selected keys,
        # `lang` on a tie, so one run per language, each serving every model; one run per partition without the
        # policy (as the scoring assets are run).
        requests = _run_requests(instance, "term_responses", KEYS)
        assert sorted(r.tags["dagster/asset_partition_range_start"] for r in requests) == ["zh_hans|fake-a",
                                                                                          "zh_hant|fake-a"]
        assert len(_run_requests(instance, "term_labels", KEYS)) == 4

        run_ids = set()
        for request in requests:
            selection = (dg.AssetSelection.assets(*request.asset_selection)
                         | dg.AssetSelection.checks(*request.asset_check_keys))
            result = dg.materialize([*EVERY_ASSET, *defs.asset_checks], selection=selection, tags=request.tags,
                                    instance=instance, resources=shared_resources())
            assert result.success
            assert {e.check_name for e in result.get_asset_check_evaluations()} == {"error_rate", "refusal_rate",
                                                                                     "usable_answers"}
            run_ids.add(result.run_id)
        assert count_calls(calls) == 4 * 110

        records = instance.fetch_materializations(dg.AssetKey("term_responses"), limit=10).records
        assert {record.run_id for record in records} == run_ids and len(run_ids) == 2
        assert sorted(record.partition_key for record in records) == sorted(str(key) for key in KEYS)
        storage = shared_resources()["io_manager"]
        partitions_def = GRAPH.get(dg.AssetKey("term_responses")).partitions_def
        for record in records:
            key = partitions_def.get_partition_key_from_str(record.partition_key)
            table = pd.read_parquet(storage.path_for(dg.AssetKey("term_responses"), partitions_def, str(key)))
            dims = key.keys_by_dimension
            assert len(table) == 110 and set(table["model"]) == {dims["model"]} and set(table["lang"]) == {dims["lang"]}
            metadata = record.asset_materialization.metadata
            assert metadata["dagster/row_count"].value == 110 and metadata["calls"].value == 110

        # The scoring partitions run one by one on what the range run stored.
        for key in KEYS:
            labels = dg.materialize(EVERY_ASSET, selection=["term_judgements", "term_labels"], partition_key=key,
                                    instance=instance, resources=shared_resources())
            assert labels.success
        assert count_calls(calls) == 4 * 110
