"""Metadata every table asset attaches: row count, column schema, a Markdown preview, and links to plots."""

from __future__ import annotations

from typing import Any, Sequence

import dagster as dg
import pandas as pd

from sctc_assets.lib.generation import GenerationResult, UsageTotals
from sctc_assets.lib.paths import data_dir

_DTYPE_NAMES = {"object": "string", "bool": "bool", "int64": "int", "float64": "float"}


def _cell(value: Any, width: int) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    text = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    text = text.replace("\n", " ").replace("|", "/")
    return text if len(text) <= width else text[: width - 1] + "…"


def markdown_table(frame: pd.DataFrame, rows: int = 10, width: int = 60) -> str:
    if frame.empty:
        return "_(empty)_"
    head = frame.head(rows)
    lines = ["| " + " | ".join(map(str, head.columns)) + " |", "|" + "---|" * len(head.columns)]
    for record in head.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(value, width) for value in record) + " |")
    if len(frame) > rows:
        lines.append(f"\n_{rows} of {len(frame)} rows_")
    return "\n".join(lines)


def table_metadata(frame: pd.DataFrame, *, preview_rows: int = 10, **extra: Any) -> dict[str, Any]:
    schema = dg.TableSchema(
        columns=[dg.TableColumn(name=str(name), type=_DTYPE_NAMES.get(str(dtype), str(dtype)))
                 for name, dtype in frame.dtypes.items()]
    )
    metadata: dict[str, Any] = {
        "dagster/row_count": len(frame),
        "dagster/column_schema": schema,
        "preview": dg.MetadataValue.md(markdown_table(frame, preview_rows)),
    }
    metadata.update(extra)
    return metadata


def usage_metadata(results: Sequence[GenerationResult], pricing: tuple[float | None, float | None]) -> dict:
    """Calls, cached answers, tokens, outcomes and (when priced) cost of one partition's model calls."""
    usage = UsageTotals()
    for result in results:
        usage.add(result)
    cost = usage.cost(*pricing)
    metadata = {
        "calls": usage.calls, "cached_answers": usage.cached, "new_answers": usage.calls - usage.cached,
        "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
        "outcomes": dg.MetadataValue.json(usage.outcomes),
    }
    if cost is not None:
        metadata["cost_usd"] = round(cost, 6)
    return metadata


def figure_file(figure: Any, asset: str, name: str) -> dg.MetadataValue:
    """A matplotlib figure saved as `<data>/figures/<asset>/<name>.png` and linked: metadata stays small (an
    inline image was ~80 KB of base64 per chart). The figure is closed afterwards."""
    import matplotlib.pyplot as plt

    path = data_dir() / "figures" / asset / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_suffix(".png.tmp")
    figure.savefig(staging, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)  # pyplot keeps every figure alive otherwise, and long runs accumulate them
    staging.replace(path)
    return dg.MetadataValue.path(str(path))


def upstream_comparison_result(compared: int, mismatches: Sequence[str], missing: Sequence[str],
                               **extra: Any) -> dg.AssetCheckResult:
    """Result of a check that compares generated rows with upstream files.

    A mismatch is an ERROR. Nothing to compare (the upstream copy lacks the files, or the run used no published list)
    is only a WARN: missing upstream files skip what needs them, they do not fail a run.
    """
    severity = dg.AssetCheckSeverity.ERROR if mismatches or compared else dg.AssetCheckSeverity.WARN
    return dg.AssetCheckResult(
        passed=not mismatches and compared > 0, severity=severity,
        metadata={"files_compared": compared, "mismatches": dg.MetadataValue.json(list(mismatches)[:20]),
                  "files_missing": dg.MetadataValue.json(list(missing)), **extra})
