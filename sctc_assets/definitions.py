"""The `sctc_assets` code location: every benchmark's assets, shared resources and the registry sensor."""

from __future__ import annotations

import dagster as dg

from sctc_assets.assets import term
from sctc_assets.resources.io_manager import ParquetIOManager
from sctc_assets.resources.registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource
from sctc_assets.sensors import model_registry_sensor


def shared_resources() -> dict:
    return {
        "upstream": SCTCUpstreamResource(),
        "models": ModelRegistryResource(),
        "io_manager": ParquetIOManager(),
    }


# One entry per benchmark folder under assets/.
BENCHMARK_DEFINITIONS = [term.defs()]

defs = dg.Definitions.merge(
    *BENCHMARK_DEFINITIONS,
    dg.Definitions(resources=shared_resources(), sensors=[model_registry_sensor]),
)
