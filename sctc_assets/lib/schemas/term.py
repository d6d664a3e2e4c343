"""Columns of the SC-TC-Bench regional term tables."""

from __future__ import annotations

from sctc_assets.lib.schemas.base import table
from sctc_assets.lib.schemas.common import COMMON

C = {
    **COMMON,
    "term_id": ("int", "The term's index in the SC-TC-Bench term list (0–109)."),
    "prompt_variant": ("int", "Prompt wording, 1–3 (paper Table 1(a))."),
    "trial": ("int", "Trial index of the repeated prompt, from 0 (the paper asks each prompt 15 times)."),
    "row": ("int", "Row of the prompt in the upstream prompt file of its lang and variant (term `row % 110`, "
                   "trial `row // 110`)."),
    "label_source": ("string", "Who labelled the answers: `rules` (ours), `upstream` (the authors' published "
                               "GPT-4o-mini verdicts, replay models) or `judge` (a registered judge model)."),
    "subset": ("string", "`all` terms, or `no_gpt_definitions` (terms whose definition GPT did not write, Figure 5)."),
    "term_mainland": ("string", "The Mainland term as published (`/` separates alternatives)."),
    "term_taiwan": ("string", "The Taiwanese term as published (`/` separates alternatives)."),
    "category": ("string", "The term's topic category in the term list."),
    "n_correct": ("int", "Answers labelled correct."),
    "n_misaligned": ("int", "Answers labelled misaligned (they give the other region's term)."),
    "n_incorrect": ("int", "Answers labelled incorrect."),
}

TABLES = [
    table("regional_terms", [
        "term_id",
        ("position", "int", "Row of the term in the upstream term file."),
        "term_mainland", "term_taiwan",
        ("mainland_alternatives", "list<string>", "The Mainland forms, split at `/` and trimmed."),
        ("taiwan_alternatives", "list<string>", "The Taiwanese forms, split at `/` and trimmed."),
        ("definition_simplified", "string", "The definition in Simplified script (the zh_hans prompts ask about it)."),
        ("definition_traditional", "string", "The definition in Traditional script (the zh_hant prompts)."),
        "category",
        ("definition_source", "string", "Who wrote the definition (`gpt` for GPT-written ones, else the source)."),
    ], C),
    table("term_prompts", [
        "lang", "prompt_variant", "trial", "term_id", "row",
        ("gt", "string", "The expected term in the prompt's script, as published (the upstream `gt` column)."),
        ("other_region_term", "string", "The other region's term, as published."),
        ("expected", "list<string>", "The answers that count as correct: the prompting region's forms."),
        ("other_region", "list<string>", "The other region's forms: an answer containing one is misaligned."),
        "prompt",
    ], C),
    table("term_responses", [
        "model", "lang", "prompt_variant", "term_id", "trial", "row", "prompt", "response", "outcome",
        "outcome_message", "input_tokens", "output_tokens", "finish_reason", "cached", "latency_s", "seed",
        "served_model", "system_fingerprint",
    ], C),
    table("term_judgements", [
        "lang", "prompt_variant", "trial", "term_id", "model", "judge_model", "judge_answer", "judge_outcome",
        ("judge_correct", "bool", "The judge's verdict (1 = correct); missing when it gave none."),
    ], C),
    table("term_labels", [
        "model", "lang", "prompt_variant", "term_id", "trial", "response", "label_source",
        ("label", "string", "`correct`, `misaligned` or `incorrect`."),
        ("misaligned_forms", "string", "The other region's forms found in the answer, comma-separated."),
    ], C),
    table("term_choice_rates", [
        "model", "lang", "prompt_variant", "label_source", "subset",
        ("n", "int", "Labelled answers."),
        ("pct_correct", "float", "Percentage (0–100) of answers labelled correct."),
        ("pct_misaligned", "float", "Percentage (0–100) of answers labelled misaligned."),
        ("pct_incorrect", "float", "Percentage (0–100) of answers labelled incorrect."),
        "n_correct", "n_misaligned", "n_incorrect",
    ], C),
    table("term_misalignment_by_term", [
        "model", "lang", "prompt_variant", "label_source", "term_id", "n_correct", "n_misaligned", "n_incorrect",
        ("n_trials", "int", "Labelled answers of the term (its trials)."),
        ("misaligned_threshold", "int", "Misaligned trials that flag the term: 3 of 15, scaled to `n_trials`."),
        ("misaligned_term", "bool", "Misaligned in at least `misaligned_threshold` trials (the paper's rule)."),
        ("ever_misaligned", "bool", "Misaligned in at least one trial."),
        "term_mainland", "term_taiwan", "category",
        ("counts", "string", "`correct,misaligned,incorrect` counts as the authors' tables print them."),
    ], C),
    table("term_choice_tests", [
        "model", "prompt_variant", "label_source", "subset",
        ("measure", "string", "The share compared: `correct` or `misaligned`."),
        ("n_s", "int", "Answers to the Simplified prompts."),
        ("k_s", "int", "Of them, answers with the measured label."),
        ("pct_s", "float", "Percentage of Simplified answers with the label."),
        ("ci_low_s", "float", "Wilson 95 % interval of `pct_s`, low end (percent)."),
        ("ci_high_s", "float", "Wilson 95 % interval of `pct_s`, high end (percent)."),
        ("n_t", "int", "Answers to the Traditional prompts."),
        ("k_t", "int", "Of them, answers with the measured label."),
        ("pct_t", "float", "Percentage of Traditional answers with the label."),
        ("ci_low_t", "float", "Wilson 95 % interval of `pct_t`, low end (percent)."),
        ("ci_high_t", "float", "Wilson 95 % interval of `pct_t`, high end (percent)."),
        ("diff_pct_points", "float", "`pct_s − pct_t` in percentage points."),
        ("cohens_h", "float", "Cohen's h effect size of the two proportions."),
        ("t_stat", "float", "Welch's t statistic on the 0/1 labels (the paper's test)."),
        ("t_p", "float", "Two-sided p-value of Welch's t-test."),
        ("z_stat", "float", "Two-proportion z statistic."),
        ("z_p", "float", "Two-sided p-value of the z-test."),
        ("t_p_bh", "float", "`t_p` Benjamini–Hochberg adjusted across the materialized models."),
        ("z_p_bh", "float", "`z_p` Benjamini–Hochberg adjusted across the materialized models."),
        ("sig_t_bh", "string", "Significance stars of `t_p_bh` (`NS` when not significant)."),
        ("sig_z_bh", "string", "Significance stars of `z_p_bh`."),
    ], C),
    table("term_variant_correlations", [
        "label_source",
        ("comparison", "string", "What is correlated: `variant_1_vs_<k>` (Appendix B.1) or "
                                 "`all_vs_no_gpt_definitions` (A.8)."),
        ("measure", "string", "The rate correlated: `pct_correct`, `pct_misaligned` or `pct_incorrect`."),
        ("n_points", "int", "Model × lang points in the correlation."),
        ("pearson_r", "float", "Pearson's r of the rates."),
        ("p_value", "float", "Two-sided p-value of r."),
        ("pearson_r_printed", "float", "Pearson's r of the rates rounded to two decimals, as the paper computed it."),
    ], C),
    table("term_misalignment_summary", [
        "lang", "prompt_variant", "label_source",
        ("rule", "string", "`at_least_threshold` (the paper's ≥ 3 of 15 trials) or `at_least_once`."),
        ("n_models", "int", "Models summarised."),
        ("mean_terms", "float", "Mean number of misaligned terms per model."),
        ("sd_population", "float", "Population SD (ddof 0) of the misaligned terms per model."),
        ("sd_sample", "float", "Sample SD (ddof 1); missing with one model."),
        ("min_terms", "float", "Fewest misaligned terms of a model."),
        ("max_terms", "float", "Most misaligned terms of a model."),
        ("per_model", "string", "`model=count` of every model."),
        ("majority_models_needed", "int", "Models that must misalign a term for it to count as commonly misaligned."),
        ("n_majority_terms", "int", "Terms at least that many models misalign (Table 18's candidates); missing for "
                                    "`at_least_once`."),
    ], C),
]
