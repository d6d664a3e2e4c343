"""Tables of no rows that keep their columns' types, so an empty partition reads back like a full one."""

from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd


def empty_table(columns: Sequence[str], dtypes: Mapping[str, str] | None = None) -> pd.DataFrame:
    """No rows, the `columns` in order: `dtypes` gives the non-text ones ("int64" for counts, "Int64" for nullable
    counts, "float64", "boolean"); every other column is text."""
    dtypes = dtypes or {}
    unknown = sorted(set(dtypes) - set(columns))
    if unknown:
        raise ValueError(f"empty_table: dtypes for columns it does not have: {unknown}")
    return pd.DataFrame({column: pd.Series(dtype=dtypes.get(column, "string")) for column in columns})
