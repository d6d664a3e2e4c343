"""Contextually aligned review pairs (Tang et al., NAACL 2025): raw_reviews → review_varieties → review_pairs →
review_prompts → review_predictions (model × format) → review_metrics (per model)."""

import dagster as dg

from sctc_assets.assets.reviews.predictions import review_metrics, review_predictions
from sctc_assets.assets.reviews.robust import review_paired_cis, review_significance_robustness
from sctc_assets.assets.reviews.source import (
    raw_reviews,
    review_pairs,
    review_pairs_aligned,
    review_prompts,
    review_varieties,
)

REVIEW_ASSETS = [raw_reviews, review_varieties, review_pairs, review_prompts, review_predictions, review_metrics,
                 review_paired_cis, review_significance_robustness]

review_inputs_job = dg.define_asset_job(
    "reviews_inputs", selection=dg.AssetSelection.assets(raw_reviews, review_varieties, review_pairs, review_prompts),
    description="Load, classify and pair the reviews and write the prompts (no model).")
review_model_format_job = dg.define_asset_job(
    "reviews_model_format", selection=dg.AssetSelection.assets(review_predictions),
    description="Predict the scores of one or more model × format partitions.")
review_per_model_job = dg.define_asset_job(
    "reviews_per_model", selection=dg.AssetSelection.assets(review_metrics, review_paired_cis),
    description="Per-model metric tables.")


def defs() -> dg.Definitions:
    return dg.Definitions(assets=REVIEW_ASSETS, asset_checks=[review_pairs_aligned],
                          jobs=[review_inputs_job, review_model_format_job, review_per_model_job])
