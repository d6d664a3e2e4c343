"""Taiwan sovereignty bilingual benchmark (Ko & Littl3Lobst3r 2026): sovereignty_prompts → sovereignty_responses →
sovereignty_judgements → sovereignty_flags → sovereignty_results → sovereignty_model_summary /
sovereignty_prompt_pass_rates / sovereignty_pro_export → sovereignty_summary, sovereignty_review_queue."""

from sctc_assets.assets.sovereignty.export import sovereignty_pro_export
from sctc_assets.assets.sovereignty.responses import sovereignty_judgements, sovereignty_responses
from sctc_assets.assets.sovereignty.answer_review import sovereignty_review_queue
from sctc_assets.assets.sovereignty.scoring import sovereignty_flags, sovereignty_results
from sctc_assets.assets.sovereignty.robust import sovereignty_bootstrap_cis, sovereignty_significance_robustness
from sctc_assets.assets.sovereignty.source import sovereignty_prompts
from sctc_assets.assets.sovereignty.summary import (
    sovereignty_model_summary, sovereignty_prompt_pass_rates, sovereignty_summary,
)

SOVEREIGNTY_ASSETS = [
    sovereignty_prompts, sovereignty_responses, sovereignty_judgements, sovereignty_flags, sovereignty_results,
    sovereignty_model_summary, sovereignty_prompt_pass_rates, sovereignty_pro_export, sovereignty_summary,
    sovereignty_review_queue, sovereignty_bootstrap_cis, sovereignty_significance_robustness,
]
