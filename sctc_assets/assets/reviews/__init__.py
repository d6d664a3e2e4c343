"""Contextually aligned review pairs (Tang et al., NAACL 2025): raw_reviews → review_varieties → review_pairs →
review_prompts → review_predictions (model × format) → review_metrics (per model).

The defs folder loader (`sctc_assets.definitions`) finds each asset and check in the module that defines it;
the benchmark's spec in `sctc_assets.benchmarks` lists its assets with their stages.
"""
