"""What a condition (a system prompt or persona) changes against the baseline `none`, measured prompt by prompt.

Per model, scoring rule, prompt set, prompting language and condition other than `none`: the answers under the
condition pair with the baseline's answers to the same prompt and sample. `b` counts pairs that pass under `none`
and fail under the condition, `c` the reverse, and McNemar's exact binomial test on b and c (`lib/stats`) says
whether the condition moves the pass rate; with several samples per prompt the pairs are prompts (a prompt passes
under a condition when a strict majority of its answers there pass), as in `metrics`, since a prompt's samples are
not independent. The prompts that flipped are listed each way. Benjamini–Hochberg adjusts the exact p-values across
the whole table of one scoring rule and prompt set (every model, language and condition: the family a reader scans).

Beside the paired test, each row carries the paper's language bias score of its model and rule within the
condition and within the baseline (Score_ZH-Hant − Score_EN, on the answers each language has), so a persona that
opens or closes the gap between languages shows there; `sovereignty_summary` has every pair per condition.
"""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib import stats
from sctc_assets.lib.sovereignty.metrics import _majority, _several_samples
from sctc_assets.lib.sovereignty.pairs import COMPARISONS
from sctc_assets.lib.sovereignty.prompts import BASELINE_CONDITION, with_condition

KEYS = ["model", "scoring_rule", "prompt_set", "lang", "condition"]
PAPER_PAIR = COMPARISONS[0]
EFFECT_COLUMNS = KEYS + ["baseline", "n_baseline", "passed_baseline", "score_baseline", "n_condition",
                         "passed_condition", "score_condition", "delta", "mcnemar_unit", "n_pairs", "mcnemar_b",
                         "mcnemar_c", "p_exact", "p_exact_bh", "sig_exact_bh", "flipped_to_fail", "flipped_to_pass",
                         "lbs_pair", "lbs_baseline", "lbs_condition"]


def paired_effect(base: pd.DataFrame, other: pd.DataFrame) -> dict:
    """Scores, the McNemar counts, exact p and flipped prompts of one condition against the baseline, from the
    result rows of one model, rule, prompt set and language under each."""
    if _several_samples(base, other):
        unit = "prompt"
        pairs = pd.concat([_majority(base).rename("a"), _majority(other).rename("b")], axis=1, join="inner")
        ids, pass_a, pass_b = list(pairs.index), pairs["a"].astype(bool), pairs["b"].astype(bool)
    else:
        unit = "response"
        pairs = base.merge(other, on=["prompt_id", "sample"], suffixes=("_a", "_b"))
        ids, pass_a, pass_b = list(pairs["prompt_id"]), pairs["passed_a"].astype(bool), pairs["passed_b"].astype(bool)
    to_fail = sorted({prompt for prompt, a, b in zip(ids, pass_a, pass_b) if a and not b})
    to_pass = sorted({prompt for prompt, a, b in zip(ids, pass_a, pass_b) if b and not a})
    b, c = int((pass_a & ~pass_b).sum()), int((~pass_a & pass_b).sum())
    _, _, p_exact = stats.mcnemar(b, c)
    passed_base, passed_other = int(base["passed"].astype(bool).sum()), int(other["passed"].astype(bool).sum())
    return {"n_baseline": len(base), "passed_baseline": passed_base, "score_baseline": passed_base / len(base),
            "n_condition": len(other), "passed_condition": passed_other, "score_condition": passed_other / len(other),
            "delta": passed_other / len(other) - passed_base / len(base), "mcnemar_unit": unit, "n_pairs": len(ids),
            "mcnemar_b": b, "mcnemar_c": c, "p_exact": p_exact, "flipped_to_fail": to_fail, "flipped_to_pass": to_pass}


def _lbs(rows: pd.DataFrame) -> float:
    """The paper's LBS (Score_ZH-Hant − Score_EN) on one model, rule, prompt set and condition's rows."""
    scores = {lang: frame["passed"].astype(bool).mean() for lang, frame in rows.groupby("lang")}
    first, second = PAPER_PAIR
    return float(scores[first] - scores[second]) if first in scores and second in scores else float("nan")


def condition_effects(results: pd.DataFrame) -> pd.DataFrame:
    """One row per model, scoring rule, prompt set, language and condition other than `none` that has answers
    paired with the baseline's, with BH across the table per rule and prompt set."""
    results = with_condition(results)
    rows = []
    for (model, rule, prompt_set), group in results.groupby(["model", "scoring_rule", "prompt_set"], sort=True):
        by_condition = dict(tuple(group.groupby("condition")))
        base = by_condition.get(BASELINE_CONDITION)
        if base is None:
            continue
        lbs_base = _lbs(base)
        for condition, frame in sorted(by_condition.items()):
            if condition == BASELINE_CONDITION:
                continue
            lbs_condition = _lbs(frame)
            base_by_lang = dict(tuple(base.groupby("lang")))
            for lang, other in frame.groupby("lang", sort=True):
                if lang not in base_by_lang:
                    continue
                effect = paired_effect(base_by_lang[lang], other)
                if not effect["n_pairs"]:
                    continue
                rows.append({"model": model, "scoring_rule": rule, "prompt_set": prompt_set, "lang": lang,
                             "condition": condition, "baseline": BASELINE_CONDITION, **effect,
                             "lbs_pair": "−".join(PAPER_PAIR), "lbs_baseline": lbs_base,
                             "lbs_condition": lbs_condition})
    table = pd.DataFrame(rows, columns=EFFECT_COLUMNS)
    if table.empty:
        return table.astype({"p_exact_bh": "float64"})
    for _, group in table.groupby(["scoring_rule", "prompt_set"]):
        table.loc[group.index, "p_exact_bh"] = stats.bh_adjust(group["p_exact"])
    table["p_exact_bh"] = table["p_exact_bh"].astype("float64")
    table["sig_exact_bh"] = [stats.sig_stars(p) for p in table["p_exact_bh"]]
    return table
