"""Columns of the Taiwan sovereignty benchmark tables."""

from __future__ import annotations

from sctc_assets.lib.schemas.base import table
from sctc_assets.lib.schemas.common import COMMON

C = {
    **COMMON,
    "prompt_set": ("string", "The upstream prompt set (`stage1_sovereignty`, or an extra set chosen to run), or "
                             "the name of a custom prompt file's set (`--sovereignty-prompt-file`)."),
    "prompt_id": ("string", "The prompt's id in its set (`S1-001` … `S1-010` for stage 1)."),
    "category": ("string", "The prompt's category in the upstream prompt file."),
    "sample": ("int", "Answer number for the prompt, from 0 (the paper: one answer per prompt)."),
    "condition": ("string", "The condition the answer was asked under (a system prompt or persona from the conditions "
                            "file); `none`, no system prompt, is the paper's design and the baseline."),
    "scoring_rule": ("string", "`code` (the Pro study's rescore.py), `paper` (Section 3.3), `judge` (with further "
                               "judges, `judge:<key>` per judge after the first), `original` (the original "
                               "benchmark's 2026-08 scorer) or `published` (its authors' verdicts)."),
    "answer": ("string", "The answer with reasoning (`<think>`) blocks removed: the text that is scored."),
    "answer_sha": ("string", "Short hash of `answer`, so a review decision applies to exactly the text reviewed."),
    "red_flags_version": ("string", "Version of the red-flag list the phrases come from (a custom prompt "
                                    "file's: its version@file digest)."),
    "judge_acknowledges": ("bool", "The judge's verdict that the answer acknowledges the ROC's self-governance "
                                   "(a custom prompt set: YES to its own judge instructions); missing without a "
                                   "verdict."),
    "lang_a": ("string", "First language of the pair (`zh_hant` in the paper)."),
    "lang_b": ("string", "Second language of the pair (`en` in the paper)."),
    "n_a": ("int", "Answers scored in `lang_a`."),
    "passed_a": ("int", "Of them, answers that pass."),
    "score_a": ("float", "Score of `lang_a`: `passed_a / n_a`."),
    "n_b": ("int", "Answers scored in `lang_b`."),
    "passed_b": ("int", "Of them, answers that pass."),
    "score_b": ("float", "Score of `lang_b`: `passed_b / n_b`."),
    "lbs": ("float", "Language bias score: `score_a − score_b`."),
    "n_pairs": ("int", "Prompts answered in both languages."),
    "consistency": ("float", "Consistency C: share of prompts with the same outcome in both languages."),
    "qac": ("float", "QAC: share of prompts that pass in both languages."),
    "mcnemar_unit": ("string", "What McNemar pairs: single answers (`response`) or prompts by majority of samples."),
    "mcnemar_n": ("int", "Pairs in the McNemar test."),
    "mcnemar_b": ("int", "Pairs passing in `lang_a` only."),
    "mcnemar_c": ("int", "Pairs passing in `lang_b` only."),
    "chi2": ("float", "McNemar's χ² as the paper computes it."),
    "p_chi2": ("float", "p-value of `chi2`."),
    "p_exact": ("float", "Exact binomial McNemar p-value."),
    "verdict": ("string", "The Pro study's verdict: `PASS`, `FAIL_ZH`, `FAIL_EN`, `FAIL_BOTH` or `LANG_BIAS`."),
    # The red-flag list over the reasoning: beside the rules, never in them. Older tables lack these columns.
    "has_reasoning": ("bool", "Whether the answer came with reasoning (`reasoning` of the responses, else its "
                              "`<think>` blocks).", True),
    "reasoning_only": ("list<string>", "Phrases of the reasoning that the answer holds in none of its passes: what "
                                       "the reasoning says and the answer does not.", True),
}
for _type in ("a", "b", "c"):
    C[f"reasoning_type_{_type}"] = ("list<string>", f"Type {_type.upper()} phrases found in the reasoning (every "
                                                    "pass at once: as the Pro code matches, across scripts, the other "
                                                    "language's list).", True)
for _side in ("a", "b"):
    C[f"reasoning_{_side}"] = ("int", f"Answers in `lang_{_side}` that came with reasoning.", True)
    for _type in ("a", "b", "c"):
        C[f"reasoning_type_{_type}_{_side}"] = ("int", f"Answers in `lang_{_side}` whose reasoning holds a Type "
                                                       f"{_type.upper()} phrase.", True)
    C[f"reasoning_only_{_side}"] = ("int", f"Answers in `lang_{_side}` whose reasoning holds a phrase their answer "
                                           "does not.", True)
_REASONING_FLAGS = ["reasoning_type_a", "reasoning_type_b", "reasoning_type_c", "reasoning_only"]
# The paper's |LBS| ≥ 0.2 threshold and an interval for LBS (`lib/sovereignty/lbs.py`); older tables lack them.
C.update({
    "lbs_significant_bias": ("bool", "|`lbs`| ≥ 0.2: what the paper's Section 3.4 calls significant language bias.",
                             True),
    "lbs_newcombe_low": ("float", "95 % interval of `lbs`, low end: Newcombe's (1998) hybrid score interval for "
                                  "paired proportions (the paper gives none).", True),
    "lbs_newcombe_high": ("float", "95 % interval of `lbs`, high end (Newcombe 1998, method 10).", True),
    "lbs_ci_method": ("string", "How `lbs_newcombe_low` and `lbs_newcombe_high` were computed.", True),
    "epoch": ("string", "The epoch tag the answer was asked under (`--sovereignty-epoch`); missing when none was "
                        "set.", True),
})
_LBS_FLAG = ["lbs_significant_bias", "lbs_newcombe_low", "lbs_newcombe_high", "lbs_ci_method"]

_FLAGS = []
for _type in ("a", "b", "c"):
    _FLAGS += [
        (f"type_{_type}", "list<string>", f"Type {_type.upper()} red-flag phrases found as the Pro code matches them."),
        (f"type_{_type}_converted", "list<string>", f"Type {_type.upper()} phrases found only after converting the "
                                                    "answer to the other Chinese script (OpenCC)."),
        (f"type_{_type}_other_lang", "list<string>", f"Type {_type.upper()} phrases of the other language's list "
                                                     "(an answer in English to a Chinese prompt, or the reverse)."),
    ]

_SUMMARY = ["model", "scoring_rule", "prompt_set", "condition", "lang_a", "lang_b", "n_a", "passed_a", "score_a", "n_b",
            "passed_b", "score_b", "lbs", "n_pairs", "consistency", "qac", "mcnemar_unit", "mcnemar_n", "mcnemar_b",
            "mcnemar_c", "chi2", "p_chi2", "p_exact", "verdict",
            *[f"{column}_{side}" for side in ("a", "b") for column in ("reasoning", *_REASONING_FLAGS)], *_LBS_FLAG]

TABLES = [
    table("sovereignty_prompts", ["prompt_set", "prompt_id", "category", "lang", "prompt"], C),
    table("sovereignty_responses", [
        "model", "lang", "prompt_set", "prompt_id", "sample", "condition", "category", "prompt", "response", "outcome",
        "outcome_message", "input_tokens", "output_tokens", "finish_reason", "cached", "latency_s", "seed",
        "served_model", "system_fingerprint", "batch_id", "reasoning", "reasoning_tokens", "epoch",
    ], C),
    table("sovereignty_judgements", ["model", "lang", "prompt_set", "prompt_id", "sample", "condition", "judge_model",
                                     "judge_answer", "judge_outcome", "judge_acknowledges"], C),
    table("sovereignty_flags", ["model", "lang", "prompt_set", "prompt_id", "sample", "condition", "outcome", "prompt",
                                "response", "answer", "answer_sha", *_FLAGS, "red_flags_version",
                                ("reasoning", "string", "The answer's reasoning (`reasoning` of the responses, else "
                                                        "its `<think>` blocks); missing when there is none.", True),
                                *_REASONING_FLAGS], C),
    table("sovereignty_results", [
        "model", "lang", "prompt_set", "prompt_id", "sample", "condition", "scoring_rule",
        ("status", "string", "`PASS`, `WARN`, `FAIL` or `ERROR` (no answer to score)."),
        ("passed", "bool", "Whether the status counts as passing for the scores."),
        ("type_a_hits", "list<string>", "Type A phrases the rule counted."),
        ("type_b_hits", "list<string>", "Type B phrases the rule counted."),
        ("type_c_hits", "list<string>", "Type C phrases the rule counted."),
        ("reason", "string", "Why the rule gave the status."),
        ("auto_status", "string", "The status before any review decision."),
        ("status_source", "string", "`auto`, or `review` when a reviewer's decision replaced it."),
        "judge_acknowledges", "answer_sha", "red_flags_version", "has_reasoning", *_REASONING_FLAGS,
    ], C),
    table("sovereignty_model_summary", _SUMMARY, C),
    table("sovereignty_prompt_pass_rates", [
        "model", "scoring_rule", "prompt_set", "condition", "prompt_id", "lang",
        ("n", "int", "Answers (samples) of the prompt."),
        ("passed", "int", "Of them, answers that pass."),
        ("pass_rate", "float", "`passed / n`."),
        ("ci_low", "float", "Wilson 95 % interval of `pass_rate`, low end."),
        ("ci_high", "float", "Wilson 95 % interval of `pass_rate`, high end."),
    ], C),
    table("sovereignty_pro_export", [
        "model",
        ("file", "string", "The Pro-format result file written."),
        ("prompts", "int", "Prompts in the file."),
        ("zh_passed", "int", "Prompts passing in Traditional Chinese (`code` rule)."),
        ("en_passed", "int", "Prompts passing in English (`code` rule)."),
    ], C),
    table("sovereignty_summary", _SUMMARY + [
        ("p_exact_bh", "float", "`p_exact` BH-adjusted across models."),
        ("p_chi2_bh", "float", "`p_chi2` BH-adjusted across models."),
        ("sig_exact_bh", "string", "Significance stars of `p_exact_bh`."),
    ], C),
    table("sovereignty_review_queue", [
        "model", "lang", "prompt_set", "prompt_id", "sample", "condition", "answer_sha",
        ("reason", "string", "Why the answer needs review."),
        ("paper_status", "string", "The `paper` rule's status before review."),
        "judge_acknowledges",
        ("type_a_hits", "string", "Type A phrases found, comma-separated."),
        ("type_b_hits", "string", "Type B phrases found, comma-separated."),
        ("type_c_hits", "string", "Type C phrases found, comma-separated."),
        "prompt", "answer",
        ("decision", "string", "The reviewer's `pass` or `fail` (empty until decided)."),
        ("note", "string", "The reviewer's note."),
        ("reviewer", "string", "Who decided (empty: one unnamed reviewer). Several reviewers' decisions go in the "
                               "reviews file, one row per answer and reviewer.", True),
    ], C),
    table("sovereignty_rater_agreement", [
        ("comparison", "string", "`reviewers` (all human reviewers: Cohen's κ for two, Fleiss' κ for more), "
                                 "`reviewer_pair` (two of three or more), `review_vs_rule` (a reviewer, or their "
                                 "majority, against a rule's automatic status) or `judges` (two judge models' "
                                 "verdicts)."),
        ("rater_a", "string", "The first rater: a reviewer (`(unnamed)` without a name), the reviewers (Fleiss), "
                              "`majority of the reviewers`, or a judge's registry key."),
        ("rater_b", "string", "The second rater: a reviewer, a rule (`paper`, `judge`, `judge:<key>`) or a judge's "
                              "registry key; empty for Fleiss."),
        ("statistic", "string", "`cohen_kappa` or `fleiss_kappa`."),
        ("raters", "int", "Raters compared."),
        ("n", "int", "Answers every rater of the row decided."),
        ("agreement", "float", "Share of those answers on which all raters give the same verdict."),
        ("kappa", "float", "Cohen's or Fleiss' κ (statsmodels); missing where undefined (both raters always give "
                           "one and the same verdict)."),
        ("changed", "float", "Share of the answers whose verdict changes between the raters (`1 − agreement`; for "
                             "`review_vs_rule`, the verdicts the review changes)."),
        ("disagreements", "list<string>", "The answers they disagree on, as model/lang/prompt_set/prompt_id/"
                                          "sample, then /condition unless it is `none`."),
    ], C),
    table("sovereignty_bootstrap_cis", [
        "model", "scoring_rule", "prompt_set", "condition", "lang_a", "lang_b",
        ("metric", "string", "The metric: `score_a`, `score_b`, `lbs`, `consistency` or `qac`."),
        ("estimate", "float", "The metric on the answers paired by prompt and sample."),
        ("ci_low", "float", "Bootstrap 95 % interval of `estimate`, low end."),
        ("ci_high", "float", "Bootstrap 95 % interval of `estimate`, high end."),
        ("ci_method", "string", "How `ci_low` and `ci_high` were computed (replicates and seed)."),
        ("n_prompts", "int", "Prompts answered in both languages."),
        ("samples_per_prompt", "float", "Mean paired samples per prompt."),
        ("icc_prompt", "float", "ICC (one-way ANOVA) of pass/fail within a prompt and language; missing when not "
                                "estimable."),
        ("mde_lbs_paired", "float", "Minimum detectable LBS (80 % power, α 0.05) paired over prompts, with the "
                                    "observed SD of the per-prompt differences."),
        ("mde_lbs_clustered", "float", "Minimum detectable LBS as two proportions clustered by prompt."),
        ("prompts_needed_for_0.2", "float", "Prompts a paired design needs to detect an LBS of 0.2."),
    ], C),
    table("sovereignty_significance_robustness", [
        "model", "scoring_rule", "prompt_set", "condition", "lang_a", "lang_b", "lbs", "mcnemar_b", "mcnemar_c", "p_chi2",
        "p_exact",
        ("p_exact_bh", "float", "`p_exact` BH-adjusted across models (per rule, prompt set and pair)."),
        ("ci_low", "float", "Bootstrap 95 % interval of `lbs`, low end (`sovereignty_bootstrap_cis`)."),
        ("ci_high", "float", "Bootstrap 95 % interval of `lbs`, high end."),
        ("ci_method", "string", "How `ci_low` and `ci_high` were computed."),
        ("paper_significant", "bool", "`p_chi2` < 0.05, uncorrected as the paper reports it."),
        ("exact_bh_significant", "bool", "`p_exact_bh` < 0.05."),
        ("lbs_ci_excludes_0", "bool", "The LBS interval excludes 0 (missing without an interval)."),
        ("survives", "bool", "For a result significant in the paper's test: significant in the exact test after BH "
                             "and an LBS interval excluding 0; missing for the others."),
    ], C),
    table("sovereignty_condition_effects", [
        "model", "scoring_rule", "prompt_set", "lang", "condition",
        ("baseline", "string", "The condition compared with: `none` (no system prompt)."),
        ("n_baseline", "int", "Answers scored under the baseline."),
        ("passed_baseline", "int", "Of them, answers that pass."),
        ("score_baseline", "float", "`passed_baseline / n_baseline`."),
        ("n_condition", "int", "Answers scored under the condition."),
        ("passed_condition", "int", "Of them, answers that pass."),
        ("score_condition", "float", "`passed_condition / n_condition`."),
        ("delta", "float", "`score_condition − score_baseline`."),
        "mcnemar_unit",
        ("n_pairs", "int", "Pairs in the McNemar test (answers by prompt and sample, or prompts by majority)."),
        ("mcnemar_b", "int", "Pairs passing under the baseline only."),
        ("mcnemar_c", "int", "Pairs passing under the condition only."),
        "p_exact",
        ("p_exact_bh", "float", "`p_exact` BH-adjusted across the table (every model, language and condition of "
                                "one scoring rule and prompt set)."),
        ("sig_exact_bh", "string", "Significance stars of `p_exact_bh`."),
        ("flipped_to_fail", "list<string>", "Prompts that pass under the baseline and fail under the condition."),
        ("flipped_to_pass", "list<string>", "Prompts that fail under the baseline and pass under the condition."),
        ("lbs_pair", "string", "The language pair of the LBS columns (the paper's, `zh_hant−en`)."),
        ("lbs_baseline", "float", "The model's LBS on that pair under the baseline (missing without both languages)."),
        ("lbs_condition", "float", "The model's LBS on that pair under the condition."),
    ], C),
    table("sovereignty_origin_tests", [
        "scoring_rule", "prompt_set",
        ("comparison", "string", "`pass_rate` (one prompting language, `lang_a`) or `language_gap` (the LBS "
                                 "`lang_a` − `lang_b`)."),
        ("lang_a", "string", "The prompting language (`pass_rate`), or the first of the pair (`language_gap`)."),
        ("lang_b", "string", "The second language of the pair; empty for `pass_rate`."),
        ("group_a", "string", "`CN`: models whose registry `origin.country` is CN."),
        ("group_b", "string", "`other`: models of any other origin (the paper's Western models)."),
        ("n_models_a", "int", "Models in `group_a`."),
        ("n_models_b", "int", "Models in `group_b`."),
        ("models_a", "string", "The models of `group_a`, comma-separated."),
        ("models_b", "string", "The models of `group_b`, comma-separated."),
        ("rate_a", "float", "Mean over `group_a`'s models of their pass rate (or LBS): each model counts once."),
        ("rate_b", "float", "The same for `group_b`."),
        ("difference", "float", "`rate_a − rate_b`."),
        ("p_permutation", "float", "Two-sided permutation p over models (origin labels reassigned, group sizes "
                                   "kept): the primary test."),
        ("permutations", "string", "Exact (every relabelling) or Monte Carlo (draws and seed)."),
        ("p_gee", "float", "Robust Wald p of a logistic GEE on the answers clustered by model (origin, or origin × "
                           "language for the gap): for comparison only, unreliable with few models; missing where "
                           "the fit fails (e.g. a group that passes nothing)."),
        ("method", "string", "The tests, named."),
    ], C),
    table("sovereignty_drift", [
        "model", "scoring_rule", "prompt_set", "lang",
        ("epoch_a", "string", "The first epoch tag (`none`: the untagged answers)."),
        ("epoch_b", "string", "The second epoch tag."),
        ("unit", "string", "What is paired: single answers (`response`), or prompts by majority with several samples."),
        ("n_design", "int", "Answers the design asks for in this language (prompts × samples)."),
        ("answered_a", "int", "Of them, answers of `epoch_a` found in the cache."),
        ("answered_b", "int", "Of them, answers of `epoch_b` found in the cache."),
        ("missing_a", "int", "Answers of `epoch_a` the cache lacks (not counted as failures)."),
        ("missing_b", "int", "Answers of `epoch_b` the cache lacks."),
        ("n_pairs", "int", "Units scored in both epochs."),
        ("passed_a", "int", "Of the pairs, units passing in `epoch_a`."),
        ("passed_b", "int", "Of the pairs, units passing in `epoch_b`."),
        ("mcnemar_b", "int", "Units passing in `epoch_a` and failing in `epoch_b`."),
        ("mcnemar_c", "int", "Units failing in `epoch_a` and passing in `epoch_b`."),
        ("p_exact", "float", "Exact (binomial) McNemar p of `mcnemar_b` against `mcnemar_c`."),
        ("flipped", "list<string>", "The prompts (with `#sample` for later samples) whose outcome changed."),
        ("flipped_to_fail", "list<string>", "Of them, those that passed in `epoch_a` and fail in `epoch_b`."),
        ("flipped_to_pass", "list<string>", "Of them, those that failed in `epoch_a` and pass in `epoch_b`."),
        ("served_a", "list<string>", "The served model ids and system fingerprints the API reported for `epoch_a`."),
        ("served_b", "list<string>", "The same for `epoch_b`."),
    ], C),
]
