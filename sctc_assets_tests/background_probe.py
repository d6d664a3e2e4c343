"""Run by `test_background_start.py` as `python -m pytest sctc_assets_tests/background_probe.py` in a process
started as `nohup … &` starts it (SIGINT ignored, a session of its own); not collected by the suite itself.

It materializes an asset on an instance that captures compute logs (so Dagster starts a `tail -F` and a
`watch_orphans` helper per step), on the main thread and on a worker thread as `sctc run`'s runner does, and
writes to `$SCTC_PROBE_OUT` how long each took and which of its child processes were left after each."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import dagster as dg


@dg.asset
def chatty() -> int:
    print("some output for the compute-log capture")
    return 1


def _children() -> list[str]:
    """The command lines of this process's live children (zombies included: they were not reaped)."""
    found = []
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        for pid in Path(f"/proc/{os.getpid()}/task/{task}/children").read_text().split():
            try:
                found.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
                             or f"<{pid} defunct>")
            except OSError:
                pass
    return found


def test_materializations_with_compute_logs():
    base = Path(os.environ["SCTC_PROBE_DIR"])
    runs = []

    def materialize(where: str) -> None:
        started, home = time.monotonic(), base / f"{where}-{len(runs)}"
        home.mkdir(parents=True)
        with dg.instance_for_test(temp_dir=str(home)) as instance:
            assert dg.materialize([chatty], instance=instance).success
        runs.append({"where": where, "seconds": time.monotonic() - started, "children": _children()})

    for where in ("main", "thread", "main", "thread"):
        if where == "main":
            materialize(where)
        else:
            worker = threading.Thread(target=materialize, args=(where,))
            worker.start()
            worker.join()
    Path(os.environ["SCTC_PROBE_OUT"]).write_text(json.dumps(
        {"sigint": str(signal.getsignal(signal.SIGINT)), "sigterm": str(signal.getsignal(signal.SIGTERM)),
         "runs": runs}))
