"""What `sctc run --benchmarks name` materializes, its options and its end-of-run summary."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.lib.name.candidates import EXPERIMENTS, LIST_SOURCES
from sctc_assets.partitions import NAME_LANGS
from sctc_assets.runner import BenchmarkPlan

LANG_TAGS = {"zh_hans": "S", "zh_hant": "T", "en": "E"}


def _name_arguments(parser: Any) -> None:
    group = parser.add_argument_group("name benchmark")
    group.add_argument("--name-experiments", nargs="+", choices=list(EXPERIMENTS), metavar="EXPERIMENT",
                       help=f"experiments to run, of {', '.join(EXPERIMENTS)} (default: registry, else all)")
    group.add_argument("--name-lists", type=int, metavar="N", help="at most N lists per experiment (default: "
                                                                   "registry, else the paper's)")
    group.add_argument("--name-shuffles", type=int, metavar="N", help="at most N shuffles per list (default: "
                                                                      "registry, else the paper's)")
    group.add_argument("--name-list-source", choices=list(LIST_SOURCES),
                       help="whose candidate lists live models answer (default: the authors' where present)")
    group.add_argument("--name-seed", type=int, metavar="SEED", help="seed of the generated candidate lists")
    group.add_argument("--name-judge", metavar="KEY", help="registry key of an LLM extractor for `judge` selections")


def _name_config(options: Mapping[str, Any]) -> dict:
    config: dict = {
        "name_responses": {"experiments": options.get("name_experiments"), "lists": options.get("name_lists"),
                           "shuffles": options.get("name_shuffles"), "list_source": options.get("name_list_source")},
        "name_judgements": {"judge": options.get("name_judge")},
    }
    if options.get("name_seed") is not None:
        config["name_candidate_lists"] = {"seed": options["name_seed"]}
    return config


def name_summary(tables: Mapping[str, pd.DataFrame], models: list[str]) -> str:
    rates = tables.get("name_choice_tests")
    if rates is None or rates.empty:
        rates = tables.get("name_choice_rates")
    if rates is None or rates.empty:
        return "no name_choice_rates were produced"
    rates = rates[rates["model"].isin(models)]
    experiment = next((name for name in EXPERIMENTS if (rates["experiment"] == name).any()), None)
    if experiment is None:
        return "no name_choice_rates for the chosen models"
    rates = rates[rates["experiment"] == experiment]
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
    significance = ("z-test against 50 %, two-sided, BH-adjusted across models × languages"
                    if "sig_two_sided_bh" in rates.columns else "no significance: name_choice_tests was not produced")
    return (f"Regional name choice, experiment {experiment} (S/T/E = Simplified/Traditional/English prompts; "
            f"Mainland% among valid answers; {significance})\n" + tabulate(rows, headers="keys", tablefmt="github"))


NAME_PLAN = BenchmarkPlan(
    name="name",
    langs=NAME_LANGS,
    inputs=("regional_names", "name_candidate_lists", "name_prompts", "last_name_pairs", "tokenization_counts",
            "name_explanation_words", "name_talent_examples", "name_invalid_class_validation"),
    per_model_lang=("name_responses", "name_judgements", "name_selections"),
    per_model=("name_choice_rates", "name_extraction_agreement", "name_top_selected", "name_gender_tables",
               "name_permutation_stability", "last_name_logprobs", "name_list_clustered_rates"),
    cross_model=("name_choice_tests", "name_popularity_correlation", "last_name_agreement", "last_name_region_tests",
                 "name_significance_robustness"),
    config=_name_config,
    add_arguments=_name_arguments,
    summary=name_summary,
    # A Pro-study result file holds sovereignty answers only.
    serves=lambda entry: entry.backend != "tsb_replay",
)
