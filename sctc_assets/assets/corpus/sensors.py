"""Keeps the `corpus_shards` partitions in step with the corpus registry, so new shards appear in the UI."""

import dagster as dg

from sctc_assets.lib.corpus.corpus_registry import unregistered_shard_keys
from sctc_assets.assets.partitions import CORPUS_SHARDS_PARTITION_NAME
from sctc_assets.resources.corpora import CorpusRegistryResource


@dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING,
           description="Adds a `corpus_shards` partition for every shard of every corpus in the corpus registry;"
                       " shards of an earlier layout are kept, so their counts stay visible.")
def corpus_registry_sensor(context: dg.SensorEvaluationContext, corpora: CorpusRegistryResource) -> dg.SensorResult:
    """Adds a partition for every shard of every registered corpus (shards of an earlier layout stay, so their
    results stay visible; totals only sum the present layout)."""
    known = set(context.instance.get_dynamic_partitions(CORPUS_SHARDS_PARTITION_NAME))
    new = unregistered_shard_keys(corpora.entries(), known)
    if not new:
        return dg.SensorResult(skip_reason=f"{len(known)} corpus shards, all registered")
    return dg.SensorResult(dynamic_partitions_requests=[dg.AddDynamicPartitionsRequest(CORPUS_SHARDS_PARTITION_NAME,
                                                                                       new)])
