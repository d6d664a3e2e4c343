"""What the drift tables' assets (`term_drift`, `name_drift`, `sovereignty_drift`) share: the two epoch tags from the
run config or the environment, no rows without them or for a replay (published answers have no epochs), and the
output with each epoch's answers missing from the cache said in the log and counted in the metadata."""

from __future__ import annotations

import os
from typing import Any, Sequence

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import content_version
from sctc_assets.assets.metadata import table_metadata


class DriftConfig(dg.Config):
    """The run config of a drift table: the two epochs (each benchmark's adds how its answers were asked)."""

    epochs: list[str] = Field(
        default=[], description="The two epoch tags to compare (`none`: the untagged answers; an observed entry's "
                               "`served-<12hex>`); default the benchmark's `$SCTC_<BENCHMARK>_DRIFT` (two tags, "
                               "space-separated); unset: an empty table.")


def chosen_epochs(configured: Sequence[str], env_var: str) -> list[str]:
    """The run config's epoch tags, else `$env_var`'s (two tags, space-separated); empty: none chosen."""
    return list(configured) or (os.environ.get(env_var) or "").split()


def no_rows(columns: Sequence[str], **metadata: Any) -> dg.Output:
    return dg.Output(pd.DataFrame(columns=list(columns)), metadata={"dagster/row_count": 0, **metadata})


def replay_without_epochs(context: dg.AssetExecutionContext, asset: str, backend: Any,
                          columns: Sequence[str]) -> dg.Output | None:
    """No rows for a backend that replays published answers (they have no epochs, and no cache); None otherwise."""
    if backend.uses_cache:
        return None
    context.log.info(f"{asset} {context.partition_key}: a replay of published answers has no epochs; no rows")
    return no_rows(columns)


def drift_output(context: dg.AssetExecutionContext, asset: str, table: pd.DataFrame, per_side: Sequence[str],
                 epochs: Sequence[str], hint: str = "", **metadata: Any) -> dg.Output:
    """The drift table as the asset's output: the answers each epoch lacks in the cache (counted once per
    `per_side` group of rows) warned about and in the metadata as `missing_a`, `missing_b`."""
    sides = table.drop_duplicates(list(per_side))
    missing = {side: int(sides[f"missing_{side}"].sum()) for side in ("a", "b")}
    for side, epoch in zip(("a", "b"), epochs):
        if missing[side]:
            context.log.warning(f"{asset} {context.partition_key}: {missing[side]} answer(s) of epoch {epoch!r} are "
                                f"not in the cache{hint}; counted as missing")
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, preview_rows=12, epochs=dg.MetadataValue.json(list(epochs)), **metadata, missing_a=missing["a"],
        missing_b=missing["b"]))
