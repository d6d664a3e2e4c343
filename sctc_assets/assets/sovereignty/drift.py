"""Drift of one model's answers between two epoch tags, read from the response cache (never a model call)."""

import os

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.benchmarks.sovereignty import SOVEREIGNTY
from sctc_assets.lib.sovereignty.drift import DRIFT_COLUMNS, cached_answers, drift_table
from sctc_assets.lib.sovereignty.requests import sovereignty_requests
from sctc_assets.partitions import models_partitions
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.tsb_upstream import TSBUpstreamResource

GROUP = "sovereignty"
DRIFT_ENV_VAR = "SCTC_SOVEREIGNTY_DRIFT"


class SovereigntyDriftConfig(dg.Config):
    epochs: list[str] = Field(
        default=[], description=f"The two epoch tags to compare (`none`: the untagged answers); default "
                               f"${DRIFT_ENV_VAR} (two tags, space-separated); unset: an empty table.")
    samples: int | None = Field(default=None, description="Answers per prompt, as `sovereignty_responses` asked them "
                                                          "(default: the registry's, else the paper's 1).")
    temperature: float | None = Field(default=None, description="The sampling temperature the answers were asked "
                                                                "with, as `sovereignty_responses`' (part of their "
                                                                "cache keys).")


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def sovereignty_drift(context: dg.AssetExecutionContext, config: SovereigntyDriftConfig,
                      sovereignty_prompts: pd.DataFrame, models: ModelRegistryResource,
                      tsb_upstream: TSBUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Per scoring rule (`code`, `paper`), prompt set and language: the model's answers under epoch A against epoch
    B, prompt by prompt, read from the response cache without calling the model (the requests are rebuilt and looked
    up; an answer the cache lacks is counted as missing, not as failing): passes in each, exact McNemar p
    (b = pass in A, fail in B), the prompts that flipped each way, and the served model ids and fingerprints of
    each side. Replay models (published answers, no cache) get no rows."""
    model = context.partition_key
    epochs = list(config.epochs) or (os.environ.get(DRIFT_ENV_VAR) or "").split()
    entry = models.entry(model)
    if not epochs:
        return dg.Output(pd.DataFrame(columns=DRIFT_COLUMNS), metadata={"dagster/row_count": 0, "epochs": "none"})
    samples, overrides = SOVEREIGNTY.run_settings({"samples": config.samples,
                                                         "temperature": config.temperature}, entry)
    backend = models.backend(model, overrides=overrides)
    if not backend.uses_cache:
        context.log.info(f"sovereignty_drift {model}: a replay of published answers has no epochs; no rows")
        return dg.Output(pd.DataFrame(columns=DRIFT_COLUMNS), metadata={"dagster/row_count": 0})
    cache = models.cache()
    table = drift_table(model, SOVEREIGNTY.langs, epochs, tsb_upstream.red_flag_list(), samples,
                        lambda lang: sovereignty_requests(sovereignty_prompts, model, lang, samples),
                        lambda requests: cached_answers(backend, cache, requests))
    per_lang = table.drop_duplicates("lang")
    missing = {side: int(per_lang[f"missing_{side}"].sum()) for side in ("a", "b")}
    for side, epoch in zip(("a", "b"), epochs):
        if missing[side]:
            context.log.warning(f"sovereignty_drift {model}: {missing[side]} answer(s) of epoch {epoch!r} are not in "
                                "the cache (run with --sovereignty-epoch to ask them); counted as missing")
    flips = int(table[table["scoring_rule"] == "code"]["flipped"].map(len).sum()) if not table.empty else 0
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, preview_rows=12, epochs=dg.MetadataValue.json(epochs), flipped_code_rule=flips,
        missing_a=missing["a"], missing_b=missing["b"]))
