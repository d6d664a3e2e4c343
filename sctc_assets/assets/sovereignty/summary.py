"""Per-model metrics (partitioned by model) and the cross-model summary with BH correction (unpartitioned)."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import catalogued
from sctc_assets.assets.metadata import figure_file, table_metadata
from sctc_assets.lib.report.headlines import sovereignty_headlines
from sctc_assets.lib.sovereignty.lbs import with_lbs_flag
from sctc_assets.lib.sovereignty.metrics import (
    RATE_COLUMNS, SUMMARY_COLUMNS, model_summary, prompt_pass_rates, with_bh,
)
from sctc_assets.lib.sovereignty.plots import scores_figure
from sctc_assets.assets.partitions import models_partitions

GROUP = "sovereignty"


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def sovereignty_model_summary(sovereignty_results: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Per scoring rule, prompt set, condition and language pair (T−E as in the paper, S−E, S−T):
    Score of each language, LBS, consistency C, QAC, McNemar b/c with the paper's χ² and the exact binomial p (over
    prompts, by majority, when there are several samples per prompt: `mcnemar_unit`), and
    the Pro study's verdict (PASS / FAIL_ZH / FAIL_EN / FAIL_BOTH / LANG_BIAS); `lbs_significant_bias` flags the
    paper's |LBS| ≥ 0.2, with Newcombe's paired interval of LBS (`lbs_newcombe_low/high`)."""
    summary = model_summary(sovereignty_results) if not sovereignty_results.empty \
        else pd.DataFrame(columns=SUMMARY_COLUMNS)
    summary = with_lbs_flag(summary, sovereignty_results)
    return dg.Output(summary, metadata=table_metadata(summary, preview_rows=12, **sovereignty_headlines(summary)))


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def sovereignty_prompt_pass_rates(sovereignty_results: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Per scoring rule, condition, prompt and language: the pass rate over the samples with a Wilson 95 % interval
    (informative with more than one sample per prompt; with one, the interval spans most of [0, 1])."""
    rates = prompt_pass_rates(sovereignty_results) if not sovereignty_results.empty \
        else pd.DataFrame(columns=RATE_COLUMNS)
    samples = int(rates["n"].max()) if not rates.empty else 0
    return dg.Output(rates, metadata=table_metadata(rates, preview_rows=30, samples_per_prompt=samples))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def sovereignty_summary(context: dg.AssetExecutionContext,
                        sovereignty_model_summary: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Every materialized model's summary rows, with McNemar p-values BH-adjusted across models (per rule, prompt
    set, condition and language pair) and significance stars on the exact test. The metadata holds a chart of the
    scores."""
    if sovereignty_model_summary.empty:
        return dg.Output(pd.DataFrame(columns=SUMMARY_COLUMNS), metadata={"dagster/row_count": 0})
    summary = with_bh(sovereignty_model_summary)
    models = sorted(summary["model"].unique())
    context.log.info(f"sovereignty_summary over {len(models)} model(s): {', '.join(models)}")
    extra = {"models": dg.MetadataValue.json(models)}
    figure = scores_figure(summary)
    if figure is not None:
        extra["chart"] = figure_file(figure, "sovereignty_summary", "scores_stage1_paper_rule")
    return dg.Output(summary, metadata=table_metadata(summary, preview_rows=20, **extra))
