"""Drift of one model's term choice between two epoch tags, read from the response cache (never a model call)."""

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued
from sctc_assets.assets.drift import DriftConfig, chosen_epochs, drift_output, no_rows, replay_without_epochs
from sctc_assets.assets.partitions import models_partitions
from sctc_assets.benchmarks.term import TERM
from sctc_assets.lib.drift import cached_answers
from sctc_assets.lib.term.drift import TERM_DRIFT_COLUMNS, term_drift_table
from sctc_assets.lib.term.prompts import generation_overrides
from sctc_assets.lib.term.requests import term_requests
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "term"
DRIFT_ENV_VAR = "SCTC_TERM_DRIFT"


class TermDriftConfig(DriftConfig):
    trials: int | None = Field(default=None, description="Trials per prompt, as `term_responses` asked them "
                                                         "(default: the registry's, else the paper's).")
    prompt_variants: list[int] | None = Field(default=None, description="Prompt variants, as `term_responses` asked "
                                                                        "them (default: the registry's, else all).")


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def term_drift(context: dg.AssetExecutionContext, config: TermDriftConfig, term_prompts: pd.DataFrame,
               models: ModelRegistryResource, upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Per prompting language, prompt variant and measure (`correct`, `misaligned`): the model's `rules`-labelled
    rates under epoch A and epoch B, as `term_choice_rates` computes them, their difference (B − A), and the exact
    McNemar test on the answers (term × trial) found in both epochs, with the answers that flipped each way and the
    served model ids and fingerprints of each side. The requests are rebuilt as `term_responses` builds them and
    looked up in the response cache without calling the model; an answer the cache lacks is counted as missing.
    Replay models (published answers, no cache) get no rows."""
    model = context.partition_key
    epochs = chosen_epochs(config.epochs, DRIFT_ENV_VAR)
    if not epochs:
        return no_rows(TERM_DRIFT_COLUMNS, epochs="none")
    entry = models.entry(model)
    trials, variants = TERM.run_settings({"trials": config.trials, "prompt_variants": config.prompt_variants}, entry)
    backend = models.backend(model, open_upstream=upstream.open,
                             overrides=generation_overrides(entry.benchmark_settings("term")))
    replay = replay_without_epochs(context, "term_drift", backend, TERM_DRIFT_COLUMNS)
    if replay is not None:
        return replay
    cache = models.cache()
    table = term_drift_table(model, TERM.langs, epochs, term_prompts,
                             lambda lang: term_requests(term_prompts, lang, trials, variants),
                             lambda requests: cached_answers(backend, cache, requests))
    return drift_output(context, "term_drift", table, ["lang", "prompt_variant"], epochs)
