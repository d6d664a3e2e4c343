"""Every benchmark's spec, in the order `sctc run --benchmarks` offers them, and the catalog they make up.

The CLI, the validator, the estimate, the catalog, the named jobs, the report, the table reference and the runner
loop over `SPECS` (see `sctc_assets.benchmarks.spec`): the five built in, one per registered item set (`item_sets`),
then those of other packages (`plugins`). Each spec carries its tables' column schemas (`TABLE_SCHEMAS` gathers
them). No Dagster here.
"""

from __future__ import annotations

import importlib
from typing import Iterable

from sctc_assets.benchmarks.corpus import CORPUS
from sctc_assets.benchmarks.item_sets import item_set_specs
from sctc_assets.benchmarks.name import NAME
from sctc_assets.benchmarks.plugins import plugin_specs
from sctc_assets.benchmarks.reviews import REVIEWS
from sctc_assets.benchmarks.sovereignty import SOVEREIGNTY
from sctc_assets.benchmarks.spec import CROSS_MODEL, AssetEntry, BenchmarkSpec, ReportSection
from sctc_assets.benchmarks.term import TERM
from sctc_assets.lib.schemas import TableSchemaSpec

__all__ = ["BENCHMARKS", "BUILT_IN", "BUILT_IN_SCHEMAS", "CATALOG", "CORPUS", "NAME", "PAPERS", "REPORT_INPUTS",
           "REPORT_TABLES", "RESPONSE_TABLES", "REVIEWS", "SOVEREIGNTY", "SPECS", "TABLE_SCHEMAS", "TERM",
           "report_sections", "table_schemas"]

# The five benchmarks built in (`docs/tables.md` documents their tables).
BUILT_IN: tuple[BenchmarkSpec, ...] = (TERM, NAME, SOVEREIGNTY, REVIEWS, CORPUS)
SPECS: dict[str, BenchmarkSpec] = {spec.name: spec for spec in BUILT_IN}
SPECS.update(item_set_specs())  # one benchmark per registered item set (`terms_<set>`)
SPECS.update(plugin_specs(SPECS))
BENCHMARKS: tuple[str, ...] = tuple(SPECS)

# The audit report reads every benchmark's tables, so it belongs to none of them.
REPORT, REPORT_PAPER = "report", "all"
REPORT_ASSETS = {
    "audit_report": AssetEntry(CROSS_MODEL, "The audit report: scorecard, the papers' figures and tables, and "
                                            "provenance, as HTML and Markdown.", code_version="2", table=False,
                          benchmark=REPORT),  # 2: a model's kind from the backend stored with its answers
}

# One entry per asset of the code location: each spec's assets, then the report's.
CATALOG: dict[str, AssetEntry] = {}
for _spec in SPECS.values():
    for _name, _entry in _spec.assets.items():
        if _name in CATALOG:
            raise ValueError(f"benchmark {_spec.name!r}: asset {_name!r} is already benchmark "
                             f"{CATALOG[_name].benchmark!r}'s")
        CATALOG[_name] = _entry
CATALOG.update(REPORT_ASSETS)
# What the audit report reads: each benchmark's tables for its part, and its table of answers for provenance.
REPORT_INPUTS: dict[str, tuple[str, ...]] = {spec.name: spec.report_tables for spec in SPECS.values()
                                             if spec.report_tables}
REPORT_TABLES: tuple[str, ...] = tuple(dict.fromkeys(name for names in REPORT_INPUTS.values() for name in names))
RESPONSE_TABLES: dict[str, str] = {spec.name: spec.response_asset for spec in SPECS.values() if spec.response_asset}


def report_sections() -> tuple[ReportSection, ...]:
    """Each benchmark's part of the audit report, in the specs' order; the modules (matplotlib) are imported here,
    when a report is built, not with the specs."""
    return tuple(ReportSection(spec.name, _report_module(spec.report_part), spec.report_part.table_prefix,
                               spec.report_part.scorecard_label)
                 for spec in SPECS.values() if spec.report_part)


def _report_module(part) -> object:
    module = importlib.import_module(part.module)
    return getattr(module, part.factory)(*part.arguments) if part.factory else module




def table_schemas(specs: Iterable[BenchmarkSpec]) -> dict[str, TableSchemaSpec]:
    """Table name → column schema, as the specs carry them (`BenchmarkSpec.schemas`), in their order; a table two
    specs declare is refused."""
    schemas: dict[str, TableSchemaSpec] = {}
    for spec in specs:
        for schema in spec.schemas:
            if schema.table in schemas:
                raise ValueError(f"benchmark {spec.name!r}: table {schema.table!r} is declared twice")
            schemas[schema.table] = schema
    return schemas


# The built-in benchmarks' tables, and every table asset's column schema: theirs, the registered item sets' and
# those of other packages' benchmarks.
BUILT_IN_SCHEMAS: dict[str, TableSchemaSpec] = table_schemas(BUILT_IN)
TABLE_SCHEMAS: dict[str, TableSchemaSpec] = table_schemas(SPECS.values())
PAPERS: dict[str, str] = {**{spec.name: spec.paper for spec in SPECS.values()}, REPORT: REPORT_PAPER}
