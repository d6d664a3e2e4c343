"""Term-level tests next to the paper's trial-level test, which of the paper's results survive them, and the
power of the design actually run."""

import math

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import markdown_table, table_metadata
from sctc_assets.lib import power
from sctc_assets.lib.term import robust

GROUP = "term"


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def term_robust_tests(term_misalignment_by_term: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """S vs T with the term as the unit, per model, prompt variant, label source and measure: per-term rates
    paired across scripts (paired t and Wilcoxon over the 110 terms, 95 % paired-t CI of S − T in percentage
    points: `ci_low`/`ci_high`/`ci_method`), a trial-level logistic GEE clustered by term (exchangeable), the ICC
    of trials within terms, and the paper's trial-level Welch t-test (`paper_t_p`); every test BH-adjusted across
    the models of each (variant, source, measure) family."""
    tests = robust.term_level_tests(term_misalignment_by_term) if not term_misalignment_by_term.empty \
        else pd.DataFrame()
    return dg.Output(tests, metadata=table_metadata(tests, preview_rows=22))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def term_significance_robustness(term_robust_tests: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """For every model: is the paper's S vs T result significant (Welch t on trials, BH) and does it survive
    with the term as the unit (paired t, Wilcoxon, GEE; BH)? `verdict` says which tests it fails."""
    table = robust.significance_robustness(term_robust_tests)
    shown = table[(table["prompt_variant"] == 1)] if not table.empty else table
    return dg.Output(table, metadata=table_metadata(
        table, preview_rows=22, prompt_variant_1=dg.MetadataValue.md(markdown_table(shown, rows=60))))


class TermPowerConfig(dg.Config):
    effect_pct_points: float = Field(default=5.0, description="Effect (S − T, percentage points) for which the "
                                                              "needed terms and trials are computed.")


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def term_power(config: TermPowerConfig, term_robust_tests: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Per model, variant, label source and measure: the minimum detectable S − T difference (percentage points,
    80 % power, α = 0.05) of the design run, paired over terms (observed SD of per-term differences) and as
    clustered proportions (observed ICC of trials within terms), and the terms / trials per term needed for
    `effect_pct_points`."""
    rows = []
    for record in term_robust_tests.to_dict("records") if not term_robust_tests.empty else []:
        icc = [value for value in (record["icc_s"], record["icc_t"]) if not math.isnan(value)]
        baseline = max(record["pct_s"], record["pct_t"]) / 100
        row = power.power_row(n_units=int(record["n_terms"]), sd_difference=record["sd_term_diff"] / 100,
                              cluster_size=record["trials_per_term"], icc=sum(icc) / len(icc) if icc else math.nan,
                              baseline=baseline, effect=config.effect_pct_points / 100, unit="term", trial="trial")
        for column in ("mde_paired", "mde_clustered", "target_effect"):
            row[column] *= 100
        rows.append({key: record[key] for key in ("model", "prompt_variant", "label_source", "measure")} | row)
    table = pd.DataFrame(rows)
    return dg.Output(table, data_version=content_version(table),
                     metadata=table_metadata(table, preview_rows=22, scale="percentage points"))
