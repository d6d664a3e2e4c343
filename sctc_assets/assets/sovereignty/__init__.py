"""Taiwan sovereignty bilingual benchmark (Ko & Littl3Lobst3r 2026): sovereignty_prompts → sovereignty_responses →
sovereignty_judgements → sovereignty_flags → sovereignty_results → sovereignty_model_summary /
sovereignty_prompt_pass_rates / sovereignty_pro_export → sovereignty_summary, sovereignty_review_queue,
sovereignty_condition_effects, sovereignty_rater_agreement.

The defs folder loader (`sctc_assets.definitions`) finds each asset and check in the module that defines it;
the benchmark's spec in `sctc_assets.benchmarks` lists its assets with their stages.
"""
