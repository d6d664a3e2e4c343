"""SC-TC-Bench Task 2, regional name choice: regional_names → name_candidate_lists → name_prompts →
name_responses → name_judgements → name_selections → name_choice_rates / name_extraction_agreement /
name_top_selected / name_gender_tables / name_permutation_stability → name_choice_tests,
name_popularity_correlation; the last-name experiment regional_names → last_name_pairs → last_name_logprobs →
last_name_agreement, last_name_region_tests; and tokenization_counts.

The defs folder loader (`sctc_assets.definitions`) finds each asset and check in the module that defines it;
the benchmark's spec in `sctc_assets.benchmarks` lists its assets with their stages.
"""
