"""Storing and reading one table through the table store (`lib/table_store.py`), side by side in one run.

- local folder, through the IO manager's `_write`/`read_table`/`_read_stored` against the code they replaced
  (`atomic_files.replacing` + `to_parquet`, `pq.read_table` + the same conversion to pandas); goal: ratio ~1.0,
  the local path must not slow down;
- the same table on fsspec's `memory://` filesystem (built in memory, one put), for scale: what the URL path itself
  costs before any network.

    PYTHONPATH=. python bench/table_store.py [--rows 200000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import sctc_assets.resources.io_manager as io  # noqa: E402
from sctc_assets.lib.atomic_files import replacing  # noqa: E402
from sctc_assets.lib.table_store import location  # noqa: E402


def _table(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"model": "m", "prompt_id": np.arange(rows), "latency_s": rng.random(rows),
                         "answer": pd.array([f"答案 {i} " * 8 for i in range(rows)], dtype="string")})


def _old_write(frame: pd.DataFrame, path: Path) -> None:
    with replacing(path) as staging:
        frame.to_parquet(staging, index=False)


def _old_read(path: Path) -> pd.DataFrame:
    table = pq.read_table(path)
    try:
        table = table.combine_chunks()
    except pa.ArrowException:
        pass
    return table.to_pandas(types_mapper=io._TEXT_TYPES.get)


def _best(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def _side_by_side(actions: dict, repeats: int) -> dict[str, float]:
    """The best time of each action, the actions taking turns, so a change in the machine's load hits them alike."""
    times: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(repeats):
        for name, action in actions.items():
            start = time.perf_counter()
            action()
            times[name].append(time.perf_counter() - start)
    return {name: min(found) for name, found in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    frame = _table(args.rows)
    with tempfile.TemporaryDirectory() as folder:
        local = Path(folder) / "t.parquet"
        remote = location(f"memory://bench-{os.getpid()}/t.parquet")
        results = _side_by_side({
            "write, local: before": lambda: _old_write(frame, local),
            "write, local: now": lambda: io._write(frame, local, "t"),
            "write, memory://": lambda: io._write(frame, remote, "t"),
        }, args.repeats)
        results.update(_side_by_side({
            "read, local: before": lambda: _old_read(local),
            "read, local: now": lambda: io.read_table(local),
            "read, memory://": lambda: io.read_table(remote),
        }, args.repeats))
        io.forget_reads()
        io._read_stored(local)
        results["memo hit, local"] = _best(lambda: io._read_stored(local), args.repeats)
        io._read_stored(remote)
        results["memo hit, memory://"] = _best(lambda: io._read_stored(remote), args.repeats)
        io.forget_reads()
        size = local.stat().st_size
    print(f"{args.rows:,} rows, {size / 1e6:.1f} MB of Parquet, best of {args.repeats}")
    for name, seconds in results.items():
        print(f"  {name:<24} {seconds * 1000:9.3f} ms")
    print(f"local write now/before: {results['write, local: now'] / results['write, local: before']:.2f}")
    print(f"local read  now/before: {results['read, local: now'] / results['read, local: before']:.2f}")
    print(f"memory:// / local: write {results['write, memory://'] / results['write, local: now']:.2f}, "
          f"read {results['read, memory://'] / results['read, local: now']:.2f}")
    print(f"load average: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")


if __name__ == "__main__":
    main()
