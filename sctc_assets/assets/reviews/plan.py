"""What `sctc run --benchmarks reviews` materializes and its end-of-run summary (its options and their asset
config: `sctc_assets.benchmark_options`)."""

from __future__ import annotations

from typing import Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.benchmark_options import OPTIONS
from sctc_assets.lib.reviews.pairing import unpaired_counts, unpaired_reviews
from sctc_assets.runner import BenchmarkPlan


def _cell(row: pd.Series, measure: str, digits: int) -> str:
    return f"{row[f'{measure}_tw']:.{digits}f} / {row[f'{measure}_cn']:.{digits}f}"


def reviews_summary(tables: Mapping[str, pd.DataFrame], models: list[str]) -> str:
    pairs = tables.get("review_pairs")
    if pairs is None:
        return "no review_pairs were produced"
    lines = [f"Aligned review pairs: {len(pairs)} (by rating class {pairs['rating_class'].value_counts().to_dict()}, "
             f"by length {pairs['length_group'].value_counts().to_dict()})"]
    if "raw_reviews" in tables and "review_varieties" in tables:
        unpaired = unpaired_reviews(tables["raw_reviews"], tables["review_varieties"], pairs)
        lines.append(f"Unpaired reviews: {len(unpaired)} of {len(tables['raw_reviews'])}: {unpaired_counts(unpaired)}")
    metrics = tables.get("review_metrics")
    if not models:
        lines.append("No model run (add --models KEY … to score the pairs).")
    elif metrics is None or metrics.empty:
        lines.append("no review_metrics were produced")
    else:
        chosen = metrics[metrics["model"].isin(models)]
        lines.append("Score prediction on pairs with two valid answers, every format (Δ = cn − tw; McNemar for "
                     "accuracy, paired t-test for squared error)\n"
                     + _metric_table(chosen[(chosen["analysis"] == "length") & (chosen["subset"] == "all")]))
        control = chosen[chosen["analysis"] == "translation"]
        if not control.empty:
            lines.append("\nTranslation control (Table 3): each review as written and converted with OpenCC; "
                         "tw / cn = the variety of the text\n" + _metric_table(control, subset=True))
    return "\n".join(lines)


def _metric_table(metrics: pd.DataFrame, *, subset: bool = False) -> str:
    rows = [{"model": row["model"], "format": row["format"], **({"reviews": row["subset"]} if subset else {}),
             "pairs": int(row["n_pairs"]),
             "excluded": int(row["n_excluded"]) if pd.notna(row["n_excluded"]) else "–",
             "acc % tw / cn": _cell(row, "acc", 2), "Δacc": f"{row['delta_acc']:+.2f} {row['sig_acc']}",
             "MSE tw / cn": _cell(row, "mse", 3), "ΔMSE": f"{row['delta_mse']:+.3f} {row['sig_mse']}"}
            for _, row in metrics.iterrows() if row["n_pairs"] > 0]
    return tabulate(rows, headers="keys", tablefmt="github")


REVIEWS_PLAN = BenchmarkPlan(
    **OPTIONS["reviews"].plan_fields(),
    inputs=("raw_reviews", "review_varieties", "review_pairs", "review_prompts"),
    per_model_lang=("review_predictions",),
    per_model=("review_metrics", "review_paired_cis"),
    cross_model=("review_significance_robustness",),
    summary=reviews_summary,
    jobs={"per_model_lang": "reviews_model_format"},
)
