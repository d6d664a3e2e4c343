"""What `term_bias_factors` and `name_bias_factors` add to the SC-TC-Bench re-analysis: cold `sctc run`s of the
term and name benchmarks over the 11 replays, with the two stages and without them, alternating, in one invocation.

    python bench/bias_factors_cost.py [--pairs 2] [--benchmarks term name] [--models KEY …]

Each run is `reanalysis_run.py`'s cold run: a child process (`python -m sctc_assets.cli run … --no-report`) in a fresh,
empty data folder, sharing one warm download cache (filled by `sctc fetch` first, untimed), `HF_HUB_OFFLINE=1`.
"Without" runs the same command with the two assets taken out of the benchmarks' specs (`SPECS`, before anything
else reads them), so its runs, jobs and exported tables are today's. Pairs
alternate (without, with, without, with, …) so drift in the machine's load falls on both. Printed: the CPU (lscpu
model and the vector extensions its flags list), the load average before and after, CPU seconds (user + sys of the
child and its workers) beside wall seconds per run, and the ratios with/without of the summed CPU and wall seconds
(target ≤ 1.1). The machine may be shared, so CPU seconds are the figure to compare. Needs $SCTC_UPSTREAM.
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

NEW = ("term_bias_factors", "name_bias_factors")

# The CLI with the new stages out of every spec's stage lists: the code path of before they existed.
WITHOUT = f"""
import dataclasses
import sys
from sctc_assets import benchmarks
for name, spec in list(benchmarks.SPECS.items()):
    if any(asset in spec.assets for asset in {NEW!r}):
        benchmarks.SPECS[name] = dataclasses.replace(
            spec, assets={{key: entry for key, entry in spec.assets.items() if key not in {NEW!r}}})
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
    parser.add_argument("--pairs", type=int, default=2, help="alternating (without, with) pairs (default 2)")
    args = parser.parse_args()
    if not os.environ.get("SCTC_UPSTREAM"):
        raise SystemExit("set SCTC_UPSTREAM to the SC-TC-Bench archive or folder")
    scratch = Path(tempfile.mkdtemp(prefix="sctc-bias-factors-"))
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
            for variant in ("without", "with"):
                folder = scratch / f"{variant}-{index}"
                _fresh(folder)
                env = {**base_env, "SCTC_DATA_DIR": str(folder), "DAGSTER_HOME": str(folder / "dagster_home")}
                head = [sys.executable, "-c", WITHOUT] if variant == "without" else \
                    [sys.executable, "-m", "sctc_assets.cli"]
                out = folder / "out"
                result = _run([*head, "run", *options, "--no-report", "--out", str(out)], env,
                              scratch / f"{variant}-{index}.log")
                exported = {path.stem for path in out.glob("*.parquet")}
                if (variant == "with") != all(name in exported for name in NEW):
                    raise SystemExit(f"{variant} run exported {sorted(exported & set(NEW))} of {NEW}")
                results.append((variant, result))
                print(f"  {variant:8} {result['cpu']:7.1f} CPU s {result['wall']:7.1f} wall s   load {load()}",
                      flush=True)
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"load average after: {load()}")
    total = {variant: {key: sum(result[key] for name, result in results if name == variant) for key in ("cpu", "wall")}
             for variant in ("without", "with")}
    print(f"sctc run {' '.join(options[:1 + len(args.benchmarks)])} over {len(args.models)} models, cold, "
          f"{args.pairs} pair(s), alternating")
    for variant in ("without", "with"):
        print(f"{variant:8} CPU {total[variant]['cpu'] / args.pairs:7.1f} s  wall {total[variant]['wall'] / args.pairs:7.1f}"
              " s (mean per run)")
    print(f"with / without: CPU {total['with']['cpu'] / total['without']['cpu']:.3f}, "
          f"wall {total['with']['wall'] / total['without']['wall']:.3f} (target ≤ 1.1)")


if __name__ == "__main__":
    main()
