"""A subset of the test suite started in a terminal's way and as a background job, side by side.

    python bench/background_suite.py [--rounds N] [TEST_PATH …]

Foreground: `python -m pytest -q TESTS` as a child of this script (SIGINT as a terminal leaves it). Background:
`nohup python -m pytest -q TESTS > LOG 2>&1 &` from a non-interactive `bash -c`, which starts pytest with SIGINT
ignored (and SIGHUP, by nohup) and returns at once; its end is awaited by watching its pid. The two alternate
(`--rounds` pairs), so a change in the machine's load meets both. Each run gets a `$TMPDIR` of its own, where
Dagster's test instances keep their compute logs; after a run ends, the `tail` processes whose command line names
that folder are the compute-log helpers it left behind (a run that reaps them leaves 0). Printed: each run's wall
seconds and pytest's summary line, per round the background/foreground ratio, and `uptime` before and after.
Default tests: Dagster materializations on instances that capture compute logs, about 1 minute on 2 idle cores.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TESTS = ["sctc_assets_tests/test_freshness.py", "sctc_assets_tests/test_automation.py",
                 "sctc_assets_tests/test_partitions.py"]


def _pytest(tests: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]


def _tails_naming(folder: Path) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and os.path.basename(cmdline[0]) == b"tail" and any(str(folder).encode() in part
                                                                        for part in cmdline):
            count += 1
    return count


def _summary(output: str) -> str:
    lines = [line for line in output.splitlines() if re.search(r"\b(passed|failed|error)", line)]
    return lines[-1].strip("= ") if lines else "(no pytest summary)"


def _foreground(tests: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.monotonic()
    # As from a terminal: SIGINT at its default, whatever this script was started with.
    done = subprocess.run(_pytest(tests), cwd=REPO, env=env, capture_output=True, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return time.monotonic() - started, _summary(done.stdout + done.stderr)


def _background(tests: list[str], env: dict[str, str], log: Path) -> tuple[float, str]:
    script = f"nohup {shlex.join(_pytest(tests))} > {shlex.quote(str(log))} 2>&1 & echo $!"
    started = time.monotonic()
    # A fresh session without a terminal, as a job started from a script or over ssh would have.
    pid = int(subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                             check=True, start_new_session=True).stdout.split()[-1])
    while Path(f"/proc/{pid}").exists():  # not our child (bash has exited): watch for its end
        try:
            if (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) == "Z":
                break
        except (OSError, IndexError):
            break
        time.sleep(0.2)
    return time.monotonic() - started, _summary(log.read_text(errors="replace"))


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tests", nargs="*", default=DEFAULT_TESTS)
    parser.add_argument("--rounds", type=int, default=1, help="foreground/background pairs (default 1)")
    args = parser.parse_args()
    print(f"tests: {' '.join(args.tests)}")
    print(f"before: {_uptime()}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="sctc-background-suite-") as scratch:
        for round_number in range(1, args.rounds + 1):
            results = {}
            for mode in ("foreground", "background"):
                tmp = Path(scratch) / f"{mode}-{round_number}"
                tmp.mkdir()
                env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO)}
                if mode == "foreground":
                    seconds, summary = _foreground(args.tests, env)
                else:
                    seconds, summary = _background(args.tests, env, Path(scratch) / f"{mode}-{round_number}.log")
                time.sleep(1)  # helpers orphaned at the end would still be running now
                results[mode] = (seconds, summary, _tails_naming(tmp))
                print(f"round {round_number} {mode:>10}: {seconds:7.1f} s wall, {results[mode][2]} tail process(es) "
                      f"left, {summary}", flush=True)
            rows.append(results)
    print(f"\n{'round':>5} {'foreground s':>13} {'background s':>13} {'bg/fg':>6} {'tails fg':>9} {'tails bg':>9}")
    for number, results in enumerate(rows, 1):
        fg, bg = results["foreground"], results["background"]
        print(f"{number:>5} {fg[0]:>13.1f} {bg[0]:>13.1f} {bg[0] / fg[0]:>6.2f} {fg[2]:>9} {bg[2]:>9}")
    print(f"after: {_uptime()}")
    ok = all(r[2] == 0 and "failed" not in r[1] and "error" not in r[1] for results in rows for r in results.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
