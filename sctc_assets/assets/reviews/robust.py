"""Paired intervals for ΔAcc and ΔMSE and whether the paper-style tests survive."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import catalogued
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.reviews import robust
from sctc_assets.lib.reviews.prompts import FORMATS
from sctc_assets.assets.partitions import models_partitions

GROUP = "reviews"


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def review_paired_cis(context: dg.AssetExecutionContext, review_predictions: pd.DataFrame,
                      review_pairs: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Per format, over all pairs whose two predictions are valid: ΔAcc (percentage points) and ΔMSE (second −
    first variety of the pair, the paper's cn − tw)
    with a paired-t 95 % interval (`ci_low`/`ci_high`/`ci_method`) and a seeded bootstrap over pairs, the paper's
    test (McNemar exact, paired t), Wilcoxon, the minimum detectable Δ at 80 % power and the pairs a 5-point ΔAcc
    needs."""
    rows = []
    for fmt in FORMATS if not review_predictions.empty else ():
        chosen = review_predictions[review_predictions["format"] == fmt]
        if not chosen.empty:
            differences = robust.paired_differences(chosen, review_pairs)
            rows += [{"model": context.partition_key, "format": fmt, **row} for row in robust.paired_cis(differences)]
    table = pd.DataFrame(rows)
    return dg.Output(table, metadata=table_metadata(table, preview_rows=12))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def review_significance_robustness(review_paired_cis: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Every model × format: the paper's tests BH-adjusted across models × formats per measure, and whether a
    significant result's paired interval excludes 0."""
    table = robust.with_bh(review_paired_cis)
    return dg.Output(table, metadata=table_metadata(table, preview_rows=12))
