"""SC-TC-Bench Task 1, regional term choice (Lyu et al., FAccT 2025): the benchmark's spec.

regional_terms → term_prompts → term_responses → term_judgements → term_labels → term_choice_rates /
term_misalignment_by_term → the cross-model tests, correlations, summaries and power.
"""

from __future__ import annotations

import argparse

from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.benchmarks.plan_power import term_power_lines
from sctc_assets.benchmarks.spec import (CROSS_MODEL, GENERATION, INPUTS, JUDGE, MODEL_LANG, PER_MODEL, AssetEntry,
                                         BenchmarkSpec, JudgeSetting, OptionRange, ReportPart)
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.cost_estimate import ExpectedAnswer, PartitionDesign, SharedRequests
from sctc_assets.lib.drift import drift_epochs
from sctc_assets.lib.fetching import Download, location_downloads
from sctc_assets.lib.schemas import term as term_schemas
from sctc_assets.lib.schemas.bias_factors import TERM_BIAS_FACTORS
from sctc_assets.lib.sctc_upstream import open_sctc_upstream, resolved_location
from sctc_assets.lib.term.prompts import PAPER_TRIALS, generation_overrides, run_settings, upstream_term_prompts
from sctc_assets.lib.term.requests import term_requests
from sctc_assets.lib.varieties import SIMPLIFIED, TRADITIONAL

ASSETS = {
    "regional_terms": AssetEntry(INPUTS, "The 110 regional terms with both regions' forms and definitions."),
    "term_prompts": AssetEntry(INPUTS, "Every term prompt of the three variants in both scripts, with the answers "
                                       "that count as correct."),
    "term_responses": AssetEntry(MODEL_LANG, "One model's answers to the term prompts of one "
                                             "language.", calls=GENERATION),
    "term_judgements": AssetEntry(MODEL_LANG, "A judge model's correctness verdicts on one partition's "
                                              "answers.", calls=JUDGE),
    "term_labels": AssetEntry(MODEL_LANG, "Correct, misaligned or incorrect labels of one partition's answers, by "
                                          "label source."),
    "term_choice_rates": AssetEntry(PER_MODEL, "One model's correct, misaligned and incorrect rates per language and "
                                               "prompt variant."),
    "term_misalignment_by_term": AssetEntry(PER_MODEL, "One model's label counts per term and its misaligned terms."),
    "term_choice_tests": AssetEntry(CROSS_MODEL, "Simplified vs Traditional significance tests for every materialized"
                                                 " model."),
    "term_variant_correlations": AssetEntry(CROSS_MODEL, "Correlations of the rates across prompt variants and term "
                                                         "subsets."),
    "term_misalignment_summary": AssetEntry(CROSS_MODEL, "How many terms each model misaligns, and which terms most "
                                                         "models misalign."),
    "term_misalignment_by_category": AssetEntry(CROSS_MODEL, "Misaligned terms and answers per term category, with "
                                                             "a test of whether the categories differ."),
    "term_published_labels": AssetEntry(INPUTS, "The 11 paper LLMs' published term answers with the authors' label "
                                                "and the `rules` label."),
    "term_verdict_lexicon": AssetEntry(INPUTS, "Shares of the authors' labels per language, term, extracted answer "
                                               "and paper model."),
    "term_incorrect_type_judgements": AssetEntry(MODEL_LANG, "A judge model's answers to Appendix B.4's question "
                                                             "about one partition's incorrect first-trial answers.",
                                                 calls=JUDGE, opt_in="judge"),
    "term_incorrect_types": AssetEntry(CROSS_MODEL, "Shares of entirely wrong and uncommon-usage incorrect answers "
                                                    "per paper model and judged model (Table 19).", code_version="2"),
    "term_label_source_agreement": AssetEntry(CROSS_MODEL, "Every label source's agreement with the authors' "
                                                           "published labels, per paper model and language."),
    "term_robust_tests": AssetEntry(CROSS_MODEL, "Simplified vs Traditional tests with the term as the unit, next to "
                                                 "the paper's trial-level test."),
    "term_significance_robustness": AssetEntry(CROSS_MODEL, "Whether each model's significant S vs T result survives "
                                                            "the term-level tests."),
    "term_power": AssetEntry(CROSS_MODEL, "Minimum detectable S − T differences of the design run, and the terms and "
                                          "trials an effect needs."),
    "term_bias_factors": AssetEntry(PER_MODEL, "One model's term outcomes regressed on corpus and token ratios (GEE "
                                               "by term), with S − T gap shares."),
    "term_drift": AssetEntry(PER_MODEL, "One model's term choice rates under two epoch tags compared answer by answer "
                                        "(McNemar, flips), from the cache.", opt_in="term_drift"),
}


# The prompts ask for the term alone. The paper models that comply answer in about that: the published answers of
# GPT-4o, GPT-4, Qwen-1.5 and Breeze have a median of 3 tokens (o200k_base), means 3.1 to 4.5.
TERM_ANSWER = ExpectedAnswer(4, "one word, the term")


def not_a_pro_result(entry: Any) -> bool:
    """Not a replay of another benchmark's published answers: a Pro-study result file (`tsb_replay`) holds
    sovereignty answers only. (The name benchmark shares it: SC-TC-Bench's replays cover both.)"""
    return traits(entry.backend).answers("term")


def term_arguments(parser: Any) -> None:
    group = parser.add_argument_group("term benchmark")
    group.add_argument("--trials", type=int, metavar="N",
                       help="trials per prompt for every model, 1–15 (default: registry, else 15)")
    group.add_argument("--prompt-variants", type=int, nargs="+", choices=[1, 2, 3],
                       help="the term prompt's variants (default: registry, else 1 2 3); the name benchmark's "
                            "are a file: --name-prompt-variants FILE")
    group.add_argument("--judge", metavar="KEY", help="registry key of a judge model for the `judge` labels and for the types of incorrect "
                            "answer (Table 19) of models that are not replays")
    group.add_argument("--term-drift", nargs=2, metavar=("EPOCH_A", "EPOCH_B"),
                       help="compare each model's cached term answers under two epoch tags answer by answer "
                            "(term_drift; `none`: the untagged answers, `served-<12hex>`: an observed served "
                            "version); no model is called")
    items = parser.add_argument_group("term benchmark on other item sets and varieties (docs/item-sets.md)")
    items.add_argument("--term-items", metavar="PATH|URL|NAME",
                       help="run the term benchmark on this item set instead of the paper's 110 terms: a CSV in the "
                            "item-set schema, a csld list, a URL to either, a set named in $SCTC_ITEM_SETS, or csld "
                            "/ csld-straits ($SCTC_CSLD_UPSTREAM); its assets are terms_<set>_…")
    items.add_argument("--varieties", nargs="+", metavar="CODE",
                       help="prompting varieties, e.g. zh-TW zh-HK zh-MO (default: every variety whose region the "
                            "set has forms for)")
    items.add_argument("--cue", choices=["script", "stated", "both"],
                       help="region cue: script (the paper's: the script is the only cue), stated (one sentence "
                            "naming the region), both (default script)")
    items.add_argument("--extend-from", nargs="+", metavar="SOURCE",
                       help="add these sources' region forms to the set, matching concepts by a shared Taiwan form "
                            "(e.g. --extend-from csld: the 110 terms with Hong Kong and Macau forms)")
    items.add_argument("--item-set-name", metavar="NAME",
                       help="the set's name (its assets are terms_<NAME>_…; default: from the source)")
    subset_arguments(items)


def positive_int(text: str) -> int:
    """argparse's type for a count of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def subset_arguments(group: Any) -> None:
    """`--term-limit` and `--concepts`: a part of an item set, the same for `sctc run`/`plan --term-items` and
    `sctc terms define --items`."""
    group.add_argument("--term-limit", type=positive_int, metavar="N",
                       help="only the set's first N concepts (of --concepts, when given), to try a large set on a "
                            "slow model; the set's default name gets _first<N>")
    group.add_argument("--concepts", nargs="+", metavar="ID",
                       help="only these concepts (concept_id values; a csld three-places concept's id is its data "
                            "row's number, 1 under the header); the set's default name gets _c<digest>")


def term_check(options: Mapping[str, Any]) -> list[str]:
    """`--term-drift`: two different valid epoch tags."""
    try:
        drift_epochs(options["term_drift"], "--term-drift") if options.get("term_drift") else None
    except ValueError as exc:
        return [str(exc)]
    return []


def term_config(options: Mapping[str, Any]) -> dict:
    return {
        "term_responses": {"trials": options.get("trials"), "prompt_variants": options.get("prompt_variants")},
        "term_judgements": {"judge": options.get("judge")},
        "term_incorrect_type_judgements": {"judge": options.get("judge")},
        "term_drift": {"epochs": list(options.get("term_drift") or []), "trials": options.get("trials"),
                       "prompt_variants": options.get("prompt_variants")},
    }


def term_run_settings(values: Mapping[str, Any], entry: Any) -> tuple[int, list[int]]:
    """Trials and prompt variants: the run's config, else the registry entry's, else the paper's."""
    return run_settings(values.get("trials"), values.get("prompt_variants"), entry.benchmark_settings("term"))


def term_design(models: list[Any], options: Mapping[str, Any]) -> list[PartitionDesign]:
    """Every partition's requests for the estimate, as `term_responses` selects them."""
    table = upstream_term_prompts(open_sctc_upstream())
    return term_partition_designs(TERM, models, options, lambda lang, trials, variants: term_requests(
        table, lang, trials, variants))


def sctc_downloads(options: Mapping[str, Any]) -> list[Download]:
    """The SC-TC-Bench archive where its location is a URL (the default, until a run has extracted a copy)."""
    return location_downloads([resolved_location(options.get("upstream"))], "SC-TC-Bench data")


def term_partition_designs(spec: BenchmarkSpec, models: list[Any], options: Mapping[str, Any],
                           build: Any) -> list[PartitionDesign]:
    """One design per model × prompting language of a term-choice spec; `build(lang, trials, variants)` gives its
    (selected prompts, requests), made once for the models that ask the same."""
    shared, designs = SharedRequests(build), []
    for entry in models:
        trials, variants = spec.settings_for(options, entry)
        overrides = generation_overrides(entry.benchmark_settings("term"))
        for lang in spec.langs:
            selected, requests = shared((lang, trials, tuple(variants)), lang, trials, variants)
            designs.append(PartitionDesign(entry.key, lang, selected, requests, (trials, variants), overrides))
    return designs


def _variant_table(rates: pd.DataFrame, tests: pd.DataFrame, variant: int) -> str:
    rows = []
    for (model, source), frame in rates.groupby(["model", "label_source"]):
        by_lang = frame.set_index("lang")
        row: dict[str, Any] = {"model": model, "labels": source}
        for variety in (SIMPLIFIED, TRADITIONAL):
            tag = variety.tag
            if variety.code in by_lang.index:
                r = by_lang.loc[variety.code]
                row[f"{tag} n"] = int(r["n"])
                row[f"{tag} correct%"] = round(float(r["pct_correct"]), 2)
                row[f"{tag} misaligned%"] = round(float(r["pct_misaligned"]), 2)
                row[f"{tag} incorrect%"] = round(float(r["pct_incorrect"]), 2)
        if not tests.empty:
            match = tests[(tests["model"] == model) & (tests["label_source"] == source)
                          & (tests["prompt_variant"] == variant) & (tests["subset"] == "all")]
            for measure in ("correct", "misaligned"):
                found = match[match["measure"] == measure]
                row[f"S-T {measure} (BH)"] = (f"{float(found['diff_pct_points'].iloc[0]):+.1f} "
                                              f"{found['sig_t_bh'].iloc[0]}") if not found.empty else ""
        rows.append(row)
    return tabulate(rows, headers="keys", tablefmt="github")


def term_summary(tables: Mapping[str, pd.DataFrame], models: list[str]) -> str:
    """One table per prompt variant that ran."""
    rates = tables.get("term_choice_rates")
    if rates is None or rates.empty:
        return "no term_choice_rates were produced"
    tests = tables.get("term_choice_tests", pd.DataFrame())
    rates = rates[(rates["subset"] == "all") & rates["model"].isin(models)]
    if rates.empty:
        return "no term_choice_rates for the chosen models"
    return "\n\n".join(
        f"Regional term choice, prompt variant {variant}, all terms (S = Simplified prompts, T = Traditional "
        f"prompts; significance: Welch t-test, BH-adjusted across models)\n"
        + _variant_table(rates[rates["prompt_variant"] == variant], tests, int(variant))
        for variant in sorted(set(rates["prompt_variant"].astype(int))))


TERM = BenchmarkSpec(
    name="term",
    paper="sc-tc-bench",
    langs=(SIMPLIFIED.code, TRADITIONAL.code),
    assets=ASSETS,
    schemas=(*term_schemas.TABLES, TERM_BIAS_FACTORS),
    add_arguments=term_arguments,
    option_ranges=(OptionRange("trials", 1, PAPER_TRIALS),),
    check_options=term_check,
    config=term_config,
    response_asset="term_responses",
    run_settings=term_run_settings,
    design=term_design,
    downloads=sctc_downloads,
    settings_keys=frozenset({"trials", "prompt_variants", "max_new_tokens"}),
    judge=JudgeSetting("judge", "SCTC_TERM_JUDGE"),
    serves=not_a_pro_result,
    estimate_lines=(term_power_lines,),
    expected_answer=TERM_ANSWER,
    summary=term_summary,
    report_part=ReportPart("sctc_assets.lib.report.term", "term_", "Term choice (prompt variant 1)"),
    report_tables=("term_choice_rates", "term_choice_tests", "term_misalignment_summary", "term_misalignment_by_category",
                   "term_incorrect_types", "term_bias_factors", "term_drift"),
    skip_unchanged=True,
)
