"""A backfill of assets launched as the UI launches it, run as Dagster's backfill daemon runs it, in this process.

The launch is the webserver's GraphQL mutation `launchPartitionBackfill` (what *Materialize…* → *Launch backfill*
sends), over an in-process workspace of `sctc_assets.definitions`; the daemon's own backfill iteration
(`execute_backfill_iteration`) then requests the runs, which the instance's `SyncInMemoryRunLauncher` executes in
this process, one after the other, as soon as they are submitted (a deployment queues them and starts a process
per run instead; neither changes what a run does). Each run uses the
in-process executor, as a person picks it in the launchpad. Stale statuses and runs are read back through the same
GraphQL the UI reads them with.

`python -m sctc_assets_tests.ui_backfill SPEC.json` runs one backfill in a fresh process (its definitions, with the
item sets registered in its environment) and prints the runs and stale statuses as JSON: how a test backfills an
item set's assets, which exist only in a process started with the set registered.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from pathlib import Path
from typing import Iterator

import dagster as dg
from dagster._core.test_utils import create_test_daemon_workspace_context
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.backfill import execute_backfill_iteration
from dagster._daemon.sensor import execute_sensor_iteration
from dagster_graphql.test.utils import execute_dagster_graphql

REPO = Path(__file__).resolve().parents[1]
INSTANCE_YAML = """telemetry:
  enabled: false
run_launcher:
  module: dagster._core.launcher.sync_in_memory_run_launcher
  class: SyncInMemoryRunLauncher
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
compute_logs:
  module: dagster._core.storage.noop_compute_log_manager
  class: NoOpComputeLogManager
"""
LAUNCH = """mutation ($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message stack }
  ... on InvalidSubsetError { message } ... on UnauthorizedError { message } } }"""
BACKFILL = """query ($id: String!) { partitionBackfillOrError(backfillId: $id) { __typename
  ... on PartitionBackfill { status error { message } } } }"""
RUNS = """query ($tags: [ExecutionTag!]) { runsOrError(filter: {tags: $tags}) { __typename
  ... on Runs { results { runId status tags { key value } } } } }"""
STALE = """query ($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetKey { path } partitionKeys
  staleStatusByPartition staleCausesByPartition { reason dependency { path } } } }"""
DONE = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}


def write_instance(home: Path) -> Path:
    """A DAGSTER_HOME whose runs execute in this process, as the daemon hands them over."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(INSTANCE_YAML, encoding="utf-8")
    return home


class UI:
    """The webserver's GraphQL and the backfill daemon over one in-process workspace of the definitions."""

    def __init__(self, process_context):
        self._process = process_context

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        result = execute_dagster_graphql(self._process.create_request_context(), query, variables or {})
        if result.errors:
            raise RuntimeError(f"GraphQL: {result.errors}")
        return result.data

    def backfill(self, assets: list[str], partitions: list[str], *, max_iterations: int = 10) -> tuple[str, str, list]:
        """Launch a backfill of `partitions` of `assets` and run the daemon's iterations until it ends: its id, its
        status and its runs (id, status, tags)."""
        backfill = self.launch(assets, partitions)
        status = self.iterate(backfill, max_iterations=max_iterations)
        return backfill, status, self.runs(backfill)

    def launch(self, assets: list[str], partitions: list[str]) -> str:
        """Launch a backfill of `partitions` of `assets` as *Materialize…* → *Launch backfill* does; its id."""
        launched = self.graphql(LAUNCH, {"params": {
            "assetSelection": [{"path": [name]} for name in assets], "partitionNames": partitions,
            "fromFailure": False, "runConfigData": {"execution": {"config": {"in_process": {}}}}}}
        )["launchPartitionBackfill"]
        if launched["__typename"] != "LaunchBackfillSuccess":
            raise RuntimeError(f"backfill not launched: {launched}")
        return launched["backfillId"]

    def iterate(self, backfill: str, *, max_iterations: int = 10) -> str:
        """Run the backfill daemon's iterations until the backfill ends, at most `max_iterations`; its status."""
        status = "REQUESTED"
        for _ in range(max_iterations):
            for error in execute_backfill_iteration(self._process, logging.getLogger("sctc-test-backfill")):
                if error is not None:
                    raise RuntimeError(f"backfill daemon: {error.to_string()}")
            status = self.graphql(BACKFILL, {"id": backfill})["partitionBackfillOrError"]["status"]
            if status in DONE:
                break
        return status

    def runs(self, backfill: str) -> list[dict]:
        """The backfill's runs (id, status, tags), newest first, as the Runs page lists them."""
        runs = self.graphql(RUNS, {"tags": [{"key": "dagster/backfill", "value": backfill}]})["runsOrError"]["results"]
        return [{"id": run["runId"], "status": run["status"], "tags": {tag["key"]: tag["value"] for tag in run["tags"]}}
                for run in runs]

    def sensor_tick(self) -> None:
        """One iteration of the sensor daemon: every running sensor whose interval has passed is evaluated in the
        code location and the runs it requests are submitted (here: executed at once)."""
        for error in execute_sensor_iteration(self._process, logging.getLogger("sctc-test-sensors"), None, None):
            if error is not None:
                raise RuntimeError(f"sensor daemon: {error.to_string()}")

    def runs_tagged(self, key: str, value: str) -> list[str]:
        """The ids of the runs the Runs page lists when filtered by the tag `key=value`."""
        found = self.graphql(RUNS, {"tags": [{"key": key, "value": value}]})["runsOrError"]["results"]
        return [run["runId"] for run in found]

    def stale(self, assets: list[str]) -> dict[str, dict[str, dict]]:
        """asset → partition → {"status": FRESH / STALE / MISSING, "causes": [reason …]}, as the UI shows them."""
        nodes = self.graphql(STALE, {"keys": [{"path": [name]} for name in assets]})["assetNodes"]
        return {"/".join(node["assetKey"]["path"]): {
            key: {"status": status, "causes": [f"{cause['reason']} ({'/'.join(cause['dependency']['path'])})"
                                               if cause.get("dependency") else cause["reason"] for cause in causes]}
            for key, status, causes in zip(node["partitionKeys"], node["staleStatusByPartition"],
                                           node["staleCausesByPartition"])} for node in nodes}


@contextlib.contextmanager
def ui(instance: dg.DagsterInstance) -> Iterator[UI]:
    origin = LoadableTargetOrigin(module_name="sctc_assets.definitions", working_directory=str(REPO))
    target = InProcessWorkspaceLoadTarget([InProcessCodeLocationOrigin(origin, location_name="sctc_assets")])
    with create_test_daemon_workspace_context(target, instance) as process_context:
        yield UI(process_context)


def main(spec_path: str) -> None:
    """SPEC.json: {"home": DAGSTER_HOME, "models": [keys of the models dimension], "inputs": [unpartitioned assets
    to materialize first], "assets": [...], "partitions": [...], "stale": [assets whose stale statuses to print],
    "tagged": [[tag, value] …]}; the environment ($SCTC_*) as the test set it."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    from sctc_assets.definitions import defs, shared_resources
    from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
    from sctc_assets.definitions import every_asset

    with dg.DagsterInstance.from_config(str(write_instance(Path(spec["home"])))) as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, spec["models"])
        if spec.get("inputs"):
            assert dg.materialize(every_asset(defs), selection=spec["inputs"], instance=instance,
                                  resources=shared_resources()).success
        with ui(instance) as front:
            backfill, status, runs = front.backfill(spec["assets"], spec["partitions"])
            print(json.dumps({"backfill": backfill, "status": status, "runs": runs,
                              "stale": front.stale(spec.get("stale", [])),
                              "tagged": {f"{key}={value}": front.runs_tagged(key, value)
                                         for key, value in spec.get("tagged", [])}}))


if __name__ == "__main__":
    main(sys.argv[1])
