"""What `sctc run --benchmarks name` materializes and its end-of-run summary (its options and their asset config:
`sctc_assets.benchmark_options`)."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.benchmark_options import OPTIONS
from sctc_assets.lib.name.candidates import EXPERIMENTS
from sctc_assets.runner import BenchmarkPlan

LANG_TAGS = {"zh_hans": "S", "zh_hant": "T", "en": "E"}


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
        f"Mainland% among valid answers; {significance})\n" + _experiment_table(rates[rates["experiment"] == experiment])
        for experiment in experiments)


NAME_PLAN = BenchmarkPlan(
    **OPTIONS["name"].plan_fields(),
    inputs=("regional_names", "name_candidate_lists", "name_prompts", "last_name_pairs", "tokenization_counts",
            "name_explanation_words", "name_talent_examples", "name_invalid_class_validation"),
    per_model_lang=("name_responses", "name_judgements", "name_selections"),
    per_model=("name_choice_rates", "name_extraction_agreement", "name_top_selected", "name_gender_tables",
               "name_permutation_stability", "last_name_logprobs", "name_list_clustered_rates"),
    cross_model=("name_choice_tests", "name_popularity_correlation", "last_name_agreement", "last_name_region_tests",
                 "name_significance_robustness"),
    summary=name_summary,
    skip_unchanged=True,
)
