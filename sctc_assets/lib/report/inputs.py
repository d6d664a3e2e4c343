"""What the report is built from: the benchmarks' tables, the registry, response usage and provenance."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from sctc_assets.lib.model_registry import ModelEntry
from sctc_assets.lib.report import models as model_order
from sctc_assets.lib.table_store import arrow_source

# Rows that hold the papers' published reference values under the authors' own model names (`qwen`, not a registry
# key), marked by a column's value (None: every row of the table): shown as the reference in their tables, never
# taken for models of the audit.
REFERENCE_ROWS: dict[str, tuple[str | None, str | None]] = {
    "term_incorrect_types": ("label_source", "upstream"),
    "name_explanation_words": (None, None),  # the authors' extractions (Tables 31–32)
    "name_talent_examples": (None, None),  # and Table 33's
}

USAGE_COLUMNS = ["benchmark", "model", "answers", "cached", "new", "errors", "input_tokens", "output_tokens",
                 "input_tokens_new", "output_tokens_new", "served_models", "system_fingerprints", "stored_at",
                 "batched", "input_tokens_batched_new", "output_tokens_batched_new"]


@dataclass
class ReportInputs:
    tables: Mapping[str, pd.DataFrame]
    registry: Mapping[str, ModelEntry] = field(default_factory=dict)
    usage: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=USAGE_COLUMNS))
    provenance: Mapping[str, Any] = field(default_factory=dict)
    models: list[str] | None = None  # only these models, when given
    generated_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))
    # The tables each benchmark's part reads (its spec's `report_tables`): what a section that fails leaves out.
    benchmark_tables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Each benchmark's part, in order (`sctc_assets.benchmarks.report_sections()`): `.benchmark`, `.module` (with
    # `section(inputs)`, `HEADLINE_COLUMNS`, `headline(inputs, model)` and `HOW`), `.table_prefix`, `.scorecard_label`.
    sections: tuple[Any, ...] = ()
    # model → the backend its stored answers were made with (response metadata), which today's registry may lack
    backends: Mapping[str, str] = field(default_factory=dict)

    def kind(self, model: str) -> str:
        return model_order.kind(self.registry.get(model), self.backends.get(model))

    def is_replay(self, model: str) -> bool:
        return model_order.is_replay(self.registry.get(model), self.backends.get(model))

    def kinds_note(self, models: Iterable[str]) -> str:
        return model_order.kinds_note(models, self.registry, self.backends)

    def table(self, name: str) -> pd.DataFrame:
        """The table restricted to the chosen models; an empty frame when absent."""
        frame = self.tables.get(name)
        if frame is None or not isinstance(frame, pd.DataFrame):
            return pd.DataFrame()
        if self.models is not None and "model" in frame.columns:
            frame = frame[frame["model"].isin(self.models)]
        return frame

    def all_models(self) -> list[str]:
        """Every model with a row in any report table (or in the usage), restricted to the chosen ones; the published
        reference rows (`REFERENCE_ROWS`) name no model of the audit."""
        found: list[str] = []
        for name, frame in list(self.tables.items()) + [("", self.usage)]:
            if isinstance(frame, pd.DataFrame) and "model" in frame.columns and not frame.empty:
                column, value = REFERENCE_ROWS.get(name, ("", None))
                if name in REFERENCE_ROWS and column is None:
                    continue
                if column in frame.columns:
                    frame = frame[frame[column] != value]
                found += [str(model) for model in frame["model"].dropna().unique()]
        found = list(dict.fromkeys(found))
        if self.models is not None:
            found = [model for model in found if model in self.models] + \
                    [model for model in self.models if model not in found]
        return found


def read_table(storage_dir: Path, name: str, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """One table in the ParquetIOManager's layout: `<name>.parquet`, or every partition file under `<name>/`.

    `columns` are read when present (older files may lack the newer ones). Empty partitions are dropped.
    """
    single = storage_dir / f"{name}.parquet"
    files = [single] if single.exists() else sorted((storage_dir / name).rglob("*.parquet")) \
        if (storage_dir / name).is_dir() else []
    frames = []
    for path in files:
        where, filesystem = arrow_source(path)  # the store may be a URL (lib/table_store.py)
        if columns is None:
            frames.append(pd.read_parquet(where, filesystem=filesystem))
            continue
        import pyarrow.parquet as pq

        available = set(pq.read_schema(where, filesystem=filesystem).names)
        frames.append(pd.read_parquet(where, columns=[column for column in columns if column in available],
                                      filesystem=filesystem))
    frames = [frame for frame in frames if not frame.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def read_tables(storage_dir: Path, names: Iterable[str]) -> dict[str, pd.DataFrame]:
    return {name: read_table(storage_dir, name) for name in names}


def _has_intervals(path: Path) -> bool:
    import pyarrow.parquet as pq

    where, filesystem = arrow_source(path)
    return any(name.endswith("_ci_low") for name in pq.read_schema(where, filesystem=filesystem).names)


def interval_tables(storage_dir: Path, prefixes: tuple[str, ...] = ("sovereignty_", "review_"),
                    skip: Iterable[str] = ()) -> dict[str, pd.DataFrame]:
    """Other tables of the sovereignty and review benchmarks that carry 95 % intervals (`*_ci_low` columns, e.g.
    bootstrap or paired intervals added by newer assets), found by their schema, so the report shows them
    without knowing their names."""
    skipped = set(skip)
    found = {}
    if not storage_dir.is_dir():
        return found
    for entry in sorted(storage_dir.iterdir()):
        name = entry.name.removesuffix(".parquet")
        if name in skipped or not name.startswith(prefixes):
            continue
        sample = entry if entry.is_file() else next(iter(sorted(entry.rglob("*.parquet"))), None)
        if sample is not None and sample.suffix == ".parquet" and _has_intervals(sample):
            found[name] = read_table(storage_dir, name)
    return found
