"""Single-run backfills of the assets that ask the model under test: one run serves a range of partitions, so a
local model is loaded once (the transformers backend keeps loaded models per process) instead of once per
partition run.

Put `@serves_partition_ranges` under the `@dg.asset(..., backfill_policy=dg.BackfillPolicy.single_run())` of an
asset written for one partition. In a run over a range (what a UI backfill of several partitions launches), the
body runs once per partition with a context whose `partition_key` is that partition, in order, and the IO manager
stores each partition's table on its own; every partition keeps its own metadata. Dagster gives all partitions of
one run a single data version: here the hash of the partitions' content versions, so a range run marks the
downstream partitions of its range as changed even where one partition's content did not change.

A failure in one partition fails the run, and no partition of it is stored; every answer that arrived is in the
response cache already, so running the backfill again pays for nothing twice.
"""

from __future__ import annotations

import functools
import hashlib
import typing
import warnings
from typing import Any, Callable

import dagster as dg

# `backfill_policy` is a beta parameter of `@dg.asset` in Dagster 1.13; these assets rely on it deliberately.
warnings.filterwarnings("ignore", message="Parameter `backfill_policy` of function `asset`", category=dg.BetaWarning)
# A job (or `dg.materialize`) over answer and scoring assets takes the strictest policy, one partition per run, and
# says so on every job it builds; asset backfills, which this policy is for, apply each asset's own policy.
warnings.filterwarnings("ignore", message=".*materializes assets with varying BackfillPolicies", category=UserWarning)

RANGE_MARK = "__sctc_serves_partition_ranges__"


class _OnePartitionContext:
    """The run's context, seen from one partition of its range."""

    def __init__(self, context: dg.AssetExecutionContext, partition_key: str):
        self._context = context
        self._partition_key = partition_key

    @property
    def partition_key(self) -> str:
        return self._partition_key

    @property
    def partition_keys(self) -> list[str]:
        return [self._partition_key]

    @property
    def has_partition_key_range(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _keys(context: dg.AssetExecutionContext) -> list:
    partitions_def = context.assets_def.partitions_def
    keys = list(context.partition_keys)
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        return [partitions_def.get_partition_key_from_str(str(key)) for key in keys]
    return keys


def _combined_version(outputs: dict[str, dg.Output]) -> dg.DataVersion:
    digest = hashlib.sha256()
    for key, output in sorted(outputs.items()):
        version = output.data_version.value if output.data_version else ""
        digest.update(f"{key}={version};".encode())
    return dg.DataVersion(digest.hexdigest()[:16])


def serves_partition_ranges(fn: Callable[..., dg.Output]) -> Callable[..., dg.Output]:
    """`fn`, which computes one partition, made to serve a run over a range of partitions too."""
    hints = typing.get_type_hints(fn)
    hints.pop("return", None)  # in a range run the output is one table per partition key

    @functools.wraps(fn)
    def each_partition(context: dg.AssetExecutionContext, **kwargs: Any) -> dg.Output:
        keys = _keys(context)
        if len(keys) == 1:
            return fn(context, **kwargs)
        outputs: dict[str, dg.Output] = {}
        for key in keys:
            context.log.info(f"{context.assets_def.key.to_user_string()}: partition {key} of {len(keys)} in this run")
            output = fn(_OnePartitionContext(context, key), **kwargs)
            outputs[str(key)] = output
            context.add_asset_metadata(dict(output.metadata), partition_key=str(key))
        return dg.Output({key: output.value for key, output in outputs.items()},
                         data_version=_combined_version(outputs))

    each_partition.__annotations__ = hints
    setattr(each_partition, RANGE_MARK, True)
    return each_partition
