"""Re-running one model leaves every other model up to date, as Dagster's own staleness reports it to the UI.

Two scripted models run the term benchmark into a real instance (a temporary DAGSTER_HOME, the project's
ParquetIOManager, the response cache). The stale statuses are read the way the
Dagster UI reads them: the GraphQL `staleStatus` / `staleStatusByPartition` fields over an in-process workspace of
`sctc_assets.definitions`.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from dagster._core.test_utils import in_process_test_workspace
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster_graphql.test.utils import execute_dagster_graphql

from sctc_assets.benchmarks import TERM
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.running.runner import Runner
from sctc_assets_tests.fakes import count_calls
from sctc_assets.definitions import every_asset
from sctc_assets_tests.schema_check import stored_table_problems

REPO = Path(__file__).resolve().parents[1]
GROUPS = ("term",)
ASSETS_QUERY = """
query AssetStaleStatuses {
  assetNodes { assetKey { path } groupName isPartitioned staleStatus }
}
"""
PARTITIONS_QUERY = """
query PartitionStaleStatuses($keys: [AssetKeyInput!]) {
  assetNodes(assetKeys: $keys) { assetKey { path } partitionKeys staleStatusByPartition }
}
"""


def _registry(path: Path, calls: Path, answer_a: str) -> None:
    path.write_text(
        "models:\n"
        f"  fake-a: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: a, calls_file: '{calls}',"
        f" default_answer: '{answer_a}', benchmarks: {{term: {{trials: 1, prompt_variants: [1]}}}}}}\n"
        f"  fake-b: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: b, calls_file: '{calls}',"
        " default_answer: '滑鼠', benchmarks: {term: {trials: 1, prompt_variants: [1]}}}\n",
        encoding="utf-8")


@pytest.fixture
def instance(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    registry = tmp_path / "models.yaml"
    _registry(registry, tmp_path / "calls.log", "复印件")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    with dg.DagsterInstance.get() as instance:
        yield instance


def ui_stale_statuses(instance: dg.DagsterInstance) -> dict[tuple[str, str | None], str]:
    """(asset, partition) → FRESH / STALE / MISSING for every asset of GROUPS, as the UI's GraphQL reports it."""
    origin = LoadableTargetOrigin(module_name="sctc_assets.definitions", working_directory=str(REPO))
    statuses = {}
    with in_process_test_workspace(instance, origin) as context:
        nodes = [node for node in execute_dagster_graphql(context, ASSETS_QUERY).data["assetNodes"]
                 if node["groupName"] in GROUPS]
        statuses.update({("/".join(node["assetKey"]["path"]), None): node["staleStatus"]
                         for node in nodes if not node["isPartitioned"]})
        keys = [{"path": node["assetKey"]["path"]} for node in nodes if node["isPartitioned"]]
        for node in execute_dagster_graphql(context, PARTITIONS_QUERY, {"keys": keys}).data["assetNodes"]:
            name = "/".join(node["assetKey"]["path"])
            statuses.update({(name, key): status
                             for key, status in zip(node["partitionKeys"], node["staleStatusByPartition"])})
    return statuses


def _with_status(statuses: dict, status: str) -> set[tuple[str, str | None]]:
    return {key for key, value in statuses.items() if value == status}


def _records(instance: dg.DagsterInstance) -> dict[tuple[str, str | None], int]:
    """Storage id of the latest materialization of every (asset, partition) of GROUPS."""
    latest = {}
    graph = defs.resolve_asset_graph()
    for key in graph.materializable_asset_keys:
        if graph.get(key).group_name not in GROUPS:
            continue
        for record in instance.fetch_materializations(key, limit=10_000).records:
            slot = (key.to_user_string(), record.partition_key)
            latest[slot] = max(latest.get(slot, 0), record.storage_id)
    return latest


def _of_model(keys, model: str) -> set:
    return {key for key in keys if key[1] is not None and key[1].split("|")[-1] == model}


def _partitioned(keys) -> set:
    return {key for key in keys if key[1] is not None}


def materialize_stale_until_fresh(instance: dg.DagsterInstance, max_rounds: int = 5) -> list[set]:
    """What the UI's "Materialize stale" does, clicked until nothing is stale: the stale set of each round. A round
    materializes the stale partitions first, then the stale unpartitioned assets (upstream before downstream)."""
    graph = defs.resolve_asset_graph()
    assets = every_asset(defs)
    rounds = []
    for _ in range(max_rounds):
        stale = _with_status(ui_stale_statuses(instance), "STALE")
        if not stale:
            return rounds
        rounds.append(stale)
        by_partition: dict = {}
        for name, partition in stale:
            by_partition.setdefault(partition, []).append(name)
        for partition in sorted(by_partition, key=lambda key: (key is None, key or "")):
            names = by_partition[partition]
            partitions_def = graph.get(dg.AssetKey(names[0])).partitions_def
            key = partitions_def.get_partition_key_from_str(partition) \
                if isinstance(partitions_def, dg.MultiPartitionsDefinition) else partition
            assert dg.materialize(assets, selection=names, partition_key=key, instance=instance,
                                  resources=shared_resources()).success
    raise AssertionError(f"still stale after {max_rounds} rounds of 'Materialize stale': {rounds}")

@pytest.mark.slow
def test_rerunning_one_model_leaves_the_other_model_fresh(instance, tmp_path):
    calls = tmp_path / "calls.log"
    runner = Runner(defs, instance, shared_resources(), log=lambda line: None)
    assert runner.run(TERM, ["fake-a", "fake-b"], {}).ok
    first_calls = count_calls(calls)

    # One full run: nothing is stale, nothing missing.
    statuses = ui_stale_statuses(instance)
    assert _with_status(statuses, "STALE") == set()
    # missing: only the stages a run without a judge or `--term-drift` leaves out (`BenchmarkSpec.for_run`), never
    # materialized
    assert _with_status(statuses, "MISSING") == {("term_incorrect_type_judgements", f"{lang}|{model}")
                                                 for lang in ("zh_hans", "zh_hant") for model in ("fake-a", "fake-b")
                                                 } | {("term_drift", model) for model in ("fake-a", "fake-b")}
    # 4 model × lang assets × 2 langs (Table 19's judgements among them, missing), 4 per-model assets (the drift
    # table among them, missing)
    assert len(_of_model(statuses, "fake-b")) == 4 * 2 + 4

    # 1. The runner path (`sctc run --models fake-a`), model A unchanged: nothing is stale, so neither A's nor B's
    # partitions are materialized again (`sctc run` leaves what is fresh as it is), and no model is asked.
    before = _records(instance)
    report = runner.run(TERM, ["fake-a"], {})
    assert report.ok and {model for _, model, _ in report.unchanged} == {"fake-a", None}
    after = _records(instance)
    touched = {key for key in after if after[key] != before.get(key)}
    assert _of_model(touched, "fake-b") == set()
    assert _of_model(touched, "fake-a") == set() != _of_model(after, "fake-a")
    assert count_calls(calls) == first_calls
    assert _with_status(ui_stale_statuses(instance), "STALE") == set()

    # 2. The UI path with new answers from A: a run of the `term_model_lang` job for A's two partitions.
    _registry(tmp_path / "models.yaml", calls, "影本")  # fake-a now answers the Taiwanese term
    job = defs.resolve_job_def("term_model_lang")
    for lang in ("zh_hans", "zh_hant"):
        result = job.execute_in_process(partition_key=dg.MultiPartitionKey({"model": "fake-a", "lang": lang}),
                                        instance=instance, resources=shared_resources())
        assert result.success
    assert count_calls(calls) == first_calls + 2 * 110

    # "Materialize stale", round after round, as a UI user clicks it: each round materializes exactly what the UI
    # reports stale. The first round is A's per-model tables, whose labels changed (and any cross-model table that
    # reads the labels directly); the later rounds are the cross-model tables they feed. No partition of B is ever
    # stale or materialized again.
    rounds = materialize_stale_until_fresh(instance)
    assert _partitioned(rounds[0]) == {("term_choice_rates", "fake-a"), ("term_misalignment_by_term", "fake-a")}
    for stale in rounds:
        assert _partitioned(stale) <= _of_model(stale, "fake-a"), stale
        assert {name for name, partition in stale if partition is None} <= set(TERM.cross_model), stale
    # every cross-model table but Table 19's, which reads the published annotations and a judge's verdicts (none
    # here), not the answers
    assert set().union(*rounds) - _partitioned(set().union(*rounds)) == {(name, None) for name in
                                                                        TERM.cross_model
                                                                        if name != "term_incorrect_types"}
    assert _with_status(ui_stale_statuses(instance), "STALE") == set()
    final = _records(instance)
    assert _of_model({key for key in final if final[key] != after.get(key)}, "fake-b") == set()
    assert count_calls(calls) == first_calls + 2 * 110  # scoring asks no model

    # The stored tables have the columns and types their schemas declare (sovereignty: test_sovereignty_pipeline).
    ran = TERM.for_run({}).tables  # what a run without a judge materializes
    problems = stored_table_problems(shared_resources()["io_manager"], ran)
    assert set(ran) == set(problems)
    assert {table: found for table, found in problems.items() if found} == {}
