"""Column schemas: the types, the check of a stored table against its schema, and the Markdown reference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import pandas as pd

TYPES = ("string", "int", "float", "bool", "list<string>", "list<int>", "list<float>", "json")


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str
    optional: bool = False  # tables written before the column existed lack it; readers tolerate that

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"column {self.name!r}: unknown type {self.type!r} (one of {', '.join(TYPES)})")
        if not self.description.strip():
            raise ValueError(f"column {self.name!r}: a description is required")


@dataclass(frozen=True)
class TableSchemaSpec:
    table: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        return [column.name for column in self.columns]

    def column(self, name: str) -> Column:
        return {column.name: column for column in self.columns}[name]


ColumnSpec = str | tuple  # a common column's name, or (name, type, description[, optional])


def table(name: str, columns: Iterable[ColumnSpec], common: Mapping[str, tuple[str, str]]) -> TableSchemaSpec:
    """A table's schema; a bare column name takes its type and description from `common`."""
    built = []
    for spec in columns:
        if isinstance(spec, str):
            if spec not in common:
                raise KeyError(f"{name}: column {spec!r} needs a type and description (it is not a common column)")
            built.append(Column(spec, *common[spec]))
        else:
            built.append(Column(*spec))
    names = [column.name for column in built]
    duplicates = sorted({column for column in names if names.count(column) > 1})
    if duplicates:
        raise ValueError(f"{name}: duplicate columns {duplicates}")
    return TableSchemaSpec(name, tuple(built))


def _is_missing(value) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # arrays and lists are never a missing scalar
        return False


def _values_match(values: pd.Series, kind: str) -> bool:
    present = [value for value in values.tolist() if not _is_missing(value)]
    if kind == "string":
        return all(isinstance(value, str) for value in present)
    if kind == "bool":
        return all(isinstance(value, bool) or type(value).__name__ == "bool_" for value in present)
    if kind.startswith("list<"):
        return all(isinstance(value, (list, tuple)) or hasattr(value, "tolist") for value in present)
    return kind == "json"


def type_problem(values: pd.Series, column: Column) -> str | None:
    """Why a stored column does not hold its declared type, or None. Missing values fit every type, and numbers fit
    `float` whether stored as ints or floats; integers stored as floats (NaN-widened) fit `int` when whole."""
    dtype = values.dtype
    kind = column.type
    if values.isna().all():
        return None
    if kind == "int":
        if pd.api.types.is_integer_dtype(dtype):
            return None
        if pd.api.types.is_float_dtype(dtype) and bool(((values.dropna() % 1) == 0).all()):
            return None
    elif kind == "float":
        if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
            return None
    elif kind == "bool":
        if pd.api.types.is_bool_dtype(dtype) or (dtype == object and _values_match(values, kind)):
            return None
    elif kind == "string":
        if pd.api.types.is_string_dtype(dtype) and _values_match(values, kind):
            return None
    elif dtype == object and _values_match(values, kind):
        return None
    return f"{column.name}: declared {kind}, stored as {dtype}"


def frame_problems(frame: pd.DataFrame, schema: TableSchemaSpec) -> list[str]:
    """Where a stored table differs from its schema: missing or undeclared columns, and columns of another type.
    A table written empty without any column (nothing to report) has no problems."""
    if frame.empty and len(frame.columns) == 0:
        return []
    declared = schema.names
    problems = [f"missing column {column.name}" for column in schema.columns
                if column.name not in frame.columns and not column.optional]
    problems += [f"undeclared column {name}" for name in frame.columns if name not in declared]
    for column in schema.columns:
        if column.name in frame.columns:
            problem = type_problem(frame[column.name], column)
            if problem:
                problems.append(problem)
    return problems


def markdown(schemas: Mapping[str, TableSchemaSpec], order: Iterable[str] | None = None) -> str:
    """The column reference (`docs/tables.md`): one section per table, in `order` (default: declaration order)."""
    lines = ["# Table columns", "",
             "Generated from `sctc_assets/lib/schemas/` by `python -m sctc_assets.benchmarks.tables > docs/tables.md`;",
             "the Dagster UI shows the same schema on each asset. Types: `string`, `int`, `float`, `bool`,",
             "`list<…>`, `json`; any column may hold missing values.", ""]
    for name in order or schemas:
        spec = schemas[name]
        lines += [f"## `{name}`", "", "| column | type | description |", "|---|---|---|"]
        lines += [f"| `{column.name}` | `{column.type}` | {column.description.replace('|', '/')}"
                  + (" (absent from tables written before it existed)" if column.optional else "")
                  + " |" for column in spec.columns]
        lines.append("")
    return "\n".join(lines)
