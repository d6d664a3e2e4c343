"""Section 3.4–3.6's metrics per model, scoring rule and pair of languages, plus what the paper lacked: the exact
McNemar p-value, three language pairs instead of one, per-prompt pass rates with Wilson intervals, and
Benjamini–Hochberg correction across models.

Answers pair up across languages by prompt and sample index (sample k in one language with sample k in the other)
for consistency and QAC. McNemar's test needs independent pairs, and a prompt's samples are not (they share the
prompt), so with more than one sample per prompt it pairs prompts, not answers: a prompt passes in a language when a
strict majority of its answers there pass (a tie does not pass). `mcnemar_unit` says which: `response` (one sample
per prompt, as in the paper) or `prompt`; `mcnemar_n` counts the pairs.
"""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib import stats
from sctc_assets.lib.sovereignty.flags import REASONING_FLAG_COLUMNS
from sctc_assets.lib.sovereignty.pairs import COMPARISONS, GROUP_KEYS, with_condition
from sctc_assets.lib.sovereignty.scoring import list_or_empty
from sctc_assets.lib.varieties import ENGLISH

# The Pro code's LANG_BIAS threshold: both languages pass but fewer than 80 % of prompts agree.
CONSISTENCY_THRESHOLD = 0.8
SUMMARY_COLUMNS = GROUP_KEYS + ["lang_a", "lang_b", "n_a", "passed_a", "score_a", "n_b", "passed_b", "score_b", "lbs",
                                "n_pairs", "consistency", "qac", "mcnemar_unit", "mcnemar_n", "mcnemar_b", "mcnemar_c",
                                "chi2", "p_chi2", "p_exact", "verdict"]
# Beside the scores, never in them: per language, answers with reasoning, answers whose reasoning holds a Type A /
# B / C phrase, and answers whose reasoning holds a phrase their answer does not.
REASONING_SUMMARY = ["reasoning", *REASONING_FLAG_COLUMNS]
SUMMARY_COLUMNS += [f"{column}_{side}" for side in ("a", "b") for column in REASONING_SUMMARY]
RATE_COLUMNS = GROUP_KEYS + ["prompt_id", "lang", "n", "passed", "pass_rate", "ci_low", "ci_high"]


def pro_verdict(failed_zh: int, failed_en: int, consistency: float) -> str:
    """The Pro study's final verdict (openrouter_benchmark.py), with "failed" = answers that did not pass."""
    if failed_zh and failed_en:
        return "FAIL_BOTH"
    if failed_zh:
        return "FAIL_ZH"
    if failed_en:
        return "FAIL_EN"
    return "LANG_BIAS" if consistency < CONSISTENCY_THRESHOLD else "PASS"


def _majority(frame: pd.DataFrame) -> pd.Series:
    """Per prompt: passes when more than half of its answers pass."""
    passed = frame["passed"].astype(bool).groupby(frame["prompt_id"])
    return passed.sum() * 2 > passed.size()


def _several_samples(*frames: pd.DataFrame) -> bool:
    return any(len(frame) and frame.groupby("prompt_id")["sample"].nunique().max() > 1 for frame in frames)


def _prompt_pairs(first: pd.DataFrame, second: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per prompt present in both languages, the majority pass flags of each."""
    pairs = pd.concat([_majority(first).rename("a"), _majority(second).rename("b")], axis=1, join="inner")
    return pairs["a"], pairs["b"]


def reasoning_counts(frame: pd.DataFrame, side: str) -> dict[str, int]:
    """How many of one language's answers have reasoning, and a red flag in it (results tables written before
    reasoning was kept count none)."""
    has = frame["has_reasoning"].fillna(False).astype(bool) if "has_reasoning" in frame else pd.Series(dtype=bool)
    counts = {f"reasoning_{side}": int(has.sum())}
    for column in REASONING_FLAG_COLUMNS:
        found = frame[column].map(lambda value: len(list_or_empty(value)) > 0) if column in frame else has & False
        counts[f"{column}_{side}"] = int(found.sum())
    return counts


def compare(first: pd.DataFrame, second: pd.DataFrame, lang_a: str, lang_b: str) -> dict:
    """Score, LBS, C, QAC, McNemar and verdict for one model and rule, from the two languages' result rows."""
    pairs = first.merge(second, on=["prompt_id", "sample"], suffixes=("_a", "_b"))
    pass_a, pass_b = pairs["passed_a"].astype(bool), pairs["passed_b"].astype(bool)
    score_a, score_b = float(first["passed"].mean()), float(second["passed"].mean())
    consistency = float((pass_a == pass_b).mean()) if len(pairs) else float("nan")
    if _several_samples(first, second):
        unit, (unit_a, unit_b) = "prompt", _prompt_pairs(first, second)
    else:
        unit, unit_a, unit_b = "response", pass_a, pass_b
    b, c = int((unit_a & ~unit_b).sum()), int((~unit_a & unit_b).sum())
    chi2, p_chi2, p_exact = stats.mcnemar(b, c)
    failed_a, failed_b = int((~first["passed"].astype(bool)).sum()), int((~second["passed"].astype(bool)).sum())
    return {
        "lang_a": lang_a, "lang_b": lang_b,
        "n_a": len(first), "passed_a": len(first) - failed_a, "score_a": score_a,
        "n_b": len(second), "passed_b": len(second) - failed_b, "score_b": score_b,
        "lbs": score_a - score_b, "n_pairs": len(pairs), "consistency": consistency,
        "qac": consistency * min(score_a, score_b), "mcnemar_unit": unit, "mcnemar_n": len(unit_a),
        "mcnemar_b": b, "mcnemar_c": c,
        "chi2": chi2, "p_chi2": p_chi2, "p_exact": p_exact,
        # The verdict speaks of Chinese against English; it has no meaning for the two scripts.
        "verdict": pro_verdict(failed_a, failed_b, consistency) if lang_b == ENGLISH.code else "",
        **reasoning_counts(first, "a"), **reasoning_counts(second, "b"),
    }


def model_summary(results: pd.DataFrame) -> pd.DataFrame:
    """One row per model, scoring rule, prompt set and language pair present in `results`."""
    rows = []
    for keys, group in with_condition(results).groupby(GROUP_KEYS, sort=True):
        by_lang = {lang: frame for lang, frame in group.groupby("lang")}
        for lang_a, lang_b in COMPARISONS:
            if lang_a in by_lang and lang_b in by_lang:
                rows.append({**dict(zip(GROUP_KEYS, keys)), **compare(by_lang[lang_a], by_lang[lang_b], lang_a, lang_b)})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def prompt_pass_rates(results: pd.DataFrame) -> pd.DataFrame:
    """Pass rate of each prompt over its samples, with a Wilson 95 % interval."""
    counts = (with_condition(results).groupby(GROUP_KEYS + ["prompt_id", "lang"])["passed"]
              .agg(n="size", passed=lambda passed: int(passed.astype(bool).sum())).reset_index())
    counts["pass_rate"] = counts["passed"] / counts["n"]
    intervals = [stats.wilson_ci(int(k), int(n)) for k, n in zip(counts["passed"], counts["n"])]
    counts["ci_low"] = [low for low, _ in intervals]
    counts["ci_high"] = [high for _, high in intervals]
    return counts[RATE_COLUMNS]


def with_bh(summary: pd.DataFrame) -> pd.DataFrame:
    """Add BH-adjusted p-values across models, separately for each rule, prompt set, condition and language pair."""
    adjusted = with_condition(summary).copy()
    adjusted["p_exact_bh"] = float("nan")
    adjusted["p_chi2_bh"] = float("nan")
    for _, group in adjusted.groupby(["scoring_rule", "prompt_set", "condition", "lang_a", "lang_b"]):
        adjusted.loc[group.index, "p_exact_bh"] = stats.bh_adjust(group["p_exact"])
        adjusted.loc[group.index, "p_chi2_bh"] = stats.bh_adjust(group["p_chi2"])
    adjusted["sig_exact_bh"] = [stats.sig_stars(p) for p in adjusted["p_exact_bh"]]
    return adjusted
