"""Columns of the contextually aligned review tables."""

from __future__ import annotations

from sctc_assets.lib.schemas.base import table
from sctc_assets.lib.schemas.common import COMMON

C = {
    **COMMON,
    "review_id": ("string", "The export's review id (else the row number from 0)."),
    "hotel_id": ("string", "The hotel the review is about."),
    "nationality": ("string", "The reviewer's region code as the export gives it."),
    "score": ("int", "The reviewer's score, whole, 1–10."),
    "title": ("string", "The review's title."),
    "positive": ("string", "The review's positive text."),
    "negative": ("string", "The review's negative text."),
    "review_time": ("string", "When the review was written, as the export gives it."),
    "variety": ("string", "The reviewer's variety: `tw` (Taiwan Mandarin) or `cn` (Mainland Mandarin)."),
    "rating_class": ("string", "`negative` (1–3), `neutral` (4–7) or `positive` (8–10)."),
    "length_bin": ("int", "10-token length bin of the review (tokens: one per Han character, emoji or mark, one per "
                          "English word or number)."),
    "pair_id": ("int", "The pair's number, in a seeded random order."),
    "version": ("string", "`original` (as written) or `converted` (OpenCC into the other variety: the stand-in for "
                          "the paper's translation control)."),
    "text_variety": ("string", "The variety the prompt's text is written in."),
    "format": ("string", "Prompt format: `structured`, `plain` or `shuffled` (Appendix C)."),
    "subset": ("string", "The analysis' subset (`short`, `long`, `all`, a character set …)."),
}

_PAIRED = [
    "model", "format",
    ("measure", "string", "`delta_acc` (accuracy, percentage points) or `delta_mse` (squared error), cn − tw."),
    ("n_pairs", "int", "Pairs whose two predictions (original texts) are valid."),
    ("estimate", "float", "The mean paired difference cn − tw."),
    ("ci_low", "float", "Paired-t 95 % interval of `estimate`, low end."),
    ("ci_high", "float", "Paired-t 95 % interval of `estimate`, high end."),
    ("ci_method", "string", "How `ci_low` and `ci_high` were computed."),
    ("bootstrap_ci_low", "float", "Percentile bootstrap 95 % interval over pairs, low end."),
    ("bootstrap_ci_high", "float", "Percentile bootstrap 95 % interval over pairs, high end."),
    ("bootstrap_method", "string", "The bootstrap's replicates and seed."),
    ("paper_test", "string", "The paper-style test: `McNemar exact` (accuracy) or `paired t` (squared error)."),
    ("paper_p", "float", "p-value of `paper_test`."),
    ("wilcoxon_p", "float", "p-value of the Wilcoxon signed-rank test of the paired differences."),
    ("mde_paired", "float", "Minimum detectable mean difference (80 % power, α 0.05) over these pairs."),
    ("pairs_needed", "float", "Pairs needed to detect a 5-point ΔAcc (missing for `delta_mse`)."),
]

TABLES = [
    table("raw_reviews", ["review_id", "hotel_id", "nationality", "score", "title", "positive", "negative",
                          "review_time"], C),
    table("review_varieties", [
        "review_id", "hotel_id", "nationality", "variety", "score", "rating_class", "title", "positive", "negative",
        "review_time",
        ("characters", "int", "Visible characters of title, positive and negative text."),
        ("tokens", "int", "Tokens of the review (the pairing's length measure)."),
        "length_bin",
        ("script_composition", "string", "Which scripts the review uses (Table 8): `Only Traditional`, …"),
    ], C),
    table("review_pairs", [
        "pair_id", "hotel_id", "rating_class", "length_bin",
        ("review_id_tw", "string", "The Taiwan review of the pair."),
        ("review_id_cn", "string", "The Mainland review of the pair."),
        ("score_tw", "int", "Score of the Taiwan review."),
        ("score_cn", "int", "Score of the Mainland review."),
        ("tokens_tw", "int", "Tokens of the Taiwan review."),
        ("tokens_cn", "int", "Tokens of the Mainland review."),
        ("characters_tw", "int", "Visible characters of the Taiwan review."),
        ("characters_cn", "int", "Visible characters of the Mainland review."),
        ("length_group", "string", "`short` (the two reviews average 1–49 characters) or `long`."),
    ], C),
    table("review_prompts", [
        "pair_id", "review_id", "variety", "version", "text_variety", "format",
        ("part_order", "string", "Order of the review's parts in the prompt (shuffled in the `shuffled` format)."),
        ("system", "string", "The system prompt (Appendix C)."),
        "prompt",
    ], C),
    table("review_predictions", [
        "model", "format", "pair_id", "review_id", "variety", "version", "text_variety", "response", "outcome",
        "outcome_message",
        ("prediction", "int", "The predicted score, 1–10, when the answer is that number alone."),
        ("status", "string", "`valid`, `invalid` (not a score alone) or `error` (the call failed)."),
        "input_tokens", "output_tokens", "cached", "latency_s", "seed", "served_model", "system_fingerprint",
    ], C),
    table("review_metrics", [
        "model", "format",
        ("analysis", "string", "`length` (Tables 1–2), `charset` (Table 9), `translation` (Table 3) or `confound`."),
        "subset",
        ("n_pairs", "int", "Pairs where both predictions are valid."),
        ("n_excluded", "int", "Pairs left out for an invalid prediction."),
        ("acc_tw", "float", "Accuracy (%) on the Taiwan reviews."),
        ("acc_cn", "float", "Accuracy (%) on the Mainland reviews."),
        ("delta_acc", "float", "`acc_cn − acc_tw`."),
        ("only_tw_correct", "int", "Pairs where only the Taiwan prediction is right."),
        ("only_cn_correct", "int", "Pairs where only the Mainland prediction is right."),
        ("mcnemar_chi2", "float", "McNemar's χ² on correctness."),
        ("mcnemar_p", "float", "Exact McNemar p-value."),
        ("sig_acc", "string", "Significance stars of `mcnemar_p`."),
        ("mse_tw", "float", "Mean squared error on the Taiwan reviews."),
        ("mse_cn", "float", "Mean squared error on the Mainland reviews."),
        ("delta_mse", "float", "`mse_cn − mse_tw`."),
        ("ttest_t", "float", "Paired t statistic of the squared errors."),
        ("ttest_p", "float", "p-value of the paired t-test."),
        ("sig_mse", "string", "Significance stars of `ttest_p`."),
        ("wilcoxon_w", "float", "Wilcoxon signed-rank statistic of the squared errors."),
        ("wilcoxon_p", "float", "p-value of the Wilcoxon test."),
        ("sig_wilcoxon", "string", "Significance stars of `wilcoxon_p`."),
        ("true_mean_tw", "float", "Mean true score of the pairs' Taiwan reviews (the confound check)."),
        ("true_mean_cn", "float", "Mean true score of the pairs' Mainland reviews."),
        ("true_t", "float", "Paired t statistic of the true scores."),
        ("true_p", "float", "p-value of `true_t`."),
    ], C),
    table("review_paired_cis", _PAIRED, C),
    table("review_significance_robustness", _PAIRED + [
        ("paper_p_bh", "float", "`paper_p` BH-adjusted across models × formats (per measure)."),
        ("paper_significant", "bool", "`paper_p_bh` < 0.05 (missing without a p-value)."),
        ("ci_excludes_0", "bool", "The paired-t interval excludes 0 (missing without an interval)."),
        ("survives", "bool", "For a result significant in the paper's test: its interval excludes 0; missing for "
                             "the others."),
    ], C),
]
