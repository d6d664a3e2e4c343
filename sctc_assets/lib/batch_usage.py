"""How many of a responses table's answers came through a provider batch (a non-empty `batch_id` provenance
column), and what they cost at the batch price: the lines `sctc run`'s summary prints and the report's usage table.

Pure Python (pandas): a table written before the `batch_id` column existed has no batch answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from sctc_assets.lib.batch_settings import DEFAULT_PRICE_FACTOR
from sctc_assets.lib.generation import failed_calls

BATCH_COLUMN = "batch_id"
# The columns `batch_usage` reads (those a table has).
USAGE_READ = ("model", BATCH_COLUMN, "cached", "input_tokens", "output_tokens", "outcome", "response")


@dataclass(frozen=True)
class BatchUsage:
    """One model's answers through a batch: all of them, and the tokens of those the table got new (not cached)."""

    answers: int = 0
    input_tokens_new: int = 0
    output_tokens_new: int = 0


def through_batch(frame: pd.DataFrame) -> pd.Series:
    """Which rows were answered through a provider batch (a line that ended in an error names its batch too, but
    is no answer: `failed_calls`)."""
    if BATCH_COLUMN not in frame:
        return pd.Series(False, index=frame.index)
    ids = frame[BATCH_COLUMN]
    return ids.notna() & ids.astype(str).str.len().gt(0) & ~failed_calls(frame, "response")


def batch_usage(frame: pd.DataFrame) -> dict[str, BatchUsage]:
    """Per model with any, its answers through a batch (`frame`: the responses table, or a model's part of it)."""
    batched = frame[through_batch(frame)]
    if batched.empty:
        return {}
    new = ~batched["cached"].fillna(False).astype(bool) if "cached" in batched else pd.Series(True, batched.index)
    usage = {}
    for model, rows in batched.groupby(batched["model"].astype(str), sort=True):
        fresh = rows[new.loc[rows.index]]
        tokens = [int(pd.to_numeric(fresh[column], errors="coerce").fillna(0).sum()) if column in fresh else 0
                  for column in ("input_tokens", "output_tokens")]
        usage[str(model)] = BatchUsage(len(rows), *tokens)
    return usage


def price_factor(settings: Mapping[str, Any] | None) -> float:
    """A registry entry's `batch_price_factor` (default 0.5: the three providers' batch APIs charge half)."""
    value = (settings or {}).get("batch_price_factor")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else DEFAULT_PRICE_FACTOR


def batch_cost(usage: BatchUsage, settings: Mapping[str, Any] | None) -> float | None:
    """The new batch answers' cost in USD at the batch price (`batch_price_factor` × the registry's prices); None
    when the entry has no price."""
    settings = settings or {}
    price_in, price_out = settings.get("price_input_per_mtok"), settings.get("price_output_per_mtok")
    if price_in is None and price_out is None:
        return None
    full = usage.input_tokens_new * float(price_in or 0) + usage.output_tokens_new * float(price_out or 0)
    return full * price_factor(settings) / 1e6


def batch_summary_lines(frame: pd.DataFrame, models: Sequence[str], entries: Mapping[str, Any]) -> list[str]:
    """One line per model of `models` with answers through a batch: how many, and the new ones' cost at the batch
    price (`entries`: registry entries, for the prices)."""
    lines = []
    for model, usage in batch_usage(frame).items():
        if model not in models:
            continue
        entry = entries.get(model)
        settings = getattr(entry, "settings", None)
        spent = batch_cost(usage, settings)
        price = "" if spent is None else (f"; the new ones cost about ${spent:,.4f} at the batch price "
                                          f"({price_factor(settings):g} × the registry's)")
        lines.append(f"{model}: {usage.answers:,} answer(s) came through a provider batch{price}")
    return lines
