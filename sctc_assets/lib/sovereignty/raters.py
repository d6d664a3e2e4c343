"""Agreement between the raters of the sovereignty answers: the human reviewers (several decisions per answer), the
reviewed verdicts against the automatic ones, and two or more judge models.

- Human reviewers: Cohen's κ for two, Fleiss' κ for three or more (statsmodels' `inter_rater`), on the answers every
  one of them decided (pass/fail), with the raw agreement and the share of answers whose verdicts differ between
  them; with three or more, also Cohen's κ of every pair.
- A reviewer (and the majority of the reviewers) against each scoring rule's automatic status (`paper`, `judge`,
  `judge:<key>`): pass/fail agreement, Cohen's κ, and the share of reviewed answers whose verdict the review changes.
- Judges: Cohen's κ and the raw agreement of their YES/NO verdicts on the answers both judged, and the answers
  they disagree on.

κ is missing (not 0) where it is undefined: when the chance agreement is 1 (both raters give one and the same
verdict throughout).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
from statsmodels.stats.inter_rater import cohens_kappa, fleiss_kappa

from sctc_assets.lib.sovereignty.answer_review import (REVIEW_KEYS, REVIEWER, SECOND_JUDGE_PREFIX, TIE,
                                                       resolve_decisions, reviewed_rule)
from sctc_assets.lib.sovereignty.prompts import BASELINE_CONDITION, ITEM_KEYS, with_condition
from sctc_assets.lib.sovereignty.scoring import passes

AGREEMENT_COLUMNS = ["comparison", "rater_a", "rater_b", "statistic", "raters", "n", "agreement", "kappa", "changed",
                     "disagreements"]
UNNAMED = "(unnamed)"
MAJORITY = "majority of the reviewers"

def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float:
    """Cohen's κ of two raters' pass/fail (True/False) verdicts on the same answers; NaN when undefined."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if len(a) == 0:
        return float("nan")
    table = np.array([[np.sum(~a & ~b), np.sum(~a & b)], [np.sum(a & ~b), np.sum(a & b)]], dtype=float)
    chance = (table.sum(axis=1) @ table.sum(axis=0)) / table.sum() ** 2
    if chance >= 1:
        return float("nan")
    return float(cohens_kappa(table, return_results=False))


def fleiss(ratings: np.ndarray) -> float:
    """Fleiss' κ of an answers × raters matrix of pass/fail (True/False); NaN when undefined."""
    ratings = np.asarray(ratings, dtype=bool)
    if ratings.size == 0:
        return float("nan")
    counts = np.column_stack([(~ratings).sum(axis=1), ratings.sum(axis=1)]).astype(float)
    shares = counts.sum(axis=0) / counts.sum()
    if (shares ** 2).sum() >= 1:
        return float("nan")
    return float(fleiss_kappa(counts, method="fleiss"))


def answer_id(key: Iterable[Any]) -> str:
    """An answer's id as the agreement table and `sctc sovereignty import-ratings` write it:
    model/lang/prompt_set/prompt_id/sample, then /condition unless it is the baseline `none` (so the ids of the
    paper's design stay what they were before conditions)."""
    parts = [str(part) for part in key]
    if len(parts) == len(ITEM_KEYS) and ITEM_KEYS[-1] == "condition" and parts[-1] == BASELINE_CONDITION:
        parts = parts[:-1]
    return "/".join(parts)


def _row(comparison: str, rater_a: str, rater_b: str, statistic: str, raters: int, verdicts: pd.DataFrame,
         kappa: float) -> dict:
    """One agreement row from an answers × raters frame of pass/fail (the index: the item keys)."""
    same = verdicts.nunique(axis=1) == 1 if not verdicts.empty else pd.Series(dtype=bool)
    n = len(verdicts)
    return {"comparison": comparison, "rater_a": rater_a, "rater_b": rater_b, "statistic": statistic,
            "raters": raters, "n": n, "agreement": float(same.mean()) if n else float("nan"),
            "kappa": kappa, "changed": float(1 - same.mean()) if n else float("nan"),
            # The item keys only (an index by review keys ends with the answer's digest).
            "disagreements": [answer_id(tuple(key)[:len(ITEM_KEYS)]) for key in verdicts.index[~same.to_numpy()]]
            if n else []}


def _pair(comparison: str, rater_a: str, rater_b: str, a: pd.Series, b: pd.Series) -> dict:
    both = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").dropna()
    both = both.astype(bool)
    return _row(comparison, rater_a, rater_b, "cohen_kappa", 2, both,
                cohen_kappa(both["a"].to_numpy(), both["b"].to_numpy()))


def _reviewer_name(name: str) -> str:
    return name or UNNAMED


def reviewer_verdicts(reviews: pd.DataFrame) -> pd.DataFrame:
    """Answers (item keys + answer digest) × reviewers: True for pass, False for fail, missing where undecided."""
    if reviews.empty:
        return pd.DataFrame()
    frame = reviews.drop_duplicates(REVIEW_KEYS + [REVIEWER], keep="last")
    frame = frame.assign(verdict=frame["decision"] == "pass", **{REVIEWER: frame[REVIEWER].map(_reviewer_name)})
    return frame.pivot(index=REVIEW_KEYS, columns=REVIEWER, values="verdict")


def reviewer_rows(reviews: pd.DataFrame) -> list[dict]:
    """Agreement among the human reviewers: Cohen (two) or Fleiss (three or more) on the answers all decided."""
    table = reviewer_verdicts(reviews)
    names = list(table.columns)
    if len(names) < 2:
        return []
    complete = table.dropna().astype(bool)
    if len(names) == 2:
        return [_pair("reviewers", names[0], names[1], table[names[0]], table[names[1]])]
    rows = [_row("reviewers", ", ".join(names), "", "fleiss_kappa", len(names), complete,
                 fleiss(complete.to_numpy()))]
    rows += [_pair("reviewer_pair", a, b, table[a], table[b]) for a, b in combinations(names, 2)]
    return rows


def _automatic(results: pd.DataFrame) -> dict[str, pd.Series]:
    """Per reviewed rule: the automatic pass/fail (before any review) of each answer, by item keys + digest."""
    out = {}
    for rule, frame in results[results["scoring_rule"].map(reviewed_rule).astype(bool)].groupby("scoring_rule"):
        auto = [passes(rule, status) for status in frame["auto_status"]]
        out[rule] = pd.Series(auto, index=pd.MultiIndex.from_frame(frame[REVIEW_KEYS]), dtype=bool)
    return out


def review_vs_rule_rows(results: pd.DataFrame, reviews: pd.DataFrame) -> list[dict]:
    """Each reviewer, and the reviewers' majority (ties left out), against each reviewed rule's automatic status."""
    if reviews.empty or results.empty:
        return []
    automatic = _automatic(results)
    table = reviewer_verdicts(reviews)
    resolved = resolve_decisions(reviews)
    resolved = resolved[resolved["decision"] != TIE]
    majority = pd.Series(list(resolved["decision"] == "pass"),
                         index=pd.MultiIndex.from_frame(resolved[REVIEW_KEYS]), dtype=bool)
    raters = {name: table[name].dropna() for name in table.columns}
    if len(raters) > 1:
        raters[MAJORITY] = majority
    rows = []
    for name, verdicts in raters.items():
        for rule, auto in automatic.items():
            row = _pair("review_vs_rule", name, rule, verdicts, auto)
            if row["n"]:
                rows.append(row)
    return rows


def judge_rows(judgements: pd.DataFrame) -> list[dict]:
    """Every pair of judges (in the order they were named): their YES/NO verdicts on the answers both judged."""
    if judgements.empty:
        return []
    judged = judgements.dropna(subset=["judge_acknowledges"])
    verdicts = {key: pd.Series(list(frame["judge_acknowledges"].astype(bool)),
                               index=pd.MultiIndex.from_frame(frame[ITEM_KEYS]), dtype=bool)
                for key, frame in judged.groupby("judge_model", sort=False)}
    order = list(dict.fromkeys(judgements["judge_model"]))
    return [_pair("judges", a, b, verdicts.get(a, pd.Series(dtype=bool)), verdicts.get(b, pd.Series(dtype=bool)))
            for a, b in combinations(order, 2)]


def rater_agreement(results: pd.DataFrame, reviews: pd.DataFrame, judgements: pd.DataFrame) -> pd.DataFrame:
    """The agreement table: the reviewers among themselves, each reviewer and their majority against each reviewed
    rule, and the judges among themselves. `reviews`: decisions of the current answers (item keys, `answer_sha`,
    `reviewer`, `decision`); tables from before conditions are the baseline's."""
    results, reviews, judgements = (with_condition(frame) if len(frame.columns) else frame
                                    for frame in (results, reviews, judgements))
    rows = reviewer_rows(reviews) + review_vs_rule_rows(results, reviews) + judge_rows(judgements)
    frame = pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
    return frame.astype({"raters": "int64", "n": "int64", "agreement": "float64", "kappa": "float64",
                         "changed": "float64"})


def current_reviews(results: pd.DataFrame, reviews: pd.DataFrame) -> pd.DataFrame:
    """The decisions made for the answers `results` holds (same item keys and answer digest)."""
    if reviews.empty or results.empty:
        return reviews.iloc[0:0]
    answers = results[REVIEW_KEYS].drop_duplicates()
    return reviews.merge(answers, on=REVIEW_KEYS, how="inner")


def second_judge_rule(key: str) -> str:
    return f"{SECOND_JUDGE_PREFIX}{key}"
