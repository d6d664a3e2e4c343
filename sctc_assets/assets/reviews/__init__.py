"""Contextually aligned review pairs (Tang et al., NAACL 2025): raw_reviews → review_varieties → review_pairs →
review_prompts → review_predictions (model × format) → review_metrics (per model)."""

from sctc_assets.assets.reviews.predictions import review_metrics, review_predictions
from sctc_assets.assets.reviews.robust import review_paired_cis, review_significance_robustness
from sctc_assets.assets.reviews.source import raw_reviews, review_pairs, review_prompts, review_varieties

REVIEW_ASSETS = [raw_reviews, review_varieties, review_pairs, review_prompts, review_predictions, review_metrics,
                 review_paired_cis, review_significance_robustness]
