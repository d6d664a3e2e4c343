"""The name task's prompt variants (paper Appendix A.6, B.1): each variant's rates per model, and their Pearson
correlations across models, as the term benchmark reports them."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import catalogued
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.name import metrics
from sctc_assets.lib.name.selections import rules_selections
from sctc_assets.lib.name.variants import PAPER_VARIANT
from sctc_assets.assets.partitions import models_partitions

GROUP = "name"


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def name_variant_rates(name_responses: pd.DataFrame, name_candidate_lists: pd.DataFrame,
                       regional_names: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """One model's valid and Mainland rates per language, experiment and prompt variant, by the rules extractor
    (the answers of every variant read alike). Empty unless the model answered a variant beside the paper's
    wording (`sctc run --name-prompt-variants FILE`): a run of variant 1 alone adds nothing to
    `name_choice_rates`."""
    variants = name_responses["prompt_variant"] if "prompt_variant" in name_responses.columns else pd.Series()
    if not (variants != PAPER_VARIANT).any():
        rates = metrics.variant_rates(pd.DataFrame())
        return dg.Output(rates, metadata=table_metadata(rates))
    frames = []
    for variant, responses in name_responses.groupby("prompt_variant", sort=True):
        selections = rules_selections(responses, name_candidate_lists, regional_names)
        frames.append(selections.assign(prompt_variant=int(variant)))
    rates = metrics.variant_rates(pd.concat(frames, ignore_index=True))
    return dg.Output(rates, metadata=table_metadata(rates, preview_rows=24))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def name_variant_correlations(name_variant_rates: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Pearson correlations of the valid and Mainland rates between prompt variant 1 (the paper's wording) and
    variants 2 and 3 (a reviewed variants file), one point per model × language, per experiment: Appendix B.1's
    test of the term benchmark, reported for names as the term benchmark reports it (`term_variant_correlations`).
    Needs at least three points (models × languages) with varying rates; r is missing otherwise."""
    table = metrics.variant_correlations(name_variant_rates)
    return dg.Output(table, metadata=table_metadata(table, preview_rows=20))
