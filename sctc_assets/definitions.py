"""The `sctc_assets` code location: every benchmark's assets, the answer checks, shared resources, the registry
sensor and the (opt-in) automation sensor."""

from __future__ import annotations

import dagster as dg

from sctc_assets.assets import corpus, name, report, reviews, sovereignty, term
from sctc_assets.assets.answer_checks import ANSWER_CHECKS
from sctc_assets.assets.automation import automation_sensor
from sctc_assets.assets.jobs import JOBS
from sctc_assets.resources.corpora import CorpusRegistryResource
from sctc_assets.resources.io_manager import ParquetIOManager
from sctc_assets.resources.registry import ModelRegistryResource
from sctc_assets.resources.tsb_upstream import TSBUpstreamResource
from sctc_assets.resources.upstream import SCTCUpstreamResource
from sctc_assets.sensors import model_registry_sensor


def shared_resources() -> dict:
    return {
        "upstream": SCTCUpstreamResource(),
        "models": ModelRegistryResource(),
        "io_manager": ParquetIOManager(),
        "corpora": CorpusRegistryResource(),
        "tsb_upstream": TSBUpstreamResource(),
    }


# One entry per benchmark folder under assets/, then the audit report across them. A list, not module-level
# Definitions: Dagster refuses a code location whose module holds more than one Definitions object.
BENCHMARK_DEFINITIONS = [term.defs(), corpus.defs(), reviews.defs(), sovereignty.defs(), name.defs(), report.defs()]

defs = dg.Definitions.merge(
    *BENCHMARK_DEFINITIONS,
    dg.Definitions(resources=shared_resources(), asset_checks=ANSWER_CHECKS, jobs=JOBS,
                   sensors=[model_registry_sensor, automation_sensor()]),
)
