"""What `sctc run --benchmarks reviews` needs: its options, their asset config, and the end-of-run summary."""

from __future__ import annotations

import argparse
from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.backends import backend_class
from sctc_assets.lib.reviews.pairing import unpaired_counts, unpaired_reviews
from sctc_assets.lib.reviews.prompts import FORMATS
from sctc_assets.lib.reviews.source import FIELDS, REVIEWS_ENV_VAR
from sctc_assets.runner import BenchmarkPlan


def _assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return key, value


def _arguments(parser: Any) -> None:
    group = parser.add_argument_group("review benchmark (--benchmarks reviews; without --models only the "
                                      "model-independent assets run)")
    group.add_argument("--reviews", metavar="PATH|URL",
                       help=f"review export: .csv, .tsv, .parquet or .jsonl file or URL (default ${REVIEWS_ENV_VAR}, "
                            "else the fictional set in data/reviews/)")
    group.add_argument("--reviews-hf", metavar="DATASET", help="a Hugging Face dataset id or local dataset folder instead")
    group.add_argument("--reviews-split", metavar="SPLIT", help="split of --reviews-hf (default train)")
    group.add_argument("--reviews-hf-config", metavar="NAME",
                       help="configuration (subset) name of --reviews-hf (default: the dataset's only or default one)")
    group.add_argument("--reviews-columns", nargs="+", type=_assignment, metavar="FIELD=COLUMN",
                       help=f"your column for a field ({', '.join(FIELDS)}) when it is neither the Booking.com "
                            "name nor the field's name")
    group.add_argument("--reviews-varieties", nargs="+", type=_assignment, metavar="REGION=VARIETY",
                       help="region code → tw or cn (default tw=tw cn=cn)")
    group.add_argument("--reviews-seed", type=int, help="seed of the pairing and of the shuffled format (default 0)")
    group.add_argument("--max-pairs", type=int, help="ask models about the first N pairs only (a random sample)")
    group.add_argument("--no-translation-control", action="store_true",
                       help="skip the OpenCC-converted reviews (Table 3)")


def _config(options: Mapping[str, Any]) -> dict:
    def present(values: dict) -> dict:
        return {key: value for key, value in values.items() if value is not None}

    seed = options.get("reviews_seed")
    return {
        "raw_reviews": present({"location": options.get("reviews"), "hf_dataset": options.get("reviews_hf"),
                                "hf_split": options.get("reviews_split"),
                                "hf_config": options.get("reviews_hf_config"),
                                "columns": dict(options["reviews_columns"]) if options.get("reviews_columns") else None}),
        "review_varieties": present({"varieties": dict(options["reviews_varieties"])
                                     if options.get("reviews_varieties") else None}),
        "review_pairs": present({"seed": seed}),
        "review_prompts": present({"seed": seed}),
        "review_predictions": present({"max_pairs": options.get("max_pairs"),
                                       "translation_control": False if options.get("no_translation_control") else None}),
    }


def answers_new_prompts(entry: Any) -> bool:
    """Replay backends (they bypass the response cache) hold published answers to other benchmarks' prompts."""
    try:
        return backend_class(entry.backend).uses_cache
    except (ImportError, ValueError):
        return True  # the asset then fails with the registry's own message


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
        overall = metrics[metrics["model"].isin(models) & (metrics["analysis"] == "length") & (metrics["subset"] == "all")]
        rows = [{"model": row["model"], "format": row["format"], "pairs": int(row["n_pairs"]),
                 "excluded": int(row["n_excluded"]),
                 "acc % tw / cn": _cell(row, "acc", 2), "Δacc": f"{row['delta_acc']:+.2f} {row['sig_acc']}",
                 "MSE tw / cn": _cell(row, "mse", 3), "ΔMSE": f"{row['delta_mse']:+.3f} {row['sig_mse']}"}
                for _, row in overall.iterrows() if row["n_pairs"] > 0]
        lines.append("Score prediction on pairs with two valid answers (Δ = cn − tw; McNemar for accuracy, paired "
                     "t-test for squared error)\n" + tabulate(rows, headers="keys", tablefmt="github"))
    return "\n".join(lines)


REVIEWS_PLAN = BenchmarkPlan(
    name="reviews",
    langs=FORMATS,
    dimension="format",
    inputs=("raw_reviews", "review_varieties", "review_pairs", "review_prompts"),
    per_model_lang=("review_predictions",),
    per_model=("review_metrics", "review_paired_cis"),
    cross_model=("review_significance_robustness",),
    config=_config,
    add_arguments=_arguments,
    summary=reviews_summary,
    serves=answers_new_prompts,
    default_models=False,
    jobs={"per_model_lang": "reviews_model_format"},
)
