"""Drift of one model's name choice between two epoch tags, read from the response cache (never a model call)."""

from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued
from sctc_assets.assets.drift import DriftConfig, chosen_epochs, drift_output, no_rows, replay_without_epochs
from sctc_assets.assets.partitions import models_partitions
from sctc_assets.benchmarks.name import NAME
from sctc_assets.lib.drift import cached_answers
from sctc_assets.lib.name.drift import NAME_DRIFT_COLUMNS, name_drift_table
from sctc_assets.lib.name.requests import prompts_to_ask, requests_of, variant_rows
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "name"
DRIFT_ENV_VAR = "SCTC_NAME_DRIFT"


class NameDriftConfig(DriftConfig):
    experiments: Optional[list[str]] = Field(default=None, description="Experiments, as `name_responses` asked "
                                                                       "them (default: the registry's, else all).")
    lists: Optional[int] = Field(default=None, description="Lists per experiment, as `name_responses` asked them.")
    shuffles: Optional[int] = Field(default=None, description="Shuffles per list, as `name_responses` asked them.")
    list_source: Optional[str] = Field(default=None, description="Whose lists, as `name_responses` asked them.")


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def name_drift(context: dg.AssetExecutionContext, config: NameDriftConfig, name_prompts: pd.DataFrame,
               name_candidate_lists: pd.DataFrame, regional_names: pd.DataFrame, models: ModelRegistryResource,
               upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Per prompting language, experiment and candidate scope: the model's Mainland rate among its valid answers
    (`rules` extraction) under epoch A and epoch B, as `name_choice_rates` computes it, the change (B − A), and the
    exact McNemar test on the answers (list × shuffle) valid in both epochs, with the answers that flipped each way
    and the served model ids and fingerprints of each side. The requests of the paper's wording are rebuilt as
    `name_responses` builds them and looked up in the response cache without calling the model; an answer the cache
    lacks is counted as missing. Replay models (published answers, no cache) get no rows."""
    model = context.partition_key
    epochs = chosen_epochs(config.epochs, DRIFT_ENV_VAR)
    if not epochs:
        return no_rows(NAME_DRIFT_COLUMNS, epochs="none")
    entry = models.entry(model)
    settings = NAME.run_settings({"experiments": config.experiments, "lists": config.lists,
                                  "shuffles": config.shuffles, "list_source": config.list_source}, entry,
                                 where=f"name_drift: model {model!r} (run config, else registry benchmarks.name)")
    backend = models.backend(model, open_upstream=upstream.open)
    replay = replay_without_epochs(context, "name_drift", backend, NAME_DRIFT_COLUMNS)
    if replay is not None:
        return replay
    cache = models.cache()

    def requests_for(lang: str):
        selected, _ = prompts_to_ask(name_prompts, lang, settings, replay=False)
        selected = variant_rows(selected, None, lang)
        return selected, requests_of(selected, lang)

    table = name_drift_table(model, NAME.langs, epochs, name_candidate_lists, regional_names, requests_for,
                             lambda requests: cached_answers(backend, cache, requests))
    return drift_output(context, "name_drift", table, ["lang", "experiment"], epochs)
