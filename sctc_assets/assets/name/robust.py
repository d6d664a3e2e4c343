"""The Mainland share with candidate-list-clustered standard errors, whether the paper's z-tests survive, and the
power of the design run."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import catalogued
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.name import robust
from sctc_assets.assets.partitions import models_partitions

GROUP = "name"


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def name_list_clustered_rates(name_selections: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Per lang, experiment and extraction source: the Mainland share of valid answers with a cluster-robust SE by
    candidate list (its CI in `ci_low`/`ci_high`), the z-test against 50 % with that SE and with the paper's
    independent-answers SE, the ICC of choices within a list and the power of the lists × shuffles design
    (minimum detectable departure from 50 %, lists needed for 45 %)."""
    table = robust.list_clustered_rates(name_selections) if not name_selections.empty else pd.DataFrame()
    return dg.Output(table, metadata=table_metadata(table, preview_rows=24))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def name_significance_robustness(name_list_clustered_rates: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Every model's Mainland-share test against 50 %, the paper's (each answer independent) and clustered by
    candidate list, BH-adjusted across models × languages per experiment and extraction source; `survives` says
    whether a result significant in the paper's test stays significant when the list is the unit."""
    table = robust.with_bh(name_list_clustered_rates)
    return dg.Output(table, metadata=table_metadata(table, preview_rows=33))
