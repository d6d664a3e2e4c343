"""The drift tables of the term and name parts (`term_drift`, `name_drift`): one table per model, each rate under
the two epoch tags, the change and the exact McNemar test on the answers found in both, when those tables have rows.
(The sovereignty part's drift tables, prompt by prompt, are `sovereignty_groups.drift_tables`.)"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from sctc_assets.lib.report import models as model_order
from sctc_assets.lib.report.document import Cell, TableSpec
from sctc_assets.lib.report.formatting import fixed
from sctc_assets.lib.varieties import variety


def lang_name(code: str) -> str:
    """A prompting language's display name (the code itself when it names no variety)."""
    try:
        return variety(code).display_name
    except (KeyError, ValueError):
        return code


def sort_key(value) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def joined(values) -> str:
    """The values, sorted and comma-separated; `–` for none."""
    found = [str(value) for value in (list(values) if values is not None else [])]
    return ", ".join(sorted(found)) or "–"


def rate_drift_tables(drift: pd.DataFrame, *, benchmark: str, groups: Sequence[tuple[str, str]], rate_a: str,
                      rate_b: str, difference: str, unit: str, digits: int = 1) -> list[TableSpec]:
    """One table per model: per prompting language, the `groups` columns (column, header) and the measure, the
    rates of the two epochs, their difference, McNemar's b/c and exact p, and the answers each epoch lacks."""
    if drift.empty:
        return []
    tables = []
    for model in model_order.ordered(drift["model"].unique()):
        part = drift[drift["model"] == model]
        rows = []
        for r in part.to_dict("records"):
            rows.append([Cell(lang_name(r["lang"])), *(Cell(str(r[column])) for column, _ in groups),
                         Cell(str(r["measure"])),
                         Cell(fixed(r[rate_a], digits), sort=sort_key(r[rate_a])),
                         Cell(fixed(r[rate_b], digits), sort=sort_key(r[rate_b])),
                         Cell(fixed(r[difference], digits, signed=True), sort=sort_key(r[difference])),
                         Cell(f"{int(r['mcnemar_b'])}/{int(r['mcnemar_c'])}", detail=f"of {int(r['n_pairs'])}"),
                         Cell(fixed(r["p_exact"], 3), sort=sort_key(r["p_exact"])),
                         Cell(f"{int(r['missing_a'])} / {int(r['missing_b'])}")])
        first = part.iloc[0]
        tables.append(TableSpec(
            title=f"Drift of {model}: epoch {first['epoch_a']} → {first['epoch_b']}",
            columns=["Prompting language", *(header for _, header in groups), "Measure", str(first["epoch_a"]),
                     str(first["epoch_b"]), "Change", "b/c", "exact McNemar p", "Missing A / B"],
            rows=rows, table_id=f"{benchmark}-drift-{model}",
            caption=f"The same registry key's answers under two epoch tags (read from the response cache, no model "
                    f"called), rated as the {benchmark} rate table rates them and paired {unit}: b = the outcome "
                    "in the first epoch and not in the second, c = the reverse; answers the cache lacks are missing, "
                    f"not counted. Served versions: {joined(first['served_a'])} → {joined(first['served_b'])}.",
            source=f"{benchmark}_drift"))
    return tables
