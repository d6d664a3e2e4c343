"""A Dagster daemon and a `dagster-webserver` on an instance, and a backfill of model partitions launched and
followed through the webserver's GraphQL, for the PostgreSQL instance test and `bench/cache_backends.py`.

Both servers run as subprocesses of this interpreter, each in a session of its own, so that stopping them takes
their code servers and the run processes the daemon started too (`stop`, in every path).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from sctc_assets_tests.servers import free_port

REPO = Path(__file__).resolve().parents[1]
WORKSPACE = REPO / "workspace.yaml"
LOCATION = {"repositoryLocationName": "sctc_assets", "repositoryName": "__repository__"}
# Replay models of the shipped registry: their answers come from the published data, no model is loaded.
MODELS = ("paper-qwen", "paper-breeze", "paper-gpt4o", "paper-llama3-8b")
JOB = "term_model_lang"
LAUNCH = """mutation ($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message stack }
  ... on PartitionSetNotFoundError { message } ... on InvalidSubsetError { message } } }"""
RUNS = """query ($tags: [ExecutionTag!]) { runsOrError(filter: {tags: $tags}) { __typename
  ... on Runs { results { runId status creationTime startTime endTime tags { key value } } } } }"""
BACKFILL = """query ($id: String!) { partitionBackfillOrError(backfillId: $id) { __typename
  ... on PartitionBackfill { status } } }"""
INSTANCE = "{ instance { info runLauncher { name } runQueuingSupported } }"
STARTED_PROCESS = re.compile(r"Started process for run \(pid: (\d+)\)")


def partitions(models=MODELS, lang: str = "zh_hans") -> list[str]:
    return [f"{lang}|{model}" for model in models]


def prepare_inputs(home: Path, models=MODELS) -> None:
    """Register the models as partitions and materialize the term benchmark's model-independent inputs, in this
    process, on the instance at `home` (its settings and the environment as the servers will see them)."""
    from sctc_assets.definitions import defs
    from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
    from sctc_assets.running.instance import cli_instance

    with cli_instance(home) as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, list(models))
        if not defs.resolve_job_def("term_inputs").execute_in_process(instance=instance).success:
            raise RuntimeError("the term benchmark's inputs failed")




@dataclass
class Servers:
    """`dagster-daemon run` and `dagster-webserver` on the instance at `home`, logging into `logs`."""

    home: Path
    logs: Path
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    processes: list[subprocess.Popen] = field(default_factory=list)

    def log_files(self) -> dict[str, Path]:
        return {name: self.logs / f"{name}.log" for name in ("daemon", "webserver")}

    def start(self, timeout: float = 180) -> "Servers":
        env = {**os.environ, **self.env, "DAGSTER_HOME": str(self.home),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        # This interpreter's daemon and webserver: their scripts sit beside it in the virtual environment
        commands = {"daemon": [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", str(WORKSPACE)],
                    "webserver": [sys.executable, "-m", "dagster_webserver", "-h", "127.0.0.1", "-p", str(self.port),
                                  "-w", str(WORKSPACE)]}
        self.logs.mkdir(parents=True, exist_ok=True)
        for name, path in self.log_files().items():
            with open(path, "wb") as log:
                self.processes.append(subprocess.Popen(commands[name], cwd=REPO, env=env, stdout=log,
                                                       stderr=subprocess.STDOUT, start_new_session=True))
        self._wait_for_webserver(timeout)
        return self

    def _wait_for_webserver(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args[0]} exited with {process.returncode}\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/server_info", timeout=2):
                    return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"dagster-webserver did not answer within {timeout:.0f} s\n{self.tail()}")

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/graphql", method="POST",
                                         data=json.dumps({"query": query, "variables": variables or {}}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        if "errors" in answer:
            raise RuntimeError(f"GraphQL: {answer['errors']}")
        return answer["data"]

    def backfill(self, keys: list[str], timeout: float = 300, *, until_marked_done: bool = True
                 ) -> tuple[str, list[dict], float]:
        """Launch a backfill of `keys` of the job through GraphQL and wait until the daemon has run it; its id, its
        runs (as the UI's GraphQL shows them) and the seconds from launch to the backfill's end. The daemon marks a
        job backfill done at its first look (every 30 s) after all its runs have ended; without `until_marked_done`
        the wait ends when they have, as soon as one run per key has succeeded or any has failed."""
        started = time.monotonic()
        launched = self.graphql(LAUNCH, {"params": {
            "selector": {"partitionSetName": f"{JOB}_partition_set", "repositorySelector": LOCATION},
            "partitionNames": keys, "fromFailure": False,
            # One process per run, as a person picks it in the launchpad: Dagster's default executor starts one more
            # process per step (a fresh import of the definitions each), minutes on a small test machine.
            "runConfigData": {"execution": {"config": {"in_process": {}}}}}})["launchPartitionBackfill"]
        if launched["__typename"] != "LaunchBackfillSuccess":
            raise RuntimeError(f"backfill not launched: {launched}")
        backfill = launched["backfillId"]
        deadline = started + timeout
        tags = {"tags": [{"key": "dagster/backfill", "value": backfill}]}
        while True:
            status = self.graphql(BACKFILL, {"id": backfill})["partitionBackfillOrError"]["status"]
            if status != "REQUESTED":  # the daemon marks a job backfill done once all its runs have ended
                break
            if not until_marked_done:
                ended = [run["status"] for run in self.graphql(RUNS, tags)["runsOrError"]["results"]
                         if run["status"] in ("SUCCESS", "FAILURE", "CANCELED")]
                if ended.count("SUCCESS") == len(keys):
                    status = "COMPLETED_SUCCESS"
                    break
                if len(ended) > ended.count("SUCCESS"):
                    status = "COMPLETED_FAILED"
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"backfill {backfill} not done within {timeout:.0f} s\n{self.tail()}")
            time.sleep(0.25)
        elapsed = time.monotonic() - started
        runs = self.graphql(RUNS, tags)["runsOrError"]
        if status != "COMPLETED_SUCCESS":
            raise RuntimeError(f"backfill {backfill} ended {status}: {runs}\n{self.tail()}")
        return backfill, runs["results"], elapsed

    def tail(self, characters: int = 2500) -> str:
        return "\n".join(f"--- {name}\n{path.read_text(errors='replace')[-characters:]}"
                         for name, path in self.log_files().items() if path.exists())

    def stop(self) -> None:
        """SIGTERM to every process group, then SIGKILL to what is left of it after 30 s."""
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:  # the group may outlive its leader (a run process)
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=30)
        self.processes.clear()

    def __enter__(self) -> "Servers":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
