"""What `sctc run --benchmarks sovereignty` materializes and its end-of-run summary (its options and the import of
published results: `sctc_assets.benchmark_options`)."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.benchmark_options import OPTIONS
from sctc_assets.lib.languages import SOVEREIGNTY_LANGS
from sctc_assets.lib.sovereignty.metrics import language_scores
from sctc_assets.lib.sovereignty.upstream import MAIN_PROMPT_SET, PROMPT_SETS
from sctc_assets.runner import BenchmarkPlan


def _prompt_set_table(summary: pd.DataFrame) -> str:
    scores = language_scores(summary).set_index(["model", "scoring_rule", "lang"])
    rows = []
    for (model, rule), group in summary.groupby(["model", "scoring_rule"]):
        pairs = group.set_index(["lang_a", "lang_b"])
        row: dict[str, Any] = {"model": model, "rule": rule}
        for lang in SOVEREIGNTY_LANGS:
            key = (model, rule, lang)
            row[lang] = f"{scores.loc[key, 'passed']}/{scores.loc[key, 'n']}" if key in scores.index else "–"
        for (a, b), label in ((("zh_hant", "en"), "T−E"), (("zh_hans", "en"), "S−E"), (("zh_hans", "zh_hant"), "S−T")):
            row[f"LBS {label}"] = f"{pairs.loc[(a, b), 'lbs']:+.1f}" if (a, b) in pairs.index else "–"
        if ("zh_hant", "en") in pairs.index:  # the paper's pair
            pair = pairs.loc[("zh_hant", "en")]
            row.update({"C": f"{pair['consistency']:.0%}", "QAC": f"{pair['qac']:.2f}",
                        "b/c": f"{pair['mcnemar_b']}/{pair['mcnemar_c']}"
                               + (" prompts" if pair.get("mcnemar_unit") == "prompt" else ""),
                        "χ² p": f"{pair['p_chi2']:.3f}",
                        "exact p (BH)": f"{pair['p_exact_bh']:.3f} {pair['sig_exact_bh']}",
                        "verdict": pair["verdict"]})
        rows.append(row)
    return tabulate(rows, headers="keys", tablefmt="github", disable_numparse=True)


def sovereignty_summary_text(tables: Mapping[str, pd.DataFrame], models: list[str]) -> str:
    """One table per prompt set that ran: stage 1 first, then the extra sets."""
    summary = tables.get("sovereignty_summary")
    if summary is None or summary.empty:
        return "no sovereignty_summary was produced"
    summary = summary[summary["model"].isin(models)]
    present = set(summary["prompt_set"])
    prompt_sets = [name for name in dict.fromkeys([MAIN_PROMPT_SET, *PROMPT_SETS, *sorted(present)]) if name in present]
    if not prompt_sets:
        return "no sovereignty_summary rows for the chosen models"
    blocks = []
    for prompt_set in prompt_sets:
        title = "stage 1" if prompt_set == MAIN_PROMPT_SET else f"prompt set {prompt_set} (scored with the same rules)"
        blocks.append(f"Taiwan sovereignty benchmark, {title} (zh_hant/zh_hans/en: answers passed; C, QAC, McNemar and "
                      "verdict for zh_hant vs en; rules: code = the Pro study's rescore.py, paper = Section 3.3, judge "
                      "= paper + a judge model; exact McNemar p BH-adjusted across models)\n"
                      + _prompt_set_table(summary[summary["prompt_set"] == prompt_set]))
    return "\n\n".join(blocks)


SOVEREIGNTY_PLAN = BenchmarkPlan(
    **OPTIONS["sovereignty"].plan_fields(),
    inputs=("sovereignty_prompts",),
    per_model_lang=("sovereignty_responses", "sovereignty_judgements", "sovereignty_flags", "sovereignty_results"),
    per_model=("sovereignty_model_summary", "sovereignty_prompt_pass_rates", "sovereignty_pro_export"),
    cross_model=("sovereignty_summary", "sovereignty_review_queue", "sovereignty_bootstrap_cis",
                 "sovereignty_significance_robustness"),
    summary=sovereignty_summary_text,
)
