"""SC-TC-Bench Task 2, regional name choice: regional_names → name_candidate_lists → name_prompts →
name_responses → name_judgements → name_selections → name_choice_rates / name_extraction_agreement /
name_top_selected / name_gender_tables / name_permutation_stability → name_choice_tests,
name_popularity_correlation; the last-name experiment regional_names → last_name_pairs → last_name_logprobs →
last_name_agreement, last_name_region_tests; and tokenization_counts."""

from __future__ import annotations

from sctc_assets.assets.name.last_names import (
    LAST_NAME_CHECKS,
    last_name_agreement,
    last_name_logprobs,
    last_name_pairs,
    last_name_region_tests,
)
from sctc_assets.assets.name.metrics import (
    name_choice_rates,
    name_choice_tests,
    name_extraction_agreement,
    name_gender_tables,
    name_permutation_stability,
    name_popularity_correlation,
    name_top_selected,
)
from sctc_assets.assets.name.responses import name_judgements, name_responses
from sctc_assets.assets.name.selections import name_selections
from sctc_assets.assets.name.source import name_candidate_lists, name_prompts, name_prompts_match_upstream, regional_names
from sctc_assets.assets.name.tokenization import tokenization_counts
from sctc_assets.assets.name.appendix import (
    name_explanation_words, name_invalid_class_validation, name_talent_examples,
)
from sctc_assets.assets.name.robust import name_list_clustered_rates, name_significance_robustness

NAME_ASSETS = [
    regional_names, name_candidate_lists, name_prompts, last_name_pairs, tokenization_counts, name_explanation_words,
    name_talent_examples, name_invalid_class_validation, name_responses, name_judgements, name_selections,
    name_choice_rates, name_extraction_agreement, name_top_selected, name_gender_tables, name_permutation_stability,
    last_name_logprobs, name_list_clustered_rates, name_choice_tests, name_popularity_correlation,
    last_name_agreement, last_name_region_tests, name_significance_robustness,
]
NAME_CHECKS = [name_prompts_match_upstream, *LAST_NAME_CHECKS]
