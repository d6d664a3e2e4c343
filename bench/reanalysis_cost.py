"""What new stages add to the SC-TC-Bench re-analysis: cold `sctc run`s of the term and name benchmarks over the 11
replays, this checkout against a baseline, alternating, in one invocation.

    python bench/reanalysis_cost.py [--baseline CHECKOUT | --without ASSET …] [--pairs 2] [--keep DIR]
                                    [--benchmarks term name] [--models KEY …]

The baseline is either another checkout (`--baseline`, e.g. a git worktree of main before the change: its code,
run from its folder) or this checkout with some assets taken out of the benchmarks' specs (`--without`, default the
two bias-factor stages: `SPECS` edited before anything else reads them, so its runs, jobs and tables are those of a
checkout without them). Each run is `reanalysis_run.py`'s cold run: a child process (`python -m sctc_assets.cli run
… --no-report`) in a fresh, empty data folder, sharing one warm download cache (filled by `sctc fetch` first,
untimed), `HF_HUB_OFFLINE=1`. Pairs alternate (baseline, this, baseline, this, …) so drift in the machine's load
falls on both. Printed: the CPU (lscpu model and the vector extensions its flags list), the load average before and
after, CPU seconds (user + sys of the child and its workers) beside wall seconds per run, and the ratios this /
baseline of the summed CPU and wall seconds (target ≤ 1.1). The machine may be shared, so CPU seconds are the
figure to compare. `--keep DIR` keeps the first pair's exported tables in DIR/baseline and DIR/this, for
`bench/compare_outputs.py`. Needs $SCTC_UPSTREAM.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reanalysis_run import PAPER_MODELS, REPO, _fresh, _run  # noqa: E402

DEFAULT_WITHOUT = ("term_bias_factors", "name_bias_factors")

# The CLI with the new stages out of every spec's stage lists: the code path of before they existed.
WITHOUT = """
import dataclasses
import sys
from sctc_assets import benchmarks
for name, spec in list(benchmarks.SPECS.items()):
    if any(asset in spec.assets for asset in {without!r}):
        benchmarks.SPECS[name] = dataclasses.replace(
            spec, assets={{key: entry for key, entry in spec.assets.items() if key not in {without!r}}})
sys.argv[0] = "sctc"
from sctc_assets.cli import program
program()
"""

VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "amx_tile", "neon", "sve")


def cpu_line() -> str:
    try:
        lines = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "lscpu unavailable"
    fields = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in lines if ":" in line}
    flags = set(fields.get("Flags", "").split())
    return (f"{fields.get('Model name', '?')}, {fields.get('CPU(s)', '?')} CPUs, vector: "
            f"{' '.join(flag for flag in VECTOR_FLAGS if flag in flags) or 'none listed'}")


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", default=["term", "name"])
    parser.add_argument("--models", nargs="+", default=PAPER_MODELS)
    parser.add_argument("--pairs", type=int, default=2, help="alternating (baseline, this) pairs (default 2)")
    parser.add_argument("--baseline", type=Path, help="another checkout whose code is the baseline")
    parser.add_argument("--without", nargs="+", metavar="ASSET",
                        help=f"the baseline is this checkout without these assets (default: {' '.join(DEFAULT_WITHOUT)})")
    parser.add_argument("--keep", type=Path, help="keep the first pair's exported tables in DIR/baseline, DIR/this")
    args = parser.parse_args()
    if not os.environ.get("SCTC_UPSTREAM"):
        raise SystemExit("set SCTC_UPSTREAM to the SC-TC-Bench archive or folder")
    if args.baseline is not None and args.without:
        raise SystemExit("--baseline and --without are two kinds of baseline: name one")
    without = tuple(args.without or DEFAULT_WITHOUT)
    baseline = args.baseline.resolve() if args.baseline is not None else None
    scratch = Path(tempfile.mkdtemp(prefix="sctc-reanalysis-cost-"))
    base_env = {name: value for name, value in os.environ.items()
                if name not in ("SCTC_MODELS", "DAGSTER_HOME", "SCTC_NO_REPORT")}
    base_env.update(SCTC_DOWNLOAD_CACHE=str(scratch / "download-cache"), HF_HUB_OFFLINE="1")
    options = ["--benchmarks", *args.benchmarks, "--models", *args.models]
    print(f"CPU: {cpu_line()}")
    print(f"load average before: {load()}")
    results: list[tuple[str, dict[str, float]]] = []
    try:
        _run([sys.executable, "-m", "sctc_assets.cli", "fetch", *options],
             {**base_env, "SCTC_DATA_DIR": str(scratch / "fetch")}, scratch / "fetch.log")
        for index in range(args.pairs):
            for variant in ("baseline", "this"):
                folder = scratch / f"{variant}-{index}"
                _fresh(folder)
                env = {**base_env, "SCTC_DATA_DIR": str(folder), "DAGSTER_HOME": str(folder / "dagster_home")}
                code = REPO
                if variant == "this":
                    head = [sys.executable, "-m", "sctc_assets.cli"]
                elif baseline is not None:
                    head, code = [sys.executable, "-m", "sctc_assets.cli"], baseline
                    env["PYTHONPATH"] = str(baseline)
                else:
                    head = [sys.executable, "-c", WITHOUT.format(without=without)]
                out = folder / "out"
                result = _run([*head, "run", *options, "--no-report", "--out", str(out)], env,
                              scratch / f"{variant}-{index}.log", code)
                results.append((variant, result))
                print(f"  {variant:8} {result['cpu']:7.1f} CPU s {result['wall']:7.1f} wall s   load {load()}",
                      flush=True)
                if args.keep is not None and index == 0:
                    shutil.copytree(out, args.keep / variant)
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"load average after: {load()}")
    total = {variant: {key: sum(result[key] for name, result in results if name == variant) for key in ("cpu", "wall")}
             for variant in ("baseline", "this")}
    print(f"sctc run {' '.join(options[:1 + len(args.benchmarks)])} over {len(args.models)} models, cold, "
          f"{args.pairs} pair(s), alternating; baseline: "
          + (f"the checkout {baseline}" if baseline is not None else f"this checkout without {', '.join(without)}"))
    for variant in ("baseline", "this"):
        print(f"{variant:8} CPU {total[variant]['cpu'] / args.pairs:7.1f} s  wall {total[variant]['wall'] / args.pairs:7.1f}"
              " s (mean per run)")
    print(f"this / baseline: CPU {total['this']['cpu'] / total['baseline']['cpu']:.3f}, "
          f"wall {total['this']['wall'] / total['baseline']['wall']:.3f} (target ≤ 1.1)")


if __name__ == "__main__":
    main()
