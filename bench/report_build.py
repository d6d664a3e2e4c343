"""How long the audit report takes to build from materialized tables, measured side by side in one run.

    python bench/report_build.py time --data-dir DIR [--registry YAML] [--screenshot docs/audit-report.png]
    python bench/report_build.py copies --source PRO_RESULTS_DIR --target DIR --count 17

`time` builds the report from DIR/storage (a `$SCTC_DATA_DIR` that `sctc run` filled) three ways, in this order:
the library with figures drawn in this process, the library with figures drawn in 2 worker processes, and
`sctc report` end to end (a new process: imports, Dagster run, instance). It prints wall and CPU seconds of each
(CPU includes child processes), the ratios, and whether each stayed under the 30 s target.

`copies` writes COUNT Pro-study result files for a timing run at the Pro study's scale (17 models) when fewer are
published: the published files as they are, then renamed copies (`<model>-copy<k>`, answers unchanged). They are
for timing only: import them into a scratch data folder, never into one whose report you read.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TARGET_S = 30.0


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _library(storage: Path, registry: Path, out: Path, workers: int) -> tuple[float, float, object]:
    from sctc_assets.lib.model_registry import load_registry
    from sctc_assets.benchmarks import REPORT_INPUTS, REPORT_TABLES, RESPONSE_TABLES, report_sections
    from sctc_assets.lib.report import ReportInputs, build_report, read_tables, response_usage

    wall, cpu = time.perf_counter(), _cpu()
    inputs = ReportInputs(benchmark_tables=REPORT_INPUTS, sections=report_sections(),
                          tables=read_tables(storage, REPORT_TABLES), registry=load_registry(registry),
                          usage=response_usage(storage, RESPONSE_TABLES))
    result = build_report(inputs, out, workers=workers)
    return time.perf_counter() - wall, _cpu() - cpu, result


def _cli(data_dir: Path, registry: Path, out: Path) -> tuple[float, float]:
    environment = {**os.environ, "SCTC_DATA_DIR": str(data_dir), "SCTC_MODELS": str(registry)}
    environment.pop("DAGSTER_HOME", None)
    wall, cpu = time.perf_counter(), _cpu()
    subprocess.run([sys.executable, "-m", "sctc_assets.cli", "report", "--out", str(out)], cwd=REPO,
                   env=environment, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - wall, _cpu() - cpu


def _screenshot(html: Path, target: Path) -> None:
    from sctc_assets_tests.chromium import FLAGS, find_chromium

    executable = find_chromium()
    if executable is None:
        print("no chromium: screenshot skipped")
        return
    profile = target.parent / ".chromium-profile"
    flags = [flag for flag in FLAGS if not flag.startswith("--remote-debugging")]
    subprocess.run([executable, *flags, f"--user-data-dir={profile}", "--window-size=1920,1100",
                    "--hide-scrollbars", f"--screenshot={target}", html.resolve().as_uri()],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    shutil.rmtree(profile, ignore_errors=True)
    print(f"screenshot: {target} ({target.stat().st_size // 1024} KB)")


def time_report(args: argparse.Namespace) -> None:
    data_dir = args.data_dir.resolve()
    registry = (args.registry or REPO / "data" / "models.yaml").resolve()
    storage = data_dir / "storage"
    scratch = data_dir / "bench-report"
    rows = []
    serial_wall, serial_cpu, result = _library(storage, registry, scratch / "serial", workers=1)
    rows.append(("library, figures in this process", serial_wall, serial_cpu))
    wall, cpu, _ = _library(storage, registry, scratch / "workers", workers=2)
    rows.append(("library, figures in 2 worker processes", wall, cpu))
    wall, cpu = _cli(data_dir, registry, scratch / "cli")
    rows.append(("sctc report (new process, Dagster run)", wall, cpu))
    manifest = json.loads(result.manifest.read_text())
    load = os.getloadavg()[0]
    print(f"{len(manifest['models'])} models, {len(manifest['figures'])} figures (PNG + SVG), "
          f"{len(manifest['missing'])} missing parts; {os.cpu_count()} CPUs, load average {load:.1f} at the end")
    print(f"{'build':42} {'wall s':>8} {'CPU s':>8} {'wall ÷ serial':>14}  wall < {TARGET_S:.0f} s"
          f"  CPU < {TARGET_S:.0f} s")
    for label, wall, cpu in rows:
        print(f"{label:42} {wall:8.1f} {cpu:8.1f} {wall / serial_wall:14.2f}  {'yes' if wall < TARGET_S else 'NO':>10}"
              f"  {'yes' if cpu < TARGET_S else 'NO':>9}")
    if load > (os.cpu_count() or 1):
        print("The machine is loaded by other work: wall times are inflated; CPU seconds below the target mean the "
              "build fits in it on idle cores even without parallelism.")
    if args.screenshot:
        _screenshot(scratch / "cli" / "report" / "index.html", args.screenshot.resolve())


def copies(args: argparse.Namespace) -> None:
    sources = sorted(args.source.glob("*_bilingual.json"))
    if not sources:
        raise SystemExit(f"{args.source}: no *_bilingual.json result files")
    args.target.mkdir(parents=True, exist_ok=True)
    for index in range(args.count):
        source = sources[index % len(sources)]
        rounds = index // len(sources)
        if rounds == 0:
            shutil.copyfile(source, args.target / source.name)
            continue
        document = json.loads(source.read_text(encoding="utf-8"))
        model, stamp = source.name.split("_", 1)
        document["model"] = f"{model}-copy{rounds}"
        (args.target / f"{model}-copy{rounds}_{stamp}").write_text(json.dumps(document, ensure_ascii=False),
                                                                  encoding="utf-8")
    print(f"{args.count} result files in {args.target} ({len(sources)} published, the rest renamed copies)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    timing = commands.add_parser("time", help="time the report build")
    timing.add_argument("--data-dir", type=Path, required=True, help="a $SCTC_DATA_DIR with materialized tables")
    timing.add_argument("--registry", type=Path, help="the registry the tables were made with")
    timing.add_argument("--screenshot", type=Path, help="also save a screenshot of the built page here")
    copy = commands.add_parser("copies", help="Pro-study result files at the study's scale, for timing")
    copy.add_argument("--source", type=Path, required=True)
    copy.add_argument("--target", type=Path, required=True)
    copy.add_argument("--count", type=int, default=17)
    args = parser.parse_args()
    {"time": time_report, "copies": copies}[args.command](args)


if __name__ == "__main__":
    main()
