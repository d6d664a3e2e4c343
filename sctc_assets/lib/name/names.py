"""The 352 names of the name task: 152 Mainland (Simplified script) and 200 Taiwanese (Traditional script)."""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib import varieties

NAMES_FILE = "source_data/regional_name_and_characteristics.csv"
NAME_COLUMNS = ("name", "count", "decile", "region", "gender")
REGIONS = {row.upstream_spelling: row.name for row in varieties.REGIONS}


def parse_names(raw: pd.DataFrame, *, source_name: str = NAMES_FILE) -> pd.DataFrame:
    """Columns: name, count, decile, region (`mainland`/`taiwan`), region_label (upstream text), gender,
    last_name (first character), given_name (the rest). Upstream row order is kept."""
    absent = [column for column in NAME_COLUMNS if column not in raw.columns]
    if absent:
        raise ValueError(f"{source_name}: missing required column(s) {absent}")
    unknown = sorted(set(raw["region"]) - set(REGIONS))
    if unknown:
        rows = raw.index[raw["region"].isin(unknown)].tolist()[:5]
        raise ValueError(f"{source_name}: unknown region value(s) {unknown} (rows {rows})")
    names = raw[list(NAME_COLUMNS)].copy()
    names["region_label"] = names["region"]
    names["region"] = names["region"].map(REGIONS)
    names["name"] = names["name"].astype(str).str.strip()
    names["last_name"] = names["name"].str[0]
    names["given_name"] = names["name"].str[1:]
    for column in ("count", "decile"):
        numbers = pd.to_numeric(names[column], errors="coerce")
        bad = names.index[numbers.isna() | (numbers % 1 != 0)].tolist()
        if bad:
            raise ValueError(f"{source_name}: column {column!r} must hold whole numbers; rows {bad[:5]} hold "
                             f"{names.loc[bad[:5], column].tolist()}")
        names[column] = numbers.astype(int)
    duplicated = names["name"][names["name"].duplicated()].tolist()
    if duplicated:
        raise ValueError(f"{source_name}: duplicated names {duplicated}")
    return names.reset_index(drop=True)
