"""Every benchmark's spec, in the order `sctc run --benchmarks` offers them, and the catalog they make up.

The CLI, the validator, the estimate, the catalog, the named jobs, the report and the runner loop over `SPECS`
(see `sctc_assets.benchmarks.spec`). No Dagster here.
"""

from __future__ import annotations

from sctc_assets.benchmarks.corpus import CORPUS
from sctc_assets.benchmarks.name import NAME
from sctc_assets.benchmarks.reviews import REVIEWS
from sctc_assets.benchmarks.sovereignty import SOVEREIGNTY
from sctc_assets.benchmarks.spec import CROSS_MODEL, AssetEntry, BenchmarkSpec
from sctc_assets.benchmarks.term import TERM

__all__ = ["BENCHMARKS", "CATALOG", "CORPUS", "NAME", "PAPERS", "REVIEWS", "SOVEREIGNTY", "SPECS", "TERM", "spec"]

SPECS: dict[str, BenchmarkSpec] = {spec.name: spec for spec in (TERM, NAME, SOVEREIGNTY, REVIEWS, CORPUS)}
BENCHMARKS: tuple[str, ...] = tuple(SPECS)

# The audit report reads every benchmark's tables, so it belongs to none of them.
REPORT, REPORT_PAPER = "report", "all"
REPORT_ASSETS = {
    "audit_report": AssetEntry(CROSS_MODEL, "The audit report: scorecard, the papers' figures and tables, and "
                                            "provenance, as HTML and Markdown.", table=False, benchmark=REPORT),
}

# One entry per asset of the code location: each spec's assets, then the report's.
CATALOG: dict[str, AssetEntry] = {name: entry for spec in SPECS.values() for name, entry in spec.assets.items()}
CATALOG.update(REPORT_ASSETS)
PAPERS: dict[str, str] = {**{spec.name: spec.paper for spec in SPECS.values()}, REPORT: REPORT_PAPER}


def spec(name: str) -> BenchmarkSpec:
    if name not in SPECS:
        raise KeyError(f"no benchmark {name!r} (benchmarks: {', '.join(BENCHMARKS)})")
    return SPECS[name]
