"""Partitions shared by every benchmark: a dynamic `model` dimension filled from the registry, crossed with the
benchmark's own static dimension (its spec's `langs`, named by its `dimension`). Per-model assets use the `model`
dimension alone, so Dagster maps the two-dimensional partitions onto them and re-running one model touches only that
model's partitions.
"""

from __future__ import annotations

import dagster as dg

from sctc_assets.benchmarks.spec import BenchmarkSpec

MODELS_PARTITION_NAME = "models"
models_partitions = dg.DynamicPartitionsDefinition(name=MODELS_PARTITION_NAME)


def model_lang_partitions(langs: tuple[str, ...], dimension: str = "lang") -> dg.MultiPartitionsDefinition:
    return dg.MultiPartitionsDefinition(
        {"model": models_partitions, dimension: dg.StaticPartitionsDefinition(list(langs))}
    )


def benchmark_partitions(spec: BenchmarkSpec) -> dg.MultiPartitionsDefinition:
    """A benchmark's model × lang (or × its own dimension) partitions, as its spec states them."""
    return model_lang_partitions(spec.langs, spec.dimension)

# Corpus counts are partitioned by shard, `<corpus>.<index>-of-<shards>`, filled from the corpus registry.
CORPUS_SHARDS_PARTITION_NAME = "corpus_shards"
corpus_shard_partitions = dg.DynamicPartitionsDefinition(name=CORPUS_SHARDS_PARTITION_NAME)


def model_and_lang(context: dg.AssetExecutionContext) -> tuple[str, str]:
    keys = context.partition_key.keys_by_dimension  # type: ignore[union-attr]
    return keys["model"], keys["lang"]
