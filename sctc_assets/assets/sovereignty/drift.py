"""Drift of one model's answers between two epoch tags, read from the response cache (never a model call)."""

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued
from sctc_assets.assets.drift import DriftConfig, chosen_epochs, drift_output, no_rows, replay_without_epochs
from sctc_assets.benchmarks.sovereignty import SOVEREIGNTY
from sctc_assets.lib.drift import cached_answers
from sctc_assets.lib.sovereignty.drift import DRIFT_COLUMNS, drift_table
from sctc_assets.lib.sovereignty.requests import sovereignty_requests
from sctc_assets.assets.partitions import models_partitions
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.tsb_upstream import TSBUpstreamResource

GROUP = "sovereignty"
DRIFT_ENV_VAR = "SCTC_SOVEREIGNTY_DRIFT"


class SovereigntyDriftConfig(DriftConfig):
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
    epochs = chosen_epochs(config.epochs, DRIFT_ENV_VAR)
    entry = models.entry(model)
    if not epochs:
        return no_rows(DRIFT_COLUMNS, epochs="none")
    samples, overrides = SOVEREIGNTY.run_settings({"samples": config.samples,
                                                         "temperature": config.temperature}, entry)
    backend = models.backend(model, overrides=overrides)
    replay = replay_without_epochs(context, "sovereignty_drift", backend, DRIFT_COLUMNS)
    if replay is not None:
        return replay
    cache = models.cache()
    table = drift_table(model, SOVEREIGNTY.langs, epochs, tsb_upstream.red_flag_list(), samples,
                        lambda lang: sovereignty_requests(sovereignty_prompts, model, lang, samples),
                        lambda requests: cached_answers(backend, cache, requests))
    flips = int(table[table["scoring_rule"] == "code"]["flipped"].map(len).sum()) if not table.empty else 0
    return drift_output(context, "sovereignty_drift", table, ["lang"], epochs,
                        " (run with --sovereignty-epoch to ask them)", flipped_code_rule=flips)
