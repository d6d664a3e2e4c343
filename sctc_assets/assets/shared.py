"""What no benchmark folder owns: the resources every asset shares, the model registry sensor (it keeps the
`models` partitions of every benchmark in step with the registry), the batch sensor (it starts the runs that wait for
provider batches again when they end) and the opt-in automation sensor.

A module of the defs folder with one `Definitions` object: Dagster takes that object and nothing else from it."""

from __future__ import annotations

import dagster as dg

from sctc_assets.assets.automation import automation_sensor
from sctc_assets.resources.corpora import CorpusRegistryResource
from sctc_assets.resources.io_manager import ParquetIOManager
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.tsb_upstream import TSBUpstreamResource
from sctc_assets.resources.upstream import SCTCUpstreamResource
from sctc_assets.assets.sensors import model_registry_sensor, sctc_batches


def shared_resources(*, upstream: str | None = None, registry: str | None = None, cache: str | None = None,
                     storage: str | None = None, max_calls: int | None = None,
                     max_cost_usd: float | None = None) -> dict:
    """The resources the package's assets ask for, by key. A setting left None takes the resource's default (its
    environment variable, else the data folder's); the audit Component (`components/`) passes its YAML's."""

    def given(**settings) -> dict:
        return {name: value for name, value in settings.items() if value is not None}

    return {
        "upstream": SCTCUpstreamResource(**given(location=upstream)),
        "models": ModelRegistryResource(**given(registry_path=registry, cache_path=cache, max_calls=max_calls,
                                                max_cost_usd=max_cost_usd)),
        "io_manager": ParquetIOManager(**given(base_dir=storage)),
        "corpora": CorpusRegistryResource(),
        "tsb_upstream": TSBUpstreamResource(),
    }


defs = dg.Definitions(resources=shared_resources(), sensors=[model_registry_sensor, sctc_batches, automation_sensor()])
