"""Metadata every table asset attaches: row count, column schema, a Markdown preview, and links to plots."""

from __future__ import annotations

from typing import Any, Sequence

import dagster as dg
import pandas as pd

from sctc_assets.lib.atomic_files import replacing
from sctc_assets.lib.generation import GenerationResult, UsageTotals
from sctc_assets.lib.paths import data_dir


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
    """Row count and preview. The column schema is the asset's definition metadata (`sctc_assets.lib.schemas`, with
    descriptions); a schema inferred here from the dtypes would replace it in the UI."""
    metadata: dict[str, Any] = {
        "dagster/row_count": len(frame),
        "preview": dg.MetadataValue.md(markdown_table(frame, preview_rows)),
    }
    metadata.update(extra)
    return metadata


def usage_metadata(results: Sequence[GenerationResult], pricing: tuple[float | None, float | None], *,
                   repeats: Sequence[int] | None = None) -> dict:
    """Calls, cached answers, tokens, outcomes and (when priced) cost of one partition's model calls; `repeats[i]`
    answers share `results[i]` when given (a replay's distinct published answers)."""
    usage = UsageTotals()
    for result, times in zip(results, repeats if repeats is not None else [1] * len(results)):
        usage.add(result, int(times))
    cost = usage.cost(*pricing)
    metadata = {
        "calls": usage.calls, "cached_answers": usage.cached, "new_answers": usage.calls - usage.cached,
        "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
        "outcomes": dg.MetadataValue.json(usage.outcomes),
    }
    if usage.reasoning_tokens:  # part of output_tokens (and of the cost): shown since the API bills them apart
        metadata["reasoning_tokens"] = usage.reasoning_tokens
    if cost is not None:
        metadata["cost_usd"] = round(cost, 6)
    if usage.first_error is not None:
        metadata["first_error"] = usage.first_error[:300]
    return metadata


def generation_metadata(log: Any, label: str, backend: Any, results: Sequence[GenerationResult]) -> dict:
    """`usage_metadata` plus what the API said it served, and the backend's notes on its last `generate()` (the
    trials of a temperature-0 model are repeats, estimated costs), each note logged once as a warning."""
    notes = backend.generation_notes()
    for note in notes:
        log.warning(f"{label}: {note}")
    metadata = usage_metadata(results, backend.pricing())
    metadata["trials_are_repeats"] = any(note.startswith("temperature 0") for note in notes)
    if notes:
        metadata["generation_notes"] = dg.MetadataValue.json(notes)
    adaptations = backend.request_adaptations()
    if adaptations:
        metadata["request_adaptations"] = dg.MetadataValue.json(adaptations)
    served = sorted({result.served_model for result in results if result.served_model})
    if served:
        metadata["served_models"] = dg.MetadataValue.json(served)
    return metadata


def figure_file(figure: Any, asset: str, name: str) -> dg.MetadataValue:
    """A matplotlib figure saved as `<data>/figures/<asset>/<name>.png` and linked: metadata stays small (an
    inline image was ~80 KB of base64 per chart). The figure is closed afterwards."""
    import matplotlib.pyplot as plt

    path = data_dir() / "figures" / asset / f"{name}.png"
    try:
        with replacing(path) as staging:
            figure.savefig(staging, format="png", dpi=110, bbox_inches="tight")
    finally:
        plt.close(figure)  # pyplot keeps every figure alive otherwise, and long runs accumulate them
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
