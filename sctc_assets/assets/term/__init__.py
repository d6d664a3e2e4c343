"""SC-TC-Bench Task 1, regional term choice: regional_terms → term_prompts → term_responses → term_judgements →
term_labels → term_choice_rates / term_misalignment_by_term → term_choice_tests, term_variant_correlations,
term_misalignment_summary.

The defs folder loader (`sctc_assets.definitions`) finds each asset and check in the module that defines it;
the benchmark's spec in `sctc_assets.benchmarks` lists its assets with their stages.
"""
