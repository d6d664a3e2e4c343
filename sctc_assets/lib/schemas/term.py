"""Columns of the SC-TC-Bench regional term tables."""

from __future__ import annotations

from sctc_assets.lib.schemas.base import table
from sctc_assets.lib.schemas.common import COMMON
from sctc_assets.lib.schemas.drift import DRIFT

C = {
    **COMMON,
    "term_id": ("int", "The term's index in the SC-TC-Bench term list (0–109)."),
    "prompt_variant": ("int", "Prompt wording, 1–3 (paper Table 1(a))."),
    "trial": ("int", "Trial index of the repeated prompt, from 0 (the paper asks each prompt 15 times)."),
    "row": ("int", "Row of the prompt in the upstream prompt file of its lang and variant (term `row % 110`, "
                   "trial `row // 110`)."),
    "label_source": ("string", "Who labelled the answers: `rules` (ours), `lexicon` (ours, learned from the "
                               "authors' published verdicts), `upstream` (the authors' published GPT-4o-mini "
                               "verdicts, replay models) or `judge` (a registered judge model)."),
    "subset": ("string", "`all` terms, or `no_gpt_definitions` (terms whose definition GPT did not write, Figure 5)."),
    "term_mainland": ("string", "The Mainland term as published (`/` separates alternatives)."),
    "term_taiwan": ("string", "The Taiwanese term as published (`/` separates alternatives)."),
    "category": ("string", "The term's topic category in the term list."),
    "n_correct": ("int", "Answers labelled correct."),
    "n_misaligned": ("int", "Answers labelled misaligned (they give the other region's term)."),
    "n_incorrect": ("int", "Answers labelled incorrect."),
    "n_refusal": ("int", "Of the incorrect answers, refusals (a content filter or an empty answer)."),
    "paper_model": ("string", "The paper LLM, by its upstream file name (`qwen`, `gpt4o`, `llama3-8b`, …)."),
    "measure": ("string", "The share compared: `correct` or `misaligned`."),
    "diff_pct_points": ("float", "Mean per-term S − T difference of the share, in percentage points."),
    "ci_low": ("float", "95 % paired-t interval of `diff_pct_points` over the terms, low end."),
    "ci_high": ("float", "95 % paired-t interval of `diff_pct_points` over the terms, high end."),
    "ci_method": ("string", "How `ci_low` and `ci_high` were computed."),
    "design_effect": ("float", "Kish's design effect 1 + (m − 1)·ICC of m trials per term."),
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
        "served_model", "system_fingerprint", "batch_id", "reasoning", "reasoning_tokens",
    ], C),
    table("term_judgements", [
        "lang", "prompt_variant", "trial", "term_id", "model", "judge_model", "judge_answer", "judge_outcome",
        ("judge_correct", "bool", "The judge's verdict (1 = correct); missing when it gave none."),
    ], C),
    table("term_labels", [
        "model", "lang", "prompt_variant", "term_id", "trial", "response", "label_source",
        ("label", "string", "`correct`, `misaligned` or `incorrect`."),
        ("misaligned_forms", "string", "The other region's forms found in the answer, comma-separated."),
        ("outcome", "string", "The answer's outcome: `ok` or `refusal` (a refusal is `incorrect`; errors are left "
                              "out).", True),
    ], C),
    table("term_choice_rates", [
        "model", "lang", "prompt_variant", "label_source", "subset",
        ("n", "int", "Labelled answers."),
        ("pct_correct", "float", "Percentage (0–100) of answers labelled correct."),
        ("pct_misaligned", "float", "Percentage (0–100) of answers labelled misaligned."),
        ("pct_incorrect", "float", "Percentage (0–100) of answers labelled incorrect."),
        "n_correct", "n_misaligned", "n_incorrect", "n_refusal",
    ], C),
    table("term_misalignment_by_term", [
        "model", "lang", "prompt_variant", "label_source", "term_id", "n_correct", "n_misaligned", "n_incorrect",
        "n_refusal",
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
    table("term_published_labels", [
        ("model", *C["paper_model"]),
        "lang", "prompt_variant", "term_id", "trial", "row",
        ("response", "string", "The published answer text; missing where the upstream file has none."),
        ("expected", "list<string>", "The answers that count as correct: the prompting region's forms."),
        ("other_region_term", "string", "The other region's term, as published."),
        ("upstream_label", "string", "The authors' label (their GPT-4o-mini verdict and their misalignment rule, "
                                     "the `upstream` source): `correct`, `misaligned` or `incorrect`."),
        ("rules_label", "string", "The `rules` source's label of the answer."),
    ], C),
    table("term_verdict_lexicon", [
        "lang", "term_id",
        ("answer_key", "string", "The answer extracted from the text, folded to Simplified (empty when none is "
                                 "found)."),
        ("model", *C["paper_model"]),
        ("n", "int", "The model's published answers with this key."),
        ("share_correct", "float", "Share (0–1) of them the authors labelled correct."),
        ("share_incorrect", "float", "Share (0–1) of them the authors labelled incorrect."),
        ("share_misaligned", "float", "Share (0–1) of them the authors labelled misaligned."),
    ], C),
    table("term_misalignment_by_category", [
        "model", "lang", "prompt_variant", "label_source", "category",
        ("n_terms", "int", "Terms of the category answered."),
        ("n_misaligned_terms", "int", "Of them, misaligned terms (the paper's rule: ≥ 3 of 15 trials, scaled)."),
        ("pct_misaligned_terms", "float", "Their percentage (0–100) of `n_terms`."),
        ("n_answers", "int", "Labelled answers to the category's terms (all trials)."),
        ("n_misaligned_answers", "int", "Of them, answers labelled misaligned."),
        ("pct_misaligned_answers", "float", "Their percentage (0–100) of `n_answers`."),
        ("odds_ratio_vs_rest", "float", "Odds ratio of a misaligned term, this category against the others (inf "
                                        "where no other term is misaligned)."),
        ("fisher_p_vs_rest", "float", "Two-sided p-value of Fisher's exact test of that 2 × 2 table."),
        ("fisher_p_vs_rest_bh", "float", "`fisher_p_vs_rest` BH-adjusted over the categories of the group."),
        ("chi2", "float", "Pearson chi-square of categories × (misaligned, not) terms, the group's (same on each "
                          "of its rows); missing when no term or every term is misaligned."),
        ("chi2_df", "int", "Its degrees of freedom (categories − 1)."),
        ("chi2_p", "float", "Its asymptotic p-value (unreliable where `min_expected` < 5)."),
        ("chi2_permutation_p", "float", "Monte Carlo permutation p-value of `chi2` with both margins fixed: the "
                                        "p-value to decide on."),
        ("min_expected", "float", "The smallest expected count of the table."),
        ("permutations", "int", "Shuffles behind `chi2_permutation_p` (0: not tested)."),
    ], C),
    table("term_incorrect_type_judgements", [
        "lang", "prompt_variant", "trial", "term_id", "model",
        ("judge_model", "string", "Registry key of the judge model asked."),
        ("label_source", "string", "The label source whose `incorrect` answers were classified: `judge` where the "
                                   "partition has judge labels, else `rules`."),
        ("response", "string", "The model's answer, as stored."),
        ("gt", "string", "The expected term in the prompt's script, as published (the question's ground truth)."),
        ("judge_answer", "string", "The judge's answer to Appendix B.4's question (1: a different concept, 2: the "
                                   "same concept, less commonly used), as given."),
        ("judge_outcome", "string", "The judge call's outcome (`ok`, `refusal` or `error`)."),
    ], C),
    table("term_incorrect_types", [
        ("model", "string", "The paper LLM by its upstream file name (`qwen`, `gpt4o`, `llama3-8b`, …), or the "
                            "registry key of a judged model."),
        ("lang", "string", "Prompting script of the annotated answers: `zh_hans` or `zh_hant`."),
        ("judge", "string", "Who classified the answers: the authors' published GPT-4o-mini annotation for the 11 "
                            "paper LLMs, else the registry key of the judge model (`--judge`)."),
        ("label_source", "string", "Whose `incorrect` labels chose the answers: `upstream` (the authors'), `judge` "
                                   "or `rules`."),
        ("n_annotated", "int", "Incorrect first-trial answers to prompt variant 1 that were classified."),
        ("source_file", "string", "The upstream annotation file read; missing for a judged model."),
        ("n_entirely_wrong", "int", "Answers labelled 1: entirely wrong (a different concept)."),
        ("pct_entirely_wrong", "float", "Their percentage (0–100) of `n_annotated` (Table 19)."),
        ("n_uncommon_usage", "int", "Answers labelled 2: the same concept in an uncommon form."),
        ("pct_uncommon_usage", "float", "Their percentage (0–100) of `n_annotated` (Table 19)."),
        ("n_other_label", "int", "Answers with any other label (published), or whose judge call failed or answered "
                                 "no single type (judged: counted as invalid, never guessed)."),
    ], C),
    table("term_label_source_agreement", [
        ("label_source", "string", "The source compared with the authors' labels: `rules`, `lexicon`, `lexicon_v1` "
                                   "(the lexicon's first version, for comparison) or `judge`."),
        ("evaluation", "string", "`fixed_rules` (nothing learned), `leave_one_model_out` (a lexicon without the "
                                 "labelled model's own labels) or `in_sample` (a lexicon with every model's)."),
        ("model", "string", "The paper LLM by its upstream file name; `mean` and `worst` for the summary rows."),
        ("lang", "string", "`zh_hans` or `zh_hant`; `all` in a `mean` row, `<model>/<lang>` of the worst group in a "
                           "`worst` row."),
        ("n", "int", "Answers compared."),
        ("n_agree", "int", "Of them, answers whose label equals the authors' label."),
        ("agreement", "float", "`n_agree / n` (0–1); in a `mean` row the mean over the groups."),
    ], C),
    table("term_robust_tests", [
        "model", "prompt_variant", "label_source", "measure",
        ("n_terms", "int", "Terms answered in both scripts (the paired units)."),
        ("trials_per_term", "float", "Mean labelled trials per term."),
        ("pct_s", "float", "Percentage of Simplified answers with the label."),
        ("pct_t", "float", "Percentage of Traditional answers with the label."),
        "diff_pct_points", "ci_low", "ci_high", "ci_method",
        ("sd_term_diff", "float", "SD (ddof 1) of the per-term S − T differences, in percentage points."),
        ("paper_t_p", "float", "p-value of the paper's trial-level Welch t-test."),
        ("paired_t", "float", "Paired t statistic over the per-term rates."),
        ("paired_t_p", "float", "Two-sided p-value of `paired_t`."),
        ("wilcoxon", "float", "Wilcoxon signed-rank statistic over the per-term rates (zero differences dropped)."),
        ("wilcoxon_p", "float", "Two-sided p-value of `wilcoxon`."),
        ("gee_log_or", "float", "Log odds ratio S vs T of the trial-level logistic GEE clustered by term "
                                "(exchangeable); ±inf when the scripts separate perfectly."),
        ("gee_se", "float", "Robust standard error of `gee_log_or`."),
        ("gee_p", "float", "Two-sided p-value of the GEE effect."),
        ("gee_within_corr", "float", "The GEE's estimated exchangeable within-term correlation."),
        ("icc_s", "float", "ICC (one-way ANOVA) of the Simplified trials within terms; missing when not estimable."),
        ("icc_t", "float", "ICC of the Traditional trials within terms."),
        "design_effect",
        ("paper_t_p_bh", "float", "`paper_t_p` BH-adjusted across the models of its (variant, source, measure) "
                                  "family."),
        ("paired_t_p_bh", "float", "`paired_t_p` BH-adjusted the same way."),
        ("wilcoxon_p_bh", "float", "`wilcoxon_p` BH-adjusted the same way."),
        ("gee_p_bh", "float", "`gee_p` BH-adjusted the same way."),
    ], C),
    table("term_significance_robustness", [
        "model", "prompt_variant", "label_source", "measure", "diff_pct_points", "ci_low", "ci_high", "ci_method",
        ("paper_significant", "bool", "`paper_t_p_bh` < 0.05 (missing without a p-value)."),
        ("paired_t_significant", "bool", "`paired_t_p_bh` < 0.05."),
        ("wilcoxon_significant", "bool", "`wilcoxon_p_bh` < 0.05."),
        ("gee_significant", "bool", "`gee_p_bh` < 0.05 (missing without a GEE p-value)."),
        ("survives", "bool", "For a result significant in the paper's test: significant in every term-level test; "
                             "missing for the others."),
        ("verdict", "string", "The result in words: not significant in the paper's test, survives every "
                              "term-level test, or which ones it does not survive."),
    ], C),
    table("term_power", [
        "model", "prompt_variant", "label_source", "measure",
        ("n_units", "int", "Terms of the design run (the paired units)."),
        ("unit", "string", "The unit of the design: `term`."),
        ("trials_per_unit", "float", "Mean trials per term."),
        ("repeated_unit", "string", "What repeats within a term: `trial`."),
        ("icc", "float", "Observed ICC of the trials within terms (mean of the two scripts')."),
        "design_effect",
        ("effective_n_per_group", "float", "Trials per script divided by the design effect."),
        ("mde_paired", "float", "Minimum detectable S − T (percentage points; 80 % power, α 0.05) paired over "
                                "terms, with the observed SD of the per-term differences."),
        ("mde_clustered", "float", "Minimum detectable S − T (percentage points) as two clustered proportions."),
        ("target_effect", "float", "The configured effect `effect_pct_points` (percentage points)."),
        ("terms_needed_paired", "float", "Terms a paired design needs to detect `target_effect`."),
        ("terms_needed_clustered", "float", "Terms per script a clustered design needs for `target_effect`, with "
                                            "the trials per term fixed."),
        ("trials_needed_per_term", "float", "Trials per term needed for `target_effect` with the terms fixed; inf "
                                            "when no number of trials reaches it."),
        ("design", "string", "The two power designs, in words."),
    ], C),
    table("term_drift", [
        "model", "lang", "prompt_variant",
        ("label_source", "string", "The labels compared: `rules` (the one source that needs neither published "
                                   "labels nor a judge)."),
        "measure", "epoch_a", "epoch_b", "n_design", "missing_a", "missing_b",
        ("n_a", "int", "Labelled answers of `epoch_a` (the rate's denominator, as in `term_choice_rates`)."),
        ("n_b", "int", "Labelled answers of `epoch_b`."),
        ("pct_a", "float", "Percentage (0–100) of `epoch_a`'s answers with the measured label, as "
                           "`term_choice_rates` computes it (all terms)."),
        ("pct_b", "float", "The same for `epoch_b`."),
        ("diff_pct_points", "float", "`pct_b − pct_a` in percentage points: the change from A to B."),
        "n_pairs", "mcnemar_b", "mcnemar_c", "p_exact",
        ("flipped_from", "list<string>", "The answers (`<term_id>#<trial>`) with the label in `epoch_a` and "
                                         "without it in `epoch_b`."),
        ("flipped_to", "list<string>", "The answers without the label in `epoch_a` and with it in `epoch_b`."),
        "served_a", "served_b",
    ], {**C, **DRIFT}),
]
