"""Metric tables of the name task: per model (partitioned by model only) and across models (unpartitioned)."""

from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.benchmarks.name import NAME
from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import figure_file, markdown_table, table_metadata
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.corpus.tables import upstream_name_counts
from sctc_assets.lib.name import metrics
from sctc_assets.lib.name.candidates import EXPERIMENTS
from sctc_assets.lib.name.plots import selection_rates_figure
from sctc_assets.lib.name.selections import agreement, published_regions
from sctc_assets.lib.report.headlines import name_headlines
from sctc_assets.lib.sctc_upstream import name_candidate_file, name_permutation_file
from sctc_assets.lib.upstream_source import UpstreamFileMissing
from sctc_assets.assets.partitions import models_partitions
from sctc_assets.resources.io_manager import OPTIONAL_INPUT
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "name"
# Appendix A.10 / Figure 6: the authors' permutation runs, 20 to 380 shuffles in steps of 20.
PAPER_PERMUTATIONS = tuple(range(20, 400, 20))


def _missing_lists_notes(skipped: list[tuple[str, str]]) -> list[str]:
    return [f"{experiment} ({source} lists): skipped, " + (
        f"{name_candidate_file(EXPERIMENTS[experiment].prompt_id)} is missing" if source == "upstream"
        else "no candidate lists") for experiment, source in skipped]


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def name_choice_rates(name_selections: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """`model, lang, experiment, extraction_source, n, n_valid, valid_rate, mainland_rate` (fractions 0–1; the
    Mainland rate among valid answers, Figures 3/4/10/11), Wilson 95 % CIs, and the z-test of the Mainland share
    against 50 % with the standard error under the null (`p_one_sided`: "smaller", as the scripts; `p_two_sided`;
    the scripts' sample-SE form as `z_scripts`, `p_one_sided_scripts`), with the invalid answers by kind.
    `name_choice_tests` adds the BH adjustment across models × languages."""
    rates = metrics.choice_rates(name_selections)
    return dg.Output(rates, metadata=table_metadata(rates, preview_rows=24, **name_headlines(rates)))


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def name_extraction_agreement(name_selections: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """How often the deterministic extractor gives the region the authors' published extraction gives (both
    invalid counts as agreeing), per lang, experiment and candidate scope, on the answers that have raw text;
    with the count of each kind of disagreement. Examples are in `name_selections`' metadata."""
    table = agreement(name_selections)
    overall = float(table["n_agree"].sum() / table["n_compared"].sum()) if not table.empty else float("nan")
    return dg.Output(table, metadata=table_metadata(table, preview_rows=30, overall_agreement=overall))


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def name_top_selected(context: dg.AssetExecutionContext, name_selections: pd.DataFrame,
                      name_candidate_lists: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Every selected name ranked by normalised frequency (selections ÷ appearances in the lists asked), region
    M / T / NA, per lang, experiment and extraction source; rank ≤ 5 of `main` is Tables 2/21. Experiments whose
    candidate lists the upstream copy lacks are skipped and named."""
    table, skipped = metrics.selection_frequencies(name_selections, name_candidate_lists)
    notes = _missing_lists_notes(skipped)
    for note in notes:
        context.log.warning(f"name_top_selected: {note}")
    top = table[table["rank"] <= 5]
    return dg.Output(table, metadata=table_metadata(
        table, top5=dg.MetadataValue.md(markdown_table(top, rows=90)), notes=dg.MetadataValue.json(notes)))


class NamePairConfig(dg.Config):
    names: Optional[list[str]] = Field(
        default=None, description="The two candidates whose selection rates Table 23 compares (`--name-pair A B`); "
                                  "unset: no rows (the paper's pair is not legible in its text).")


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def name_pair_selection_rates(config: NamePairConfig, name_selections: pd.DataFrame,
                              name_candidate_lists: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Table 23 for one model and two named candidates: each one's selection rate (selections ÷ appearances in
    the lists asked, %) and share of all answers, per prompt language, experiment and extraction source."""
    names = list(config.names or [])
    table = metrics.pair_selection_rates(name_selections, name_candidate_lists, names)
    main = table[(table["experiment"] == "main") & (table["extraction_source"] == "rules")] if not table.empty \
        else table
    layout = (main.pivot_table(index="name", columns="lang", values="selection_rate").round(2).reset_index()
              if not main.empty else pd.DataFrame())
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, names=dg.MetadataValue.json(names),
        table_23=dg.MetadataValue.md(markdown_table(layout, rows=2) if not layout.empty else "_(no pair named)_")))


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def name_gender_tables(context: dg.AssetExecutionContext, name_selections: pd.DataFrame,
                       name_candidate_lists: pd.DataFrame, regional_names: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Table 30 (male share among valid selections of the gender-balanced lists, z-test against 50 %) and Tables
    24–29 (popularity lists with k = 1–3 male names per region: Mainland share against 50 % and the male share of
    each region's selections against k/10), one-sided as the scripts, two-sided too."""
    table = pd.concat([metrics.male_share_table(name_selections, regional_names),
                       metrics.matched_gender_tables(name_selections, name_candidate_lists, regional_names)],
                      ignore_index=True)
    asked = set(name_selections.loc[name_selections["experiment"] == "popularity", "list_source"]) \
        if not name_selections.empty else set()
    listed = set(name_candidate_lists.loc[name_candidate_lists["experiment"] == "popularity", "list_source"])
    notes = _missing_lists_notes([("popularity", source) for source in sorted(asked - listed)])
    for note in notes:
        context.log.warning(f"name_gender_tables: Tables 24-29 {note}")
    return dg.Output(table, metadata=table_metadata(table, preview_rows=30, notes=dg.MetadataValue.json(notes)))


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def name_permutation_stability(context: dg.AssetExecutionContext, name_selections: pd.DataFrame,
                               models: ModelRegistryResource, upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Figure 6: % Mainland names of all answers against the number of shuffles. Replay models: the authors'
    permutation runs (`permutation_final`, 20–380 shuffles, source `upstream_permutation_runs`); every model: the
    same value over the first k shuffles of each list of its own answers, k = 1…S."""
    model = context.partition_key
    frames = [metrics.shuffle_curve(name_selections)]
    entry = models.entry(model)
    missing: list[str] = []
    if traits(entry.backend).replays_benchmark("name"):
        source, records = upstream.open(), []
        for lang in NAME.langs:
            for permutations in PAPER_PERMUTATIONS:
                relative = name_permutation_file(str(entry.settings["upstream_name"]), lang, permutations)
                try:
                    codes = source.read_csv(relative, ["region"])["region"]
                except UpstreamFileMissing:
                    missing.append(relative)
                    continue
                records.append({"model": model, "lang": lang, "source": "upstream_permutation_runs",
                                "experiment": "main", "shuffles": permutations,
                                **metrics.region_point(pd.Series(published_regions(codes, source_name=relative),
                                                                 dtype=object))})
        frames.append(pd.DataFrame(records, columns=metrics.STABILITY_COLUMNS))
    if missing:
        context.log.warning(f"name_permutation_stability {model}: {len(missing)} permutation files missing, "
                            f"e.g. {missing[0]}")
    frames = [frame for frame in frames if not frame.empty]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=metrics.STABILITY_COLUMNS)
    return dg.Output(table, data_version=content_version(table),
                     metadata=table_metadata(table, permutation_files_missing=len(missing)))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def name_choice_tests(context: dg.AssetExecutionContext, name_choice_rates: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """`name_choice_rates` of every materialized model with Benjamini–Hochberg adjusted p-values (one- and
    two-sided) across models × languages, per experiment and extraction source; Figure 3-style charts."""
    tests = metrics.choice_tests(name_choice_rates)
    models = sorted(tests["model"].unique()) if not tests.empty else []
    context.log.info(f"name_choice_tests over {len(models)} model(s): {', '.join(models)}")
    charts = {}
    for experiment, source in sorted(set(zip(tests["experiment"], tests["extraction_source"]))) if models else []:
        figure = selection_rates_figure(tests, experiment=experiment, extraction_source=source)
        if figure is not None:
            charts[f"chart_{experiment}_{source}"] = figure_file(figure, "name_choice_tests", f"{experiment}_{source}")
    return dg.Output(tests, metadata=table_metadata(tests, preview_rows=33, models=dg.MetadataValue.json(models),
                                                    **charts))


class PopularityCorrelationConfig(dg.Config):
    experiments: list[str] = Field(default=["main"], description="Experiments to correlate (Table 22: main).")
    exclude_from_bh: list[str] = Field(
        default=["paper-ds"], description="Models reported but left out of the BH family (the paper's Table 22 "
                                          "has no DeepSeek-R1).")


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"},
          # optional: `sctc run --benchmarks name` without a corpus run has no corpus_name_counts
          ins={"corpus_name_counts": dg.AssetIn(metadata={OPTIONAL_INPUT: True})})
def name_popularity_correlation(context: dg.AssetExecutionContext, config: PopularityCorrelationConfig,
                                name_top_selected: pd.DataFrame, regional_names: pd.DataFrame,
                                corpus_name_counts: pd.DataFrame,
                                upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Table 22: Spearman's ρ between how often a name is selected (normalised frequency, `name_top_selected`)
    and its c4 count, BH-adjusted once across models × languages per experiment and extraction source. The counts
    are the project's (`corpus_name_counts`, `count_source = project`) once every c4 shard is counted, else the
    authors' (`source_data/corpus_count/regional_name/*_c4.csv`); column and metadata `count_source` say which.
    Without candidate lists (the shared copy lacks `prompt_id_0.csv`) the paper models have no frequencies and
    are skipped, with that file named."""
    source = upstream.open()
    published, missing = upstream_name_counts(source, regional_names)
    counts, count_source = metrics.table22_counts(corpus_name_counts, published)
    if count_source == "project":
        missing = []
    chosen = name_top_selected[name_top_selected["experiment"].isin(config.experiments)] \
        if not name_top_selected.empty else name_top_selected
    table = metrics.popularity_correlation(chosen, counts, regional_names, exclude_from_bh=config.exclude_from_bh,
                                           count_source=count_source)
    main_lists = name_candidate_file(EXPERIMENTS["main"].prompt_id)
    notes = [f"{relative} is missing: names without a count are left out" for relative in missing]
    if not source.exists(main_lists):
        notes.append(f"{main_lists} is missing: the paper models' Table 22 (their answers to the authors' main "
                     "lists) is skipped")
    for note in notes:
        context.log.warning(f"name_popularity_correlation: {note}")
    described = {"project": "project c4 (corpus_name_counts, every shard counted)",
                 "upstream": "upstream c4 (source_data/corpus_count/regional_name)"}[count_source]
    return dg.Output(table, data_version=content_version(table),
                     metadata=table_metadata(table, preview_rows=33, notes=dg.MetadataValue.json(notes),
                                             count_source=count_source, corpus_counts=described))
