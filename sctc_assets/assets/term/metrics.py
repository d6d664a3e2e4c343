"""Metric tables: per model (partitioned by model only) and across models (unpartitioned)."""

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import figure_file, table_metadata
from sctc_assets.lib.report.headlines import term_headlines
from sctc_assets.lib.term import categories, metrics
from sctc_assets.lib.term.plots import choice_rates_figure
from sctc_assets.assets.partitions import models_partitions

GROUP = "term"


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def term_choice_rates(term_labels: pd.DataFrame, regional_terms: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Percentages (0–100) of correct, misaligned and incorrect answers per lang, prompt variant, label source and
    subset (`all`, or `no_gpt_definitions` for the Figure 5 robustness check), with the counts behind them; a
    refusal counts as incorrect and also as `n_refusal`."""
    rates = metrics.choice_rates(term_labels, metrics.subset_term_ids(regional_terms)) if not term_labels.empty \
        else metrics.empty_rates()
    return dg.Output(rates, metadata=table_metadata(rates, preview_rows=24, **term_headlines(rates)))


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def term_misalignment_by_term(term_labels: pd.DataFrame, regional_terms: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Per term × lang × variant × label source: correct/misaligned/incorrect counts over the trials and the
    paper's "misaligned in at least 3 of 15 trials" flag (scaled for other trial counts), Tables 14–17."""
    by_term = metrics.misalignment_by_term(term_labels, regional_terms) if not term_labels.empty else pd.DataFrame()
    flagged = by_term[by_term["misaligned_term"]] if not by_term.empty else by_term
    counts = (flagged.groupby(["lang", "prompt_variant", "label_source"]).size().rename("terms").reset_index()
              .to_dict("records") if not flagged.empty else [])
    return dg.Output(by_term, metadata=table_metadata(by_term, misaligned_terms=dg.MetadataValue.json(counts)))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def term_choice_tests(context: dg.AssetExecutionContext, term_choice_rates: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Simplified vs Traditional tests per model on the correct and on the misaligned share: Welch's t-test (the
    paper's), two-proportion z-test, Wilson 95 % CIs, difference and Cohen's h, BH-adjusted across all
    materialized models. The metadata holds a Figure-2-style chart."""
    tests = metrics.choice_tests(term_choice_rates)
    models = sorted(term_choice_rates["model"].unique()) if not term_choice_rates.empty else []
    context.log.info(f"term_choice_tests over {len(models)} model(s): {', '.join(models)}")
    extra = {"models": dg.MetadataValue.json(models)}
    if not term_choice_rates.empty:
        for variant in sorted(term_choice_rates["prompt_variant"].unique()):
            figure = choice_rates_figure(term_choice_rates, prompt_variant=int(variant))
            if figure is not None:
                extra[f"chart_prompt_variant_{variant}"] = figure_file(figure, "term_choice_tests",
                                                                      f"prompt_variant_{variant}")
    return dg.Output(tests, metadata=table_metadata(tests, preview_rows=22, **extra))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def term_variant_correlations(term_choice_rates: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Pearson correlations of the rates across prompt variants (Appendix B.1) and between all terms and the
    terms without GPT-written definitions (Appendix A.8), one point per model × lang."""
    correlations = metrics.variant_correlations(term_choice_rates) if not term_choice_rates.empty else pd.DataFrame()
    return dg.Output(correlations, metadata=table_metadata(correlations, preview_rows=20))


class MisalignmentSummaryConfig(dg.Config):
    majority: float = Field(default=0.5, description="Share of models that must misalign a term for it to count "
                                                     "as commonly misaligned (paper: at least half).")


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def term_misalignment_summary(config: MisalignmentSummaryConfig,
                              term_misalignment_by_term: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Section 3.2.1 numbers: terms misaligned per model (≥3/15 and ≥1/15 rules), mean and population/sample SD
    across models, and how many terms a majority of models misalign (Table 18's candidates)."""
    if term_misalignment_by_term.empty:
        return dg.Output(pd.DataFrame(), metadata={"dagster/row_count": 0})
    summary = metrics.misalignment_summary(term_misalignment_by_term, majority=config.majority)
    majority_terms = metrics.majority_misaligned_terms(term_misalignment_by_term, majority=config.majority)
    return dg.Output(summary, data_version=content_version(summary), metadata=table_metadata(
        summary, preview_rows=12,
        majority_terms=dg.MetadataValue.md(
            majority_terms.to_markdown(index=False) if not majority_terms.empty else "_(none)_")))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def term_misalignment_by_category(term_misalignment_by_term: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Per model × lang × prompt variant × label source × term category: misaligned terms (the paper's ≥ 3 of 15
    rule) and misaligned answers with their rates, and whether the categories differ: chi-square of categories ×
    misaligned terms with a permutation p-value (margins fixed), and each category against the rest by Fisher's
    exact test, BH-adjusted (`lib/term/categories.py` says why)."""
    table = categories.misalignment_by_category(term_misalignment_by_term)
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(table, preview_rows=20))
