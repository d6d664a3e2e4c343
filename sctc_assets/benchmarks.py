"""What `sctc run` knows about each benchmark: its stages, its run options, and its end-of-run summary."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.assets.corpus.plan import CORPUS_PLAN
from sctc_assets.assets.name.plan import NAME_PLAN
from sctc_assets.assets.reviews.plan import REVIEWS_PLAN
from sctc_assets.assets.sovereignty.plan import SOVEREIGNTY_PLAN
from sctc_assets.partitions import TERM_LANGS
from sctc_assets.runner import BenchmarkPlan


def _term_arguments(parser: Any) -> None:
    group = parser.add_argument_group("term benchmark")
    group.add_argument("--trials", type=int, help="trials per prompt for every model (default: registry, else 15)")
    group.add_argument("--prompt-variants", type=int, nargs="+", choices=[1, 2, 3],
                       help="prompt variants (default: registry, else 1 2 3)")
    group.add_argument("--judge", metavar="KEY", help="registry key of a judge model for the `judge` labels")


def _term_config(options: Mapping[str, Any]) -> dict:
    return {
        "term_responses": {"trials": options.get("trials"), "prompt_variants": options.get("prompt_variants")},
        "term_judgements": {"judge": options.get("judge")},
    }


def term_summary(tables: Mapping[str, pd.DataFrame], models: list[str]) -> str:
    rates = tables.get("term_choice_rates")
    if rates is None or rates.empty:
        return "no term_choice_rates were produced"
    tests = tables.get("term_choice_tests", pd.DataFrame())
    rates = rates[(rates["subset"] == "all") & rates["model"].isin(models)]
    variant = 1 if (rates["prompt_variant"] == 1).any() else int(rates["prompt_variant"].min())
    rates = rates[rates["prompt_variant"] == variant]
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
    return (f"Regional term choice, prompt variant {variant}, all terms (S = Simplified prompts, "
            f"T = Traditional prompts; significance: Welch t-test, BH-adjusted across models)\n"
            + tabulate(rows, headers="keys", tablefmt="github"))


TERM_PLAN = BenchmarkPlan(
    name="term",
    langs=TERM_LANGS,
    inputs=("regional_terms", "term_prompts", "term_published_labels", "term_verdict_lexicon",
            "term_incorrect_types"),
    per_model_lang=("term_responses", "term_judgements", "term_labels"),
    per_model=("term_choice_rates", "term_misalignment_by_term"),
    cross_model=("term_choice_tests", "term_variant_correlations", "term_misalignment_summary",
                 "term_label_source_agreement", "term_robust_tests", "term_significance_robustness", "term_power"),
    config=_term_config,
    add_arguments=_term_arguments,
    summary=term_summary,
    # A Pro-study result file holds sovereignty answers only.
    serves=lambda entry: entry.backend != "tsb_replay",
)

# One entry per benchmark: `sctc run --benchmarks` offers these, in this order.
PLANS: dict[str, BenchmarkPlan] = {plan.name: plan for plan in (TERM_PLAN, NAME_PLAN, SOVEREIGNTY_PLAN, REVIEWS_PLAN,
                                                                   CORPUS_PLAN)}
