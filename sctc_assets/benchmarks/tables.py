"""`python -m sctc_assets.benchmarks.tables > docs/tables.md`: the column reference of the built-in benchmarks'
tables, generated from the schemas their specs carry (`BenchmarkSpec.schemas`)."""

from __future__ import annotations

from sctc_assets.benchmarks import BUILT_IN_SCHEMAS
from sctc_assets.lib.schemas import bias_factors, markdown


def reference() -> str:
    """`docs/tables.md`: each built-in benchmark's own tables in the specs' order, then the bias-factor tables
    (one column set across the term and name benchmarks, `lib.schemas.bias_factors`), documented together."""
    shared = [schema.table for schema in bias_factors.TABLES]
    order = [table for table in BUILT_IN_SCHEMAS if table not in shared] + shared
    return markdown(BUILT_IN_SCHEMAS, order)


if __name__ == "__main__":
    print(reference(), end="")
