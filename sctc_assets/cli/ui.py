"""`sctc ui`: `dagster dev` on the same instance as `sctc run`, stopped cleanly by the signals this process gets."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from sctc_assets.cli.selection import print_problems
from sctc_assets.running.instance import report_dead_runs
from sctc_assets.cli.validation import storage_problems

# Forwarded to `dagster dev` so that stopping `sctc ui` stops the UI and its daemon.
# `dagster dev` warns on every start that it is superseded by `dg dev` (the `dg` CLI of the dagster-dg packages, which
# this project does not install): that one warning is filtered ($PYTHONWARNINGS of the child), every other still shows.
QUIET_SUPERSESSION = "ignore:Function `dev_command` is superseded:FutureWarning"
WARNINGS_ENV = "PYTHONWARNINGS"
FORWARDED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
WORKSPACE = Path(__file__).resolve().parents[2] / "workspace.yaml"


def run_forwarding_signals(command: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """Run `command` in its own process group, pass it every SIGINT/SIGTERM/SIGHUP this process receives, and wait
    for it to exit; its exit status (128 + N when a signal N ended it) is returned.

    Its own group, so a Ctrl-C in the terminal reaches it once (through us) rather than twice, which `dagster dev`
    would take as "stop now" instead of shutting its webserver and daemon down."""
    process = subprocess.Popen(list(command), start_new_session=True, env=env)

    def forward(signum: int, frame: Any) -> None:
        if process.poll() is None:
            process.send_signal(signum)

    previous = {number: signal.signal(number, forward) for number in FORWARDED_SIGNALS}
    try:
        while True:
            try:
                status = process.wait()
                break
            except InterruptedError:  # a signal arrived while waiting; it was forwarded, keep waiting
                continue
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return status if status >= 0 else 128 - status


def main(args: argparse.Namespace) -> int:
    problems = storage_problems()  # the instance on $SCTC_DATABASE_URL's database: reachable, password
    if problems:
        return print_problems(problems)
    report_dead_runs()  # runs of a killed `sctc run` would otherwise show as running for ever
    # This interpreter's dagster, so the UI works without an activated virtual environment.
    command = [sys.executable, "-m", "dagster", "dev", "-p", str(args.port)]
    command += ["-w", str(WORKSPACE)] if WORKSPACE.exists() else ["-m", "sctc_assets.definitions"]
    print(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']}: {' '.join(command)}")
    filters = [os.environ[WARNINGS_ENV]] if os.environ.get(WARNINGS_ENV) else []
    return run_forwarding_signals(command, {**os.environ, WARNINGS_ENV: ",".join([*filters, QUIET_SUPERSESSION])})
