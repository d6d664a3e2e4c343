"""How fast the `sctc` command line answers: `sctc --help` and `sctc models` against importing the asset
definitions (what every command paid before), and `sctc plan` on the paper-scale name benchmark for 3 models.

Each command runs in its own process, side by side in one run; wall seconds and CPU seconds (user + system of the
child) are printed, with the ratio to the definitions import. The plan runs in a fresh data folder whose response
cache holds 1,000 answers of the first model, so one model is counted key by key against the cache and the others
take the "nothing of this model is cached" path, as on a first audit. Targets (issues #16, #11): `--help` and
`models` ≤ 2 s, the plan < 10 s on 2 cores. `--baseline DIR` (a checkout of another commit, e.g. a `git worktree`)
runs every command from there too, alternating with this checkout's, and prints the ratio of this checkout's CPU
seconds to the baseline's (the plan shares one seeded cache: the cache keys do not depend on the code version).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODELS = ["openai-gpt-4o-mini", "openrouter-gpt-4o-mini", "vllm-qwen2.5-7b-instruct"]


def timed(command: list[str], env: dict[str, str], cwd: Path = REPO) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def seed_cache(env: dict[str, str], registry: Path, answers: int) -> None:
    """Store `answers` answers of the first model to its first name partition, keyed as `generate` keys them."""
    code = f"""
import os
from sctc_assets.lib.cache import cache_key
from sctc_assets.lib.generation import GenerationResult
from sctc_assets.lib.model_registry import load_registry
from sctc_assets.cli.plan import _name_design, keyed_request
from sctc_assets.resources.model_registry import ModelRegistryResource
entries = load_registry({str(registry)!r})
design = _name_design([entries[{MODELS[0]!r}]], {{}})[0]
registry = ModelRegistryResource(registry_path={str(registry)!r})
backend = registry.backend({MODELS[0]!r})
cache = registry.cache()
identity = backend.identity()
keyed = keyed_request(backend) or (lambda request: request)  # the per-trial seed is part of the key, as in generate
for request in map(keyed, design.requests[:{answers}]):
    cache.put(cache_key(identity, request), identity, request,
              GenerationResult(text="王秀英", input_tokens=200, output_tokens=4))
cache.close()
"""
    subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each quick command (the median is shown)")
    parser.add_argument("--cached", type=int, default=1000, help="answers of the first model in the cache")
    parser.add_argument("--baseline", type=Path, help="another checkout to run every command from too, for ratios")
    args = parser.parse_args(argv)
    if args.baseline is not None:
        return compare(args)
    python = sys.executable
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "SCTC_DATA_DIR": folder, "DAGSTER_HOME": str(Path(folder) / "home"),
               "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
        registry = Path(folder) / "presets.yaml"
        registry.write_text(timed([python, "-m", "sctc_assets.cli", "models", "--presets"], env)[2], encoding="utf-8")
        quick = {
            "import sctc_assets.definitions (before)": [python, "-c", "import sctc_assets.definitions"],
            "sctc --help": [python, "-m", "sctc_assets.cli", "--help"],
            "sctc run --help": [python, "-m", "sctc_assets.cli", "run", "--help"],
            "sctc models": [python, "-m", "sctc_assets.cli", "models"],
        }
        results = {}
        for label, command in quick.items():
            runs = sorted((timed(command, env)[:2] for _ in range(args.repeats)), key=lambda run: run[0])
            results[label] = runs[len(runs) // 2]
        baseline_wall, baseline_cpu = results["import sctc_assets.definitions (before)"]
        print(f"{'command':<42} {'wall s':>7} {'CPU s':>7} {'CPU ÷ definitions import':>26}")
        for label, (wall, cpu) in results.items():
            print(f"{label:<42} {wall:7.2f} {cpu:7.2f} {cpu / baseline_cpu:26.2f}")

        seed_cache(env, registry, args.cached)
        plan = [python, "-m", "sctc_assets.cli", "plan", "--benchmarks", "name", "--registry", str(registry),
                "--models", *MODELS]
        wall, cpu, out = timed(plan, env)
        calls = next((line for line in out.splitlines() if line.startswith(f"| {MODELS[0]} ")
                      and "132,540" in line), "")
        print(f"\nsctc plan --benchmarks name (paper scale, 3 models, {args.cached:,} answers cached): "
              f"{wall:.2f} s wall, {cpu:.2f} s CPU = {cpu / baseline_cpu:.2f}× the definitions import (target < 10 s)")
        print(f"  {calls.strip()}")
        print(f"load average while measuring: {' '.join(f'{value:.1f}' for value in os.getloadavg())}")


def compare(args: argparse.Namespace) -> None:
    """Each command from this checkout and from `args.baseline`, alternating, the median of `args.repeats` runs."""
    python = sys.executable
    trees = {"new": REPO, "baseline": args.baseline.resolve()}
    with tempfile.TemporaryDirectory() as folder:
        base_env = {**os.environ, "SCTC_DATA_DIR": folder, "DAGSTER_HOME": str(Path(folder) / "home"),
                    "HF_HUB_OFFLINE": "1"}
        envs = {name: {**base_env, "PYTHONPATH": str(tree)} for name, tree in trees.items()}
        registry = Path(folder) / "presets.yaml"
        registry.write_text(timed([python, "-m", "sctc_assets.cli", "models", "--presets"], envs["new"])[2],
                            encoding="utf-8")
        seed_cache(envs["new"], registry, args.cached)
        commands = {
            "sctc --help": ["--help"], "sctc run --help": ["run", "--help"], "sctc models": ["models"],
            "sctc plan --benchmarks name (3 models)": ["plan", "--benchmarks", "name", "--registry", str(registry),
                                                       "--models", *MODELS],
        }
        print(f"{'command':<42} {'new CPU s':>10} {'baseline CPU s':>15} {'new ÷ baseline':>15}")
        for label, arguments in commands.items():
            runs: dict[str, list[float]] = {name: [] for name in trees}
            for _ in range(args.repeats):
                for name, tree in trees.items():
                    runs[name].append(timed([python, "-m", "sctc_assets.cli", *arguments], envs[name], tree)[1])
            new, baseline = (sorted(runs[name])[len(runs[name]) // 2] for name in ("new", "baseline"))
            print(f"{label:<42} {new:10.2f} {baseline:15.2f} {new / baseline:15.2f}")
        print(f"baseline: {trees['baseline']}; load average while measuring: "
              f"{' '.join(f'{value:.1f}' for value in os.getloadavg())}")


if __name__ == "__main__":
    main()
