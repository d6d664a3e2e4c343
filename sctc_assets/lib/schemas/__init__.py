"""The column schema of every table asset, one module per benchmark: the single source of the column names, types
and descriptions that the Dagster UI shows before anything is materialized (`dagster/column_schema`), that
`docs/tables.md` is generated from (`python -m sctc_assets.lib.schemas > docs/tables.md`), and that the tests check
the stored tables and the benchmark pages (docs/benchmarks/) against.

Types are logical: `string`, `int`, `float`, `bool`, `list<string>`, `list<int>` and `json` (a nested value). A
column may hold missing values whatever its type (an error row has no answer text, a rate without data is NaN).
"""

from __future__ import annotations

from sctc_assets.lib.schemas import bias_factors, corpus, name, reviews, sovereignty, term
from sctc_assets.lib.schemas.base import TYPES, Column, TableSchemaSpec, frame_problems, markdown, type_problem

__all__ = ["TABLE_SCHEMAS", "TYPES", "Column", "TableSchemaSpec", "frame_problems", "markdown", "type_problem"]


def _all_schemas() -> dict[str, TableSchemaSpec]:
    schemas: dict[str, TableSchemaSpec] = {}
    for module in (term, name, sovereignty, reviews, corpus, bias_factors):
        for spec in module.TABLES:
            if spec.table in schemas:
                raise ValueError(f"table {spec.table!r} is declared twice")
            schemas[spec.table] = spec
    return schemas


TABLE_SCHEMAS: dict[str, TableSchemaSpec] = _all_schemas()
