"""Columns of the bias-factor tables (`term_bias_factors`, `name_bias_factors`; `lib.bias_factors`)."""

from __future__ import annotations

from sctc_assets.lib.schemas.base import table
from sctc_assets.lib.schemas.common import COMMON

C = {
    **COMMON,
    "outcome": ("string", "The 0/1 outcome regressed: `correct` or `misaligned` (terms), `mainland` (names: the "
                          "Mainland candidate chosen, among valid answers)."),
    "factor": ("string", "`corpus` (log((Mainland + 1) / (Taiwanese + 1)) records containing the forms), `tokens` "
                         "(log of the Mainland/Taiwanese token-count ratio under the model's tokenizer) or `logprob` "
                         "(Mainland minus Taiwanese log-probability); each z-scored across the units."),
    "factors_entered": ("string", "The factors the fit had, comma-separated (a model without a tokenizer or "
                                  "log-probabilities is fitted on the others)."),
    "factors_left_out": ("string", "`factor: why` for each factor the fit lacked, `; `-separated (no tokenizer "
                                   "known offline, no log-probabilities, no variation across the units)."),
    "tokenizer": ("string", "The tokenizer registry entry or backend tokenizer counting the tokens; empty: none "
                            "known."),
    "n_units": ("int", "Clusters of the fit: terms (term task) or candidate lists (name task)."),
    "n_trials": ("int", "Trials (answers) in the fit."),
    "coef": ("float", "Logistic GEE coefficient: change in log-odds of the outcome per SD of the factor across "
                      "units (exchangeable working correlation, robust SE)."),
    "se": ("float", "Its robust (sandwich) standard error."),
    "ci_low": ("float", "95 % Wald interval of `coef`, low end."),
    "ci_high": ("float", "95 % Wald interval of `coef`, high end."),
    "p": ("float", "Two-sided Wald p-value of `coef` (1 when the outcome never varies)."),
    "p_bh": ("float", "`p` BH-adjusted across the model's table (every language, outcome and factor)."),
    "gap_log_odds": ("float", "The S − T gap: GEE log-odds ratio of the outcome, Simplified vs Traditional "
                              "prompts, clustered by unit (the same on both languages' rows)."),
    "gap_at_parity": ("float", "The S coefficient with the factor and its interaction with the script added "
                               "(raw log ratio): the gap where the factor is at parity (0)."),
    "gap_share": ("float", "(gap_log_odds − gap_at_parity) / gap_log_odds: the share of the S − T gap that "
                           "vanishes at the factor's parity (1: all of it; 0: none; negative: the gap grows)."),
    "gap_note": ("string", "Why `gap_share` is NaN (only one script's answers, an outcome that never varies, a "
                           "gap of zero within the fit's precision, a failed fit); empty when it is a number."),
}

TERM_BIAS_FACTORS = table("term_bias_factors", [
    "model", "lang",
    ("label_source", "string", "The labels whose counts are regressed (`upstream` where present, else "
                               "`judge`, `lexicon`, `rules`)."),
    "outcome", "factor", "factors_entered", "factors_left_out", "tokenizer", "n_units", "n_trials", "coef",
    "se", "ci_low", "ci_high", "p", "p_bh", "gap_log_odds", "gap_at_parity", "gap_share", "gap_note",
], C)
NAME_BIAS_FACTORS = table("name_bias_factors", [
    "model", "lang",
    ("experiment", "string", "The name experiment (`main`, …)."),
    ("extraction_source", "string", "Who extracted the selected name (`rules`, `published`, `judge`)."),
    "outcome", "factor", "factors_entered", "factors_left_out", "tokenizer", "n_units", "n_trials", "coef",
    "se", "ci_low", "ci_high", "p", "p_bh", "gap_log_odds", "gap_at_parity", "gap_share", "gap_note",
], C)
# One column set across the term and name benchmarks, whose specs carry one table each; the reference documents
# the two together, after every benchmark's own tables.
TABLES = [TERM_BIAS_FACTORS, NAME_BIAS_FACTORS]
