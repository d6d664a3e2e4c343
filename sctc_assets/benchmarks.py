"""What `sctc run` knows about each benchmark: its stages and its end-of-run summary (its run options:
`sctc_assets.benchmark_options`)."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.assets.corpus.plan import CORPUS_PLAN
from sctc_assets.assets.name.plan import NAME_PLAN
from sctc_assets.assets.reviews.plan import REVIEWS_PLAN
from sctc_assets.assets.sovereignty.plan import SOVEREIGNTY_PLAN
from sctc_assets.benchmark_options import OPTIONS
from sctc_assets.runner import BenchmarkPlan


def _variant_table(rates: pd.DataFrame, tests: pd.DataFrame, variant: int) -> str:
    rows = []
    for (model, source), frame in rates.groupby(["model", "label_source"]):
        by_lang = frame.set_index("lang")
        row: dict[str, Any] = {"model": model, "labels": source}
        for lang, tag in (("zh_hans", "S"), ("zh_hant", "T")):
            if lang in by_lang.index:
                r = by_lang.loc[lang]
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


TERM_PLAN = BenchmarkPlan(
    **OPTIONS["term"].plan_fields(),
    inputs=("regional_terms", "term_prompts", "term_published_labels", "term_verdict_lexicon",
            "term_incorrect_types"),
    per_model_lang=("term_responses", "term_judgements", "term_labels"),
    per_model=("term_choice_rates", "term_misalignment_by_term"),
    cross_model=("term_choice_tests", "term_variant_correlations", "term_misalignment_summary",
                 "term_label_source_agreement", "term_robust_tests", "term_significance_robustness", "term_power"),
    summary=term_summary,
    skip_unchanged=True,
)

# One entry per benchmark, in the order of `benchmark_options.BENCHMARKS` (what `sctc run --benchmarks` offers).
PLANS: dict[str, BenchmarkPlan] = {plan.name: plan for plan in (TERM_PLAN, NAME_PLAN, SOVEREIGNTY_PLAN, REVIEWS_PLAN,
                                                                   CORPUS_PLAN)}
