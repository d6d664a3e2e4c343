"""Columns of the contextually aligned review tables.

Per-side columns end in the suffix of a variety of the run's pair (`sctc run --reviews-pair A B`: the code, lower
case, with `-` written `_`), the first variety's first: `acc_tw`/`acc_cn` for the paper's pair, which `TABLES`
declares; `review_tables(a, b)` declares another pair's (`acc_en_gb`/`acc_en_us`).
"""

from __future__ import annotations

from sctc_assets.lib.schemas.base import TableSchemaSpec, table
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
    "variety": ("string", "The reviewer's variety, one of the pair's: `tw` (Taiwan Mandarin) or `cn` (Mainland "
                          "Mandarin) by default."),
    "rating_class": ("string", "`negative` (1–3), `neutral` (4–7) or `positive` (8–10)."),
    "length_bin": ("int", "10-token length bin of the review (tokens: one per Han character, emoji or mark, one per "
                          "English word or number)."),
    "pair_id": ("int", "The pair's number, in a seeded random order."),
    "version": ("string", "`original` (as written) or `converted` (OpenCC into the other variety: the stand-in for "
                          "the paper's translation control; a pair of Chinese varieties only)."),
    "text_variety": ("string", "The variety the prompt's text is written in."),
    "format": ("string", "Prompt format: `structured`, `plain` or `shuffled` (Appendix C)."),
    "subset": ("string", "The analysis' subset (`short`, `long`, `all`, a character set …)."),
}

_PAIRED = [
    "model", "format",
    ("measure", "string", "`delta_acc` (accuracy, percentage points) or `delta_mse` (squared error), second − first "
                          "variety of the pair (cn − tw by default)."),
    ("n_pairs", "int", "Pairs whose two predictions (original texts) are valid."),
    ("estimate", "float", "The mean paired difference, second − first variety."),
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

def review_tables(a: str = "tw", b: str = "cn") -> list[TableSchemaSpec]:
    """The review tables of the pair whose column suffixes are `a` (the reference) and `b`."""
    first, second = f"the first variety (`{a}`, Taiwan by default)", f"the second variety (`{b}`, Mainland by default)"
    suffix = ("; each `_<variety>` column's suffix is the code of a variety of `sctc run --reviews-pair A B`, lower "
              "case, `-` written `_`")
    return [
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
            (f"review_id_{a}", "string", f"The pair's review of {first}{suffix}."),
            (f"review_id_{b}", "string", f"The pair's review of {second}."),
            (f"score_{a}", "int", f"Score of the review of {first}."),
            (f"score_{b}", "int", f"Score of the review of {second}."),
            (f"tokens_{a}", "int", f"Tokens of the review of {first}."),
            (f"tokens_{b}", "int", f"Tokens of the review of {second}."),
            (f"characters_{a}", "int", f"Visible characters of the review of {first}."),
            (f"characters_{b}", "int", f"Visible characters of the review of {second}."),
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
            "input_tokens", "output_tokens", "cached", "latency_s", "seed", "served_model", "system_fingerprint", "batch_id",
            "reasoning", "reasoning_tokens",
        ], C),
        table("review_metrics", [
            "model", "format",
            ("analysis", "string", "`length` (Tables 1–2), `charset` (Table 9), `translation` (Table 3) or "
                                   "`confound`; `charset` and `translation` for a pair of Chinese varieties only."),
            "subset",
            ("n_pairs", "int", "Pairs where both predictions are valid."),
            ("n_excluded", "int", "Pairs left out for an invalid prediction."),
            *paired_metric_columns(a, b, f"the reviews of {first}", f"the reviews of {second}",
                                   (f"Pairs where only the prediction on {first} is right.",
                                    f"Pairs where only the prediction on {second} is right."), note=suffix),
            (f"true_mean_{a}", "float", f"Mean true score of the pairs' reviews of {first} (the confound check)."),
            (f"true_mean_{b}", "float", f"Mean true score of the pairs' reviews of {second}."),
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
        *translation_tables(a, b, first, second),
        *study_tables(a, b, first, second, suffix),
    ]


def paired_metric_columns(a: str, b: str, on_a: str, on_b: str, only_correct: tuple[str, str], *,
                          note: str = "") -> list:
    """Accuracy, McNemar, MSE, t and Wilcoxon columns of a paired comparison (`review_metrics` and the translation
    control's Table 3): `on_a`/`on_b` name what each side's predictions are on; `note` follows the first column's."""
    return [
        (f"acc_{a}", "float", f"Accuracy (%) on {on_a}{note}."),
        (f"acc_{b}", "float", f"Accuracy (%) on {on_b}."),
        ("delta_acc", "float", f"`acc_{b} − acc_{a}`."),
        (f"only_{a}_correct", "int", only_correct[0]),
        (f"only_{b}_correct", "int", only_correct[1]),
        ("mcnemar_chi2", "float", "McNemar's χ² on correctness."),
        ("mcnemar_p", "float", "Exact McNemar p-value."),
        ("sig_acc", "string", "Significance stars of `mcnemar_p`."),
        (f"mse_{a}", "float", f"Mean squared error on {on_a}."),
        (f"mse_{b}", "float", f"Mean squared error on {on_b}."),
        ("delta_mse", "float", f"`mse_{b} − mse_{a}`."),
        ("ttest_t", "float", "Paired t statistic of the squared errors."),
        ("ttest_p", "float", "p-value of the paired t-test."),
        ("sig_mse", "string", "Significance stars of `ttest_p`."),
        ("wilcoxon_w", "float", "Wilcoxon signed-rank statistic of the squared errors."),
        ("wilcoxon_p", "float", "p-value of the Wilcoxon test."),
        ("sig_wilcoxon", "string", "Significance stars of `wilcoxon_p`."),
    ]


def translation_tables(a: str, b: str, first: str, second: str) -> list[TableSchemaSpec]:
    """The translation control through a model (`sctc run --reviews-translator KEY`)."""
    translator = ("translator", "string", "Registry key of the model that translated the review.")
    translated = "translated into the other variety (missing unless `status` is `translated`)"
    return [
        table("review_translations", [
            translator, "pair_id", "review_id", "variety",
            ("text_variety", "string", "The variety the review was translated into (the other of the pair)."),
            ("title", "string", f"The review's title, {translated}."),
            ("positive", "string", f"The review's positive text, {translated}."),
            ("negative", "string", f"The review's negative text, {translated}."),
            "response", "outcome",
            ("status", "string", "`translated`, `unparsed` (not the three labelled parts, or a written part left "
                                 "empty), `refused` or `error`: all but `translated` are missing data."),
            "input_tokens", "output_tokens", "cached",
        ], C),
        table("review_translation_predictions", [
            "model", "format", "pair_id", "review_id", "variety",
            ("version", "string", "`translated`."),
            "text_variety", "response", "outcome", "outcome_message",
            ("prediction", "int", "The predicted score, 1–10, when the answer is that number alone."),
            ("status", "string", "`valid`, `invalid` (not a score alone) or `error` (the call failed)."),
            "input_tokens", "output_tokens", "cached", "latency_s", "seed", "served_model", "system_fingerprint",
            "batch_id", "reasoning", "reasoning_tokens",
            ("translation", "string", "The control: `model:<translator key>`."),
        ], C),
        table("review_translation_control", [
            "model",
            ("control", "string", "`opencc` (OpenCC's conversion, a Chinese pair) or `model:<key>` (that model's "
                                  "translation)."),
            "format",
            ("subset", "string", "`original <code>`: the reviews written in that variety, as written against "
                                 "converted or translated."),
            ("n_pairs", "int", "Reviews whose two predictions (as written, converted or translated) are valid."),
            ("n_excluded", "int", "Reviews left out for an invalid prediction."),
            ("n_untranslated", "int", "Reviews left out with no usable translation (missing data; 0 for OpenCC)."),
            *paired_metric_columns(a, b, f"the texts in {first}", f"the texts in {second}",
                                   (f"Reviews where only the prediction on the text in {first} is right.",
                                    f"Reviews where only the prediction on the text in {second} is right.")),
            (f"true_mean_{a}", "float", "Mean true score of the reviews (the same on both sides)."),
            (f"true_mean_{b}", "float", "Mean true score of the reviews (the same on both sides)."),
            ("true_t", "float", "Paired t statistic of the true scores (none: the same reviews)."),
            ("true_p", "float", "p-value of `true_t`."),
        ], C),
    ]


_SENTIMENT = ("sentiment", "string", "The pilot's class from the stars: `negative` (1–3), `neutral` (4–7), "
                                     "`positive` (8–10); in `review_sentiment_pilot` also `overall`.")
_PILOT_BIN = ("length_bin", "int", "10-character bin: bin b holds 10b+1 … 10b+10 visible characters (Appendix E, up "
                                   "to 500).")


def study_tables(a: str, b: str, first: str, second: str, suffix: str) -> list[TableSchemaSpec]:
    """Appendix E's pilot, the pair-by-pair predictions (Figures 3–4) and the human ratings' agreement."""
    return [
        table("review_sentiment_predictions", [
            "model", "review_id", "variety", "score", _SENTIMENT,
            ("characters", "int", "Visible characters of title, positive and negative text."), _PILOT_BIN,
            "response", "outcome",
            ("predicted_sentiment", "string", "The label the answer consists of (`negative`, `neutral`, "
                                              "`positive`), else null."),
            ("status", "string", "`valid`, `invalid` (not one of the three labels alone: left out) or `error`."),
            "cached",
        ], C),
        table("review_sentiment_pilot", [
            "model", "variety", _PILOT_BIN,
            ("bin_low", "int", "The bin's first character count."),
            ("bin_high", "int", "The bin's last character count."),
            _SENTIMENT,
            ("n", "int", "Valid answers."),
            ("n_invalid", "int", "Answers left out (not one of the labels, or failed calls)."),
            ("correct", "int", "Valid answers naming the review's class."),
            ("accuracy", "float", "`correct / n`, %."),
            ("mse", "float", "Mean squared error with the classes coded 0 (negative), 1 (neutral), 2 (positive)."),
        ], C),
        table("review_prediction_pairs", [
            "model", "format", "pair_id",
            ("length_group", "string", "`short` (the two reviews average 1–49 characters) or `long`."),
            (f"review_id_{a}", "string", f"The pair's review of {first}{suffix}."),
            (f"review_id_{b}", "string", f"The pair's review of {second}."),
            (f"score_{a}", "int", f"Stars of the review of {first}."),
            (f"score_{b}", "int", f"Stars of the review of {second}."),
            (f"prediction_{a}", "int", f"The model's score for the review of {first} as written (null: invalid)."),
            (f"prediction_{b}", "int", f"The model's score for the review of {second} as written (null: invalid)."),
            ("both_valid", "bool", "Both predictions are valid: the pairs every comparison keeps."),
        ], C),
        table("review_human_agreement", [
            ("rater", "string", "The rater as the ratings file names them, or `all` (every rating pooled)."),
            "variety",
            ("question", "string", "`quality`, `content_agreement` (B.1, 1–5), `readability` (B.2, 1–5), "
                                   "`nativeness` (B.2, 1–4) or `predicted_score` (B.2, 1–10)."),
            ("against", "string", "`stars` or a model key for `predicted_score`; null for the other questions."),
            ("format", "string", "The model's prompt format when `against` is a model."),
            ("n", "int", "Ratings in the row (compared with a model: those with its valid prediction)."),
            ("mean", "float", "Mean answer of a Likert question."),
            ("sd", "float", "Its standard deviation (n − 1)."),
            ("share", "float", "`nativeness`: % of answers 2 (a proficient non-native or a native speaker)."),
            ("accuracy", "float", "`predicted_score`: % equal to the stars or to the model's prediction."),
            ("mse", "float", "`predicted_score`: mean squared difference."),
            ("weighted_kappa", "float", "`predicted_score`: Cohen's κ with quadratic weights over the scores 1–10."),
        ], C),
    ]


TABLES = review_tables()
