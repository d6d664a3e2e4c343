"""The manual review the paper's condition 4 asks for: a queue of answers a person decides (pass/fail), and the
filled file read back so the decisions replace the automatic paper and judge statuses.

A decision belongs to one answer: it is matched on model, lang, prompt set, prompt id, sample, condition (a file
without that column holds decisions for the baseline `none`) and a digest of the answer text, so a regenerated
answer is never judged by a decision made for another text.

Several people may decide one answer: a `reviewer` column names who decided (a file without it, or a row with it
empty, is one unnamed reviewer, as before the column existed). One reviewer's decisions on one answer count once
(their last row). The decisions of several reviewers resolve by majority: more `pass` than `fail` passes, more `fail`
fails, and a tie leaves the answer `WARN` (not a pass) with the reason "reviewers split", for another review.

Decisions are read from two files: the queue itself, filled in place, and a separate reviews file. Where both decide
one answer differently for the same reviewer, the reviews file wins (it is the one saved on purpose) and the
disagreement is counted. A filled decision in the queue file is never overwritten when the queue is written again;
a decided row that has left the queue (another answer text, another red-flag list, a model not in this run) is kept
at its end.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sctc_assets.lib.sovereignty.prompts import BASELINE_CONDITION, ITEM_KEYS, with_condition
from sctc_assets.lib.sovereignty.scoring import passes
from sctc_assets.lib.text_files import check_utf8
from sctc_assets.lib.upstream_source import UpstreamSchemaError

REVIEW_KEYS = ITEM_KEYS + ["answer_sha"]
DECISIONS = ("pass", "fail")
REVIEWED_RULES = ("paper", "judge")
# The rules of a second (third, …) judge: `judge:<registry key>`; reviewed like `judge`.
SECOND_JUDGE_PREFIX = "judge:"
REVIEWER = "reviewer"
TIE = "tie"  # the resolved decision when the reviewers split evenly
EMPTY_REVIEWS = pd.DataFrame(columns=REVIEW_KEYS + [REVIEWER, "decision"])
QUEUE_COLUMNS = REVIEW_KEYS + ["reason", "paper_status", "judge_acknowledges", "type_a_hits", "type_b_hits",
                               "type_c_hits", "prompt", "answer", "decision", "note", REVIEWER]


def reviewed_rule(rule: str) -> bool:
    """Whether a reviewer's decision replaces this rule's status: `paper`, `judge` and every `judge:<key>`."""
    return rule in REVIEWED_RULES or rule.startswith(SECOND_JUDGE_PREFIX)


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


def _judges_split(key: tuple, judge: dict | None, second: dict[str, pd.DataFrame]) -> list[str]:
    """With a second judge: a reason when it and the first judge give opposite verdicts on the answer."""
    if judge is None or pd.isna(judge["judge_acknowledges"]):
        return []
    split = [name for name, frame in second.items() if key in frame.index
             and not pd.isna(frame.loc[key, "judge_acknowledges"])
             and bool(frame.loc[key, "judge_acknowledges"]) != bool(judge["judge_acknowledges"])]
    return [f"the judges disagree (first judge vs {', '.join(split)})"] if split else []


def review_queue(results: pd.DataFrame, flags: pd.DataFrame) -> pd.DataFrame:
    """Answers with a Type B hit, without a judge verdict, or where the judge and the keywords disagree."""
    if results.empty:
        return pd.DataFrame(columns=QUEUE_COLUMNS).astype({"sample": "int64"})
    by_rule = {rule: frame.set_index(REVIEW_KEYS) for rule, frame in with_condition(results).groupby("scoring_rule")}
    judged = by_rule.get("judge")
    second = {rule.removeprefix(SECOND_JUDGE_PREFIX): frame for rule, frame in by_rule.items()
              if rule.startswith(SECOND_JUDGE_PREFIX)}
    texts = with_condition(flags).set_index(REVIEW_KEYS)[["prompt", "answer"]]
    rows = []
    for key, paper in by_rule.get("paper", pd.DataFrame()).iterrows():
        judge = judged.loc[key].to_dict() if judged is not None and key in judged.index else None
        reasons = _reasons(paper.to_dict(), judge) + _judges_split(key, judge, second)
        if not reasons:
            continue
        # Only an unnamed reviewer's decision is shown here: named reviewers' stay in their reviews file, and a
        # decision copied into the queue would count as one more (unnamed) reviewer's when read back.
        unnamed = paper["reason"] in (_review_reason("pass", [""]), _review_reason("fail", [""]))
        decision = paper["status"].lower() if paper["status_source"] == "review" and unnamed else ""
        rows.append({**dict(zip(REVIEW_KEYS, key)), "reason": "; ".join(reasons), "paper_status": paper["auto_status"],
                     "judge_acknowledges": None if judge is None else judge["judge_acknowledges"],
                     **{column: "; ".join(paper[column]) for column in ("type_a_hits", "type_b_hits", "type_c_hits")},
                     **texts.loc[key].to_dict(), "decision": decision, "note": "", REVIEWER: ""})
    return pd.DataFrame(rows, columns=QUEUE_COLUMNS).astype({"sample": "int64"})


def _read_review_table(path: Path) -> pd.DataFrame:
    """A filled queue (CSV or Parquet), every row, checked row by row; `decision` normalized, `sample` an int."""
    try:
        frame = (pd.read_parquet(path) if path.suffix.lower() == ".parquet"
                 else pd.read_csv(path, dtype=str, keep_default_na=False))
    except UnicodeDecodeError as exc:  # a spreadsheet program saving in the system's code page (GBK, Big5)
        check_utf8(path, error=UpstreamSchemaError)
        raise UpstreamSchemaError(f"{path}: unreadable review file ({exc})") from exc
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise UpstreamSchemaError(f"{path}: unreadable review file ({exc})") from exc
    if "condition" not in frame.columns:  # a file filled before conditions existed: the baseline's decisions
        frame["condition"] = BASELINE_CONDITION
    missing = [column for column in REVIEW_KEYS + ["decision"] if column not in frame.columns]
    if missing:
        raise UpstreamSchemaError(f"{path}: missing column(s) {', '.join(missing)}")
    if REVIEWER not in frame.columns:  # a file from before several reviewers: one unnamed reviewer
        frame[REVIEWER] = ""
    frame = frame.fillna("").astype({"decision": str, "sample": str, REVIEWER: str})
    frame[REVIEWER] = frame[REVIEWER].str.strip()
    frame["decision"] = frame["decision"].str.strip().str.lower()
    # Line numbers as a spreadsheet shows them: the header is line 1.
    for line, (decision, sample) in enumerate(zip(frame["decision"], frame["sample"]), start=2):
        if decision not in ("", *DECISIONS):
            raise UpstreamSchemaError(f"{path}: line {line}, column decision: {decision!r} is not pass, fail or empty")
        if not str(sample).strip().isdigit():
            raise UpstreamSchemaError(f"{path}: line {line}, column sample: {sample!r} is not a sample number")
    frame["sample"] = frame["sample"].astype(int)
    return frame


def read_reviews(path: Path) -> pd.DataFrame:
    """The filled queue (CSV or Parquet): rows with a decision, checked row by row; one decision per answer and
    reviewer (the last row)."""
    frame = _read_review_table(path)
    decided = frame[frame["decision"] != ""]
    return (decided[REVIEW_KEYS + [REVIEWER, "decision"]].drop_duplicates(REVIEW_KEYS + [REVIEWER], keep="last")
            .reset_index(drop=True))


def merge_reviews(queue: pd.DataFrame, reviews: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The decisions of the queue file and the reviews file together (for one reviewer, the reviews file wins), and
    how many answers the two decide differently for the same reviewer."""
    keys = REVIEW_KEYS + [REVIEWER]
    both = queue.merge(reviews, on=keys, suffixes=("_queue", "_reviews"))
    conflicts = int((both["decision_queue"] != both["decision_reviews"]).sum())
    merged = pd.concat([queue, reviews], ignore_index=True).drop_duplicates(keys, keep="last")
    return merged.reset_index(drop=True), conflicts


def resolve_decisions(reviews: pd.DataFrame) -> pd.DataFrame:
    """One row per answer: the majority of its reviewers' decisions (`pass`, `fail`, or `tie` when they split
    evenly), with `n_pass`, `n_fail` and the `reviewers` who decided."""
    columns = REVIEW_KEYS + ["decision", "n_pass", "n_fail", "reviewers"]
    if reviews.empty:
        return pd.DataFrame(columns=columns)
    frame = with_condition(reviews)  # a table from before conditions: the baseline's decisions
    frame = frame if REVIEWER in frame.columns else frame.assign(**{REVIEWER: ""})
    frame = frame.drop_duplicates(REVIEW_KEYS + [REVIEWER], keep="last")
    rows = []
    for key, group in frame.groupby(REVIEW_KEYS, sort=False, dropna=False):
        n_pass = int((group["decision"] == "pass").sum())
        n_fail = int((group["decision"] == "fail").sum())
        decision = "pass" if n_pass > n_fail else "fail" if n_fail > n_pass else TIE
        rows.append({**dict(zip(REVIEW_KEYS, key)), "decision": decision, "n_pass": n_pass, "n_fail": n_fail,
                     "reviewers": list(group[REVIEWER])})
    return pd.DataFrame(rows, columns=columns)


def _review_reason(decision: str, reviewers: list[str], n_pass: int = 0, n_fail: int = 0) -> str:
    if len(reviewers) == 1:  # one reviewer, unnamed: as before several could decide
        return f"reviewer{' ' + reviewers[0] if reviewers[0] else ''}: {decision}"
    if decision == TIE:
        return f"reviewers split ({n_pass} pass, {n_fail} fail): needs another review"
    return f"reviewers: {decision} ({n_pass} pass, {n_fail} fail)"


def keep_decisions(queue: pd.DataFrame, previous_file: Path) -> pd.DataFrame:
    """`queue` with what a person wrote in the queue file it replaces: filled decisions and notes win over the new
    row's, and decided rows no longer queued are appended, so writing the queue again loses no decision."""
    if not previous_file.is_file():
        return queue
    previous = _read_review_table(previous_file).drop_duplicates(REVIEW_KEYS, keep="last").set_index(REVIEW_KEYS)
    kept = queue.copy()
    keys = list(kept[REVIEW_KEYS].itertuples(index=False, name=None))
    for column in ("decision", "note", REVIEWER):
        if column not in previous.columns:
            continue
        written = previous[column].fillna("").astype(str)
        earlier = pd.Series([written.get(key, "") for key in keys], index=kept.index)
        kept.loc[earlier != "", column] = earlier[earlier != ""]
    gone = previous[(previous["decision"] != "") & ~previous.index.isin(keys)].reset_index()
    if gone.empty:
        return kept
    gone = gone.reindex(columns=QUEUE_COLUMNS).fillna("")
    was = gone["reason"].map(lambda reason: f" (was: {reason})" if reason else "")
    gone["reason"] = "no longer queued, kept for its decision" + was
    # Back from CSV as text; the asset's Parquet copy needs one type per column.
    gone["judge_acknowledges"] = gone["judge_acknowledges"].map({"True": True, "False": False}).astype(object)
    gone["judge_acknowledges"] = gone["judge_acknowledges"].where(gone["judge_acknowledges"].notna(), None)
    return pd.concat([kept, gone], ignore_index=True)[QUEUE_COLUMNS]


def apply_reviews(results: pd.DataFrame, reviews: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """`results` with the decisions applied to the paper and judge rows (several reviewers' decisions resolved by
    `resolve_decisions`: a tie is WARN); also (applied, stale) answer counts."""
    if reviews.empty or results.empty:
        return results, 0, 0
    results = with_condition(results)
    resolved = resolve_decisions(reviews).set_index(REVIEW_KEYS)
    decisions = resolved["decision"]
    reasons = {key: _review_reason(row.decision, row.reviewers, row.n_pass, row.n_fail)
               for key, row in resolved.iterrows()}
    keys = list(results[REVIEW_KEYS].itertuples(index=False, name=None))
    decision = pd.Series([decisions.get(key) for key in keys], index=results.index)
    chosen = decision.notna() & results["scoring_rule"].map(reviewed_rule).astype(bool)
    reviewed = results.copy()
    reviewed.loc[chosen, "status"] = decision[chosen].replace({TIE: "warn"}).str.upper()
    reviewed.loc[chosen, "passed"] = [passes(rule, status) for rule, status in
                                      zip(reviewed.loc[chosen, "scoring_rule"], reviewed.loc[chosen, "status"])]
    reviewed.loc[chosen, "status_source"] = "review"
    reviewed.loc[chosen, "reason"] = [reasons[key] for key, used in zip(keys, chosen) if used]
    applied = {key for key, used in zip(keys, chosen) if used}
    items = {key[:-1] for key in keys}
    stale = sum(1 for key in decisions.index if key not in applied and key[:-1] in items)
    return reviewed, len(applied), stale
