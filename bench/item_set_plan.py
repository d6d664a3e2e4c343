"""How fast `sctc plan` answers for a big item set: the csld three-places list (987 concepts) in 4 varieties, against
the default `sctc plan`, side by side in one run.

The csld list has no definitions, and its licence forbids keeping a derivative: the set is built at run time in a
temporary folder (each concept given a made-up definition, `write_item_csv`) and registered there in a temporary
`$SCTC_ITEM_SETS` as `csld4` (varieties zh-TW, zh-CN, zh-HK, zh-MO). Then, each in its own process, alternating:
- `sctc plan --term-items csld4`: the registered set, a benchmark from the start (the issue's command);
- `sctc plan --term-items <csv> --varieties …`: the same set by its path, unregistered, which this process checks and
  then plans in a child process that knows it (`cli/item_sets.py`), so it pays the start-up twice;
- `sctc plan`: the default plan (the term benchmark on the paper's 110 terms, the default models).
Each runs `--repeats` times in a fresh data folder (nothing cached); the median wall and CPU seconds (the child's
user + system) are printed, with the ratio to the default plan and the 5 s target (issue: "a 987-concept, 4-variety
plan answers in under 5 s" on 2 cores), and the load average before and after, since a shared machine inflates wall
seconds (CPU seconds much less).

    SCTC_CSLD_UPSTREAM=/path/to/moedict-data-csld SCTC_UPSTREAM=/path/to/SC-TC-Bench-aaad554.tar.xz \\
        python bench/item_set_plan.py --repeats 5
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

# Run as a plain script from a checkout: make the repository importable without installing it.
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from cli_speed import timed  # noqa: E402  (the same wall and CPU timing as the other CLI benchmarks)

VARIETIES = ("zh-TW", "zh-CN", "zh-HK", "zh-MO")
SET_NAME = "csld4"
TARGET_SECONDS = 5.0


def build_set(folder: Path, csld: Path | None) -> tuple[Path, Path, int]:
    """The csld three-places list with made-up definitions as a CSV in `folder`, and a registry naming it `csld4`."""
    from sctc_assets.lib.term.items import CSLD_THREE_PLACES, csld_path, from_csld, write_item_csv

    path = csld / CSLD_THREE_PLACES if csld is not None else csld_path(CSLD_THREE_PLACES)
    if path is None or not path.is_file():
        raise SystemExit(f"no csld list: give --csld or set $SCTC_CSLD_UPSTREAM (looked for {path})")
    item_set = from_csld(path)
    concepts = tuple(replace(concept, definition_zh_hans=f"第{number}个概念：一种日常生活用品",
                             definition_zh_hant=f"第{number}個概念：一種日常生活用品")
                     for number, concept in enumerate(item_set.concepts, start=1))
    items = write_item_csv(replace(item_set, concepts=concepts), folder / f"{SET_NAME}.csv")
    registry = folder / "item_sets.yaml"
    registry.write_text(f"item_sets:\n  {SET_NAME}:\n    source: '{items}'\n    varieties: [{', '.join(VARIETIES)}]\n",
                        encoding="utf-8")
    return items, registry, len(concepts)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs of each plan (the median is shown)")
    parser.add_argument("--csld", type=Path, help="the csld folder (default $SCTC_CSLD_UPSTREAM)")
    parser.add_argument("--no-path", action="store_true",
                        help="skip `--term-items <csv>` (the unregistered set, planned in a child process)")
    args = parser.parse_args(argv)
    python = sys.executable
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        items, registry, concepts = build_set(folder, args.csld)
        base = {key: value for key, value in os.environ.items() if key not in ("SCTC_ITEM_SETS", "DAGSTER_HOME")}
        base.update(SCTC_DATA_DIR=str(folder / "data"), PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
        registered_env = {**base, "SCTC_ITEM_SETS": str(registry)}
        plans = {
            f"sctc plan --term-items {SET_NAME} (registered)": ([python, "-m", "sctc_assets.cli", "plan",
                                                                 "--term-items", SET_NAME], registered_env),
            "sctc plan --term-items <csv> --varieties … (child process)": (
                [python, "-m", "sctc_assets.cli", "plan", "--term-items", str(items), "--varieties", *VARIETIES],
                base),
            "sctc plan (default)": ([python, "-m", "sctc_assets.cli", "plan"], base),
        }
        if args.no_path:
            plans.pop(next(label for label in plans if "child" in label))
        load_before = load()
        runs: dict[str, list[tuple[float, float]]] = {label: [] for label in plans}
        outputs: dict[str, str] = {}
        timed([python, "-c", "import sctc_assets.cli"], base)  # warm the file cache once, for every plan alike
        for _ in range(args.repeats):
            for label, (command, env) in plans.items():
                wall, cpu, outputs[label] = timed(command, env)
                runs[label].append((wall, cpu))
        load_after = load()

        default_wall = median([wall for wall, _ in runs["sctc plan (default)"]])
        print(f"{concepts} concepts × {len(VARIETIES)} varieties ({', '.join(VARIETIES)}), {args.repeats} runs each, "
              f"alternating; median of each; {os.cpu_count()} CPUs")
        print(f"{'command':<60} {'wall s':>7} {'CPU s':>7} {'wall ÷ default':>15} {'vs 5 s target':>14}")
        for label, values in runs.items():
            wall, cpu = median([w for w, _ in values]), median([c for _, c in values])
            verdict = f"{'under' if wall < TARGET_SECONDS else 'OVER'} ({wall / TARGET_SECONDS:.0%})"
            print(f"{label:<60} {wall:7.2f} {cpu:7.2f} {wall / default_wall:15.2f} {verdict:>14}")
            print(f"{'':<60} walls: {' '.join(f'{w:.2f}' for w, _ in values)}")
        total = next((line for line in outputs[next(iter(plans))].splitlines()[::-1] if line.startswith("| ")
                      and "model" not in line), "")
        print(f"\nthe registered plan's total per model: {total.strip()}")
        print(f"load average (1, 5, 15 min) before: {load_before}; after: {load_after} "
              f"(about 0 on an idle machine; near {os.cpu_count()} or more, other work shares these cores)")


if __name__ == "__main__":
    main()
