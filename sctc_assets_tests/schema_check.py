"""Stored tables against their declared schemas: what the tests of every benchmark can assert after a run."""

from __future__ import annotations

import pandas as pd

from sctc_assets.benchmarks import TABLE_SCHEMAS
from sctc_assets.lib.schemas import frame_problems
from sctc_assets.resources.io_manager import ParquetIOManager


def stored_table_problems(io_manager: ParquetIOManager, tables=None) -> dict[str, list[str]]:
    """Table → its schema problems (`frame_problems`), over every stored partition, for the tables found on disk."""
    root = io_manager._root()
    problems: dict[str, list[str]] = {}
    for name in tables or TABLE_SCHEMAS:
        single = root / f"{name}.parquet"
        files = [single] if single.exists() else sorted((root / name).rglob("*.parquet"))
        if not files:
            continue
        found: set[str] = set()
        for path in files:
            found.update(f"{path.relative_to(root)}: {problem}"
                         for problem in frame_problems(pd.read_parquet(path), TABLE_SCHEMAS[name]))
        problems[name] = sorted(found)
    return problems
