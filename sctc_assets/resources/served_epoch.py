"""The epoch tag of an observed model's next answers: its latest observed served version (`served_model` asset,
`assets/served_models.py`, `lib/served_model.py`). The backend a run gets for an entry with `observe:` tags its
requests with it (`ModelRegistryResource.backend`), so the answers of two served versions are two samples in the cache
and the drift table can compare them; a request that already has a tag (`--sovereignty-epoch`) keeps it."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import dagster as dg

from sctc_assets.lib.served_model import epoch_of

SERVED_MODEL_KEY = dg.AssetKey("served_model")
# The tag an observation carries its data version in (Dagster's `dagster/data_version`, not exported by `dagster`).
DATA_VERSION_TAG = "dagster/data_version"


def latest_version(instance: dg.DagsterInstance, model: str) -> str | None:
    """The data version of the model's latest observed served version; None when it was never observed."""
    records = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=SERVED_MODEL_KEY, asset_partitions=[model]), limit=1, ascending=False).records
    observation = records[0].asset_observation if records else None
    return (observation.tags or {}).get(DATA_VERSION_TAG) if observation is not None else None


def latest_epoch(instance: dg.DagsterInstance, model: str) -> str | None:
    """The epoch tag of the model's latest observed served version; None when it was never observed."""
    version = latest_version(instance, model)
    return epoch_of(version) if version else None


def tag_requests_with(backend: Any, epoch: str) -> None:
    """Make `backend.generate()` ask every request without an epoch tag under `epoch` (on this one object)."""
    generate = backend.generate

    @functools.wraps(generate)
    def generate_in_epoch(requests, *args, **options):
        tagged = [request if request.epoch else dataclasses.replace(request, epoch=epoch) for request in requests]
        return generate(tagged, *args, **options)

    object.__setattr__(backend, "generate", generate_in_epoch)
