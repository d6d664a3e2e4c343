"""Bootstrap intervals of the sovereignty metrics and whether the paper's McNemar results survive."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import catalogued
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.sovereignty import robust

GROUP = "sovereignty"


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def sovereignty_bootstrap_cis(sovereignty_results: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Per model, scoring rule, prompt set, condition and language pair: Score of each language, LBS, consistency C
    and QAC with seeded two-stage bootstrap 95 % intervals (prompts, then samples within a prompt; `ci_low`/
    `ci_high`/`ci_method`), the ICC of a prompt's samples and the power of the prompts × samples design (minimum detectable
    LBS, paired over prompts and clustered; prompts needed for an LBS of 0.2)."""
    table = robust.bootstrap_table(sovereignty_results) if not sovereignty_results.empty else pd.DataFrame()
    return dg.Output(table, metadata=table_metadata(table, preview_rows=25))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def sovereignty_significance_robustness(sovereignty_summary: pd.DataFrame,
                                        sovereignty_bootstrap_cis: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """For every model: the paper's McNemar χ² p (uncorrected) against the exact McNemar p BH-adjusted across
    models and the bootstrap interval of LBS; `survives` for results significant in the paper's test."""
    table = robust.significance_robustness(sovereignty_summary, sovereignty_bootstrap_cis)
    return dg.Output(table, metadata=table_metadata(table, preview_rows=25))
