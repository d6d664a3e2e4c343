"""The Dagster instance `sctc run` executes in, the tags that tie its runs to its process, and the sweep that
marks runs of killed processes as failed.

`sctc run` and `sctc ui` share one instance ($DAGSTER_HOME): run storage, event log and schedules. Only
`sctc run` leaves out compute-log capture (NoOpComputeLogManager): with it Dagster starts a `tail` process and a
Python `watch_orphans` process for every step to copy stdout/stderr into files, which costs more CPU than a
replayed partition's work; what `sctc run` prints is on its terminal and in its log file anyway. Runs launched
from the UI keep the instance's own compute-log manager, so their step logs stay viewable there. Where the
instance keeps Dagster's default SQLite storage, `sctc run` writes its event log through
`FastSqliteEventLogStorage` and its runs through `FastSqliteRunStorage` (the same files; open connections instead
of a new engine and connection per event or call, see `sctc_assets.running.event_log` and
`sctc_assets.running.run_storage`); an instance configured with other storage (Postgres) keeps it.

A `sctc run` killed with SIGKILL leaves its current run in state STARTED for ever (no process is left to report
the end, and Dagster's run monitoring only watches runs its run launcher started). Each run therefore carries
the host, pid and start time of its process; `sweep_dead_runs` fails the runs whose process is gone.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import dagster as dg

from sctc_assets.running.dagster_internals import (NOOP_COMPUTE_LOG_MANAGER, SQLITE_SCHEDULE_STORAGE, InstanceRef,
                                                   dagster_instance_config)

NO_COMPUTE_LOGS = NOOP_COMPUTE_LOG_MANAGER
# Process bookkeeping, kept out of the Runs page's tag list (the UI hides keys under `.dagster/`); runs of earlier
# versions carry them under `sctc/`, read as a fallback.
HOST_TAG, PID_TAG, PROCESS_START_TAG = ".dagster/sctc_host", ".dagster/sctc_pid", ".dagster/sctc_process_start"
LEGACY_TAGS = {HOST_TAG: "sctc/host", PID_TAG: "sctc/pid", PROCESS_START_TAG: "sctc/process_start"}


def run_tag(run: Any, key: str, default: str | None = None) -> str | None:
    """A bookkeeping tag of `run`, under its key or the key earlier versions wrote it under."""
    tags = run.tags
    return tags.get(key) or (tags.get(LEGACY_TAGS[key]) if key in LEGACY_TAGS else None) or default
UNFINISHED = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]


def _fast_sqlite_storage(base: str) -> dict:
    """The instance's default SQLite storage, its runs and event log written by `FastSqliteRunStorage` and
    `FastSqliteEventLogStorage` (the same files)."""
    history = os.path.join(base, "history")
    return {"run_storage": {"module": "sctc_assets.running.run_storage", "class": "FastSqliteRunStorage",
                            "config": {"base_dir": history}},
            "event_log_storage": {"module": "sctc_assets.running.event_log", "class": "FastSqliteEventLogStorage",
                                  "config": {"base_dir": os.path.join(history, "runs")}},
            "schedule_storage": {**SQLITE_SCHEDULE_STORAGE, "config": {"base_dir": os.path.join(base, "schedules")}}}


def cli_instance(home: str | Path | None = None) -> dg.DagsterInstance:
    """The instance at `home` (default $DAGSTER_HOME) with its storage, without compute-log capture."""
    base = str(home or os.environ["DAGSTER_HOME"])
    overrides: dict = {"compute_logs": NO_COMPUTE_LOGS}
    configured, _ = dagster_instance_config(base)
    if not any(configured.get(name) for name in ("storage", "run_storage", "event_log_storage", "schedule_storage")):
        overrides.update(_fast_sqlite_storage(base))
    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(base, overrides=overrides))


def _process_start(pid: int) -> str | None:
    """The kernel's start time of `pid` (clock ticks after boot), so a recycled pid is not taken for the same
    process; None where /proc does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, counted after the command name


def process_tags() -> dict[str, str]:
    pid = os.getpid()
    tags = {HOST_TAG: socket.gethostname(), PID_TAG: str(pid)}
    start = _process_start(pid)
    if start is not None:
        tags[PROCESS_START_TAG] = start
    return tags


def _alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    return start is None or _process_start(pid) in (None, start)


def sweep_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark as failed the unfinished runs whose `sctc run` process on this host no longer exists; their ids."""
    host, swept = socket.gethostname(), []
    runs = {run.run_id: run for key in (HOST_TAG, LEGACY_TAGS[HOST_TAG])
            for run in instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED, tags={key: host}))}
    for run in runs.values():
        pid = run_tag(run, PID_TAG, "")
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid), run_tag(run, PROCESS_START_TAG)):
            continue
        instance.report_run_failed(run, message=f"the sctc run process (pid {pid} on {host}) ended without "
                                                 "finishing this run (killed?); marked failed by a later sctc command")
        swept.append(run.run_id)
    return swept


def report_dead_runs(instance: dg.DagsterInstance | None = None) -> list[str]:
    """`sweep_dead_runs` on `instance` (default: the one at $DAGSTER_HOME), saying what it marked."""
    swept = sweep_dead_runs(instance or cli_instance())
    if swept:
        print(f"marked {len(swept)} unfinished run(s) of a killed sctc run as failed: {', '.join(swept)}")
    return swept
