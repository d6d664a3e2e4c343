"""The column schemas of the table assets, one module per benchmark: the column names, types and descriptions that
the Dagster UI shows before anything is materialized (`dagster/column_schema`), that `docs/tables.md` is generated
from, and that the tests check the stored tables and the benchmark pages (docs/benchmarks/) against.

Each benchmark's spec names its tables' schemas (`BenchmarkSpec.schemas`, e.g. `schemas.term.TABLES` in
`sctc_assets/benchmarks/term.py`); `sctc_assets.benchmarks.TABLE_SCHEMAS` gathers them, and
`python -m sctc_assets.benchmarks.tables > docs/tables.md` writes the reference. This package declares the columns
and knows nothing of the specs.

Types are logical: `string`, `int`, `float`, `bool`, `list<string>`, `list<int>` and `json` (a nested value). A
column may hold missing values whatever its type (an error row has no answer text, a rate without data is NaN).
"""

from __future__ import annotations

from sctc_assets.lib.schemas.base import TYPES, Column, TableSchemaSpec, frame_problems, markdown, type_problem

__all__ = ["TYPES", "Column", "TableSchemaSpec", "frame_problems", "markdown", "type_problem"]
