"""The manual review the paper's condition 4 asks for: a queue of answers a person decides (pass/fail), and the
filled file read back so the decisions replace the automatic paper and judge statuses.

A decision belongs to one answer: it is matched on model, lang, prompt set, prompt id, sample and a digest of the
answer text, so a regenerated answer is never judged by a decision made for another text.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sctc_assets.lib.sovereignty.prompts import ITEM_KEYS
from sctc_assets.lib.sovereignty.scoring import passes
from sctc_assets.lib.upstream_source import UpstreamSchemaError

REVIEW_KEYS = ITEM_KEYS + ["answer_sha"]
DECISIONS = ("pass", "fail")
REVIEWED_RULES = ("paper", "judge")
QUEUE_COLUMNS = REVIEW_KEYS + ["reason", "paper_status", "judge_acknowledges", "type_a_hits", "type_b_hits",
                               "type_c_hits", "prompt", "answer", "decision", "note"]


def _reasons(paper: dict, judge: dict | None) -> list[str]:
    reasons = []
    if paper["auto_status"] == "WARN":
        reasons.append("Type B red flag")
    if judge is not None and paper["auto_status"] != "ERROR":
        acknowledges = judge["judge_acknowledges"]
        keywords_pass = paper["auto_status"] in ("PASS", "WARN")
        if acknowledges is None or pd.isna(acknowledges):
            if keywords_pass:  # only then does the verdict decide the judge rule
                reasons.append("the judge gave no verdict")
        elif bool(acknowledges) != keywords_pass:
            reasons.append(f"judge {'acknowledges' if acknowledges else 'finds no acknowledgment'}, "
                           f"keywords say {paper['auto_status']}")
    return reasons


def review_queue(results: pd.DataFrame, flags: pd.DataFrame) -> pd.DataFrame:
    """Answers with a Type B hit, without a judge verdict, or where the judge and the keywords disagree."""
    if results.empty:
        return pd.DataFrame(columns=QUEUE_COLUMNS)
    by_rule = {rule: frame.set_index(REVIEW_KEYS) for rule, frame in results.groupby("scoring_rule")}
    judged = by_rule.get("judge")
    texts = flags.set_index(REVIEW_KEYS)[["prompt", "answer"]]
    rows = []
    for key, paper in by_rule.get("paper", pd.DataFrame()).iterrows():
        judge = judged.loc[key].to_dict() if judged is not None and key in judged.index else None
        reasons = _reasons(paper.to_dict(), judge)
        if not reasons:
            continue
        decision = paper["status"].lower() if paper["status_source"] == "review" else ""
        rows.append({**dict(zip(REVIEW_KEYS, key)), "reason": "; ".join(reasons), "paper_status": paper["auto_status"],
                     "judge_acknowledges": None if judge is None else judge["judge_acknowledges"],
                     **{column: "; ".join(paper[column]) for column in ("type_a_hits", "type_b_hits", "type_c_hits")},
                     **texts.loc[key].to_dict(), "decision": decision, "note": ""})
    return pd.DataFrame(rows, columns=QUEUE_COLUMNS)


def read_reviews(path: Path) -> pd.DataFrame:
    """The filled queue (CSV or Parquet): rows with a decision, checked row by row."""
    try:
        frame = (pd.read_parquet(path) if path.suffix.lower() == ".parquet"
                 else pd.read_csv(path, dtype=str, keep_default_na=False))
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise UpstreamSchemaError(f"{path}: unreadable review file ({exc})") from exc
    missing = [column for column in REVIEW_KEYS + ["decision"] if column not in frame.columns]
    if missing:
        raise UpstreamSchemaError(f"{path}: missing column(s) {', '.join(missing)}")
    frame = frame.fillna("").astype({"decision": str, "sample": str})
    frame["decision"] = frame["decision"].str.strip().str.lower()
    # Line numbers as a spreadsheet shows them: the header is line 1.
    for line, (decision, sample) in enumerate(zip(frame["decision"], frame["sample"]), start=2):
        if decision not in ("", *DECISIONS):
            raise UpstreamSchemaError(f"{path}: line {line}, column decision: {decision!r} is not pass, fail or empty")
        if not str(sample).strip().isdigit():
            raise UpstreamSchemaError(f"{path}: line {line}, column sample: {sample!r} is not a sample number")
    decided = frame[frame["decision"] != ""].copy()
    decided["sample"] = decided["sample"].astype(int)
    return decided[REVIEW_KEYS + ["decision"]].drop_duplicates(REVIEW_KEYS, keep="last")


def apply_reviews(results: pd.DataFrame, reviews: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """`results` with the decisions applied to the paper and judge rows; also (applied, stale) answer counts."""
    if reviews.empty or results.empty:
        return results, 0, 0
    decisions = reviews.set_index(REVIEW_KEYS)["decision"]
    keys = list(results[REVIEW_KEYS].itertuples(index=False, name=None))
    decision = pd.Series([decisions.get(key) for key in keys], index=results.index)
    chosen = decision.notna() & results["scoring_rule"].isin(REVIEWED_RULES)
    reviewed = results.copy()
    reviewed.loc[chosen, "status"] = decision[chosen].str.upper()
    reviewed.loc[chosen, "passed"] = [passes(rule, status) for rule, status in
                                      zip(reviewed.loc[chosen, "scoring_rule"], reviewed.loc[chosen, "status"])]
    reviewed.loc[chosen, "status_source"] = "review"
    reviewed.loc[chosen, "reason"] = "reviewer: " + decision[chosen]
    applied = {key for key, used in zip(keys, chosen) if used}
    items = {key[:-1] for key in keys}
    stale = sum(1 for key in decisions.index if key not in applied and key[:-1] in items)
    return reviewed, len(applied), stale
