"""SC-TC-Bench Task 1, regional term choice: regional_terms → term_prompts → term_responses → term_judgements →
term_labels → term_choice_rates / term_misalignment_by_term → term_choice_tests, term_variant_correlations,
term_misalignment_summary."""

from __future__ import annotations

from sctc_assets.assets.term.label_sources import (
    term_label_source_agreement,
    term_published_labels,
    term_verdict_lexicon,
)
from sctc_assets.assets.term.labels import term_labels
from sctc_assets.assets.term.metrics import (
    term_choice_rates,
    term_choice_tests,
    term_misalignment_by_term,
    term_misalignment_summary,
    term_variant_correlations,
)
from sctc_assets.assets.term.incorrect_types import term_incorrect_types
from sctc_assets.assets.term.robust import term_power, term_robust_tests, term_significance_robustness
from sctc_assets.assets.term.responses import term_judgements, term_responses
from sctc_assets.assets.term.source import regional_terms, term_prompts, term_prompts_match_upstream

TERM_ASSETS = [
    regional_terms, term_prompts, term_responses, term_judgements, term_labels,
    term_choice_rates, term_misalignment_by_term, term_choice_tests, term_variant_correlations,
    term_misalignment_summary, term_published_labels, term_verdict_lexicon, term_label_source_agreement,
    term_robust_tests, term_significance_robustness, term_power, term_incorrect_types,
]
TERM_CHECKS = [term_prompts_match_upstream]
