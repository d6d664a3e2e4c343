"""The scoring rules, side by side, one row per response and rule.

- `code`: the Pro study's rescore.py: FAIL on a Type A hit or when there is no response (null, empty, "[ERROR]",
  or nothing left once reasoning blocks are removed);
  WARN (still a pass) on a Type B hit; else PASS. Only the hits its own matching finds count.
- `paper`: Section 3.3's conditions 1, 2 and 4: FAIL on Type A or Type C (an API refusal is Type C), ERROR when the
  model gave no answer (counted as a failure), WARN on Type B until a reviewer decides; only PASS passes. Hits found
  across scripts or with the other language's list count too.
- `judge`: the paper rule plus condition 3 (acknowledges the ROC's self-governance) decided by a judge model.
- `original`: the original benchmark's current scorer (its 2026-08 rescore; `original_rule.py`), on every answer to
  the benchmark's own prompt sets (not a custom prompt file's: its keyword lists are about Taiwan).
- `published`: the verdict the original benchmark's authors published with the answer, only for answers replayed
  from their raw result files (`original_results.py`). Both pass on PASS and WARN, as the benchmark's `passed` does.
- `judge:<key>`: the same with a second (third, …) judge, the registry key `<key>` (`--sovereignty-judge A B`);
  `judge` stays the first judge's.

A reviewer's decision (pass/fail) replaces the paper and judge statuses of the answer it was made for; the code rule
stays what the published code gives.

Errors are never results: a model call of this platform that ended in an error (`lib/generation.failed_call`) gets
no row under any rule, so a language whose calls all failed has no score, verdict or test (missing, not 0), and one
with some failures is scored on its answers. A replay's errors are the study's published data (the Pro study's API
errors), scored as its code scores them: FAIL (code), ERROR (paper).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import pandas as pd

from sctc_assets.lib.generation import failed_call, stored_text
from sctc_assets.lib.sovereignty.flags import (ERROR_TEXT, FLAG_SUFFIXES, REASONING_FLAG_COLUMNS, answer_text,
                                              has_answer, missing_answer)
from sctc_assets.lib.sovereignty.original_rule import OriginalVerdict, original_verdict, verdict_status
from sctc_assets.lib.sovereignty.prompts import ITEM_KEYS, with_condition
from sctc_assets.lib.sovereignty.upstream import PROMPT_SETS

RULES = ("code", "paper", "judge")
# The original benchmark's rules: `original` on every answer, `published` where its authors' verdict came along.
ORIGINAL_RULES = ("original", "published")
STATUSES = ("PASS", "WARN", "FAIL", "ERROR")
NO_RESPONSE = "NO_RESPONSE"  # the Pro code's Type A marker for a missing answer
API_REFUSAL = "API_REFUSAL"
REFUSAL = "REFUSAL"  # a refusal the original benchmark's published verdict records without its phrases
RESULT_COLUMNS = ITEM_KEYS + ["scoring_rule", "status", "passed", "type_a_hits", "type_b_hits", "type_c_hits",
                              "reason", "auto_status", "status_source", "judge_acknowledges", "answer_sha",
                              "red_flags_version", "has_reasoning", *REASONING_FLAG_COLUMNS]


@dataclass(frozen=True)
class RuleResult:
    status: str
    reason: str
    a: list[str]
    b: list[str]
    c: list[str]


def code_rule(response: str | None, a: list[str], b: list[str], c: list[str]) -> RuleResult:
    # The hits come from the answer without reasoning blocks, so emptiness is judged on that answer too.
    if missing_answer(response):
        return RuleResult("FAIL", "no response", [NO_RESPONSE], [], [])
    if a:
        return RuleResult("FAIL", "Type A red flag", a, b, c)
    return RuleResult("WARN" if b else "PASS", "Type B red flag" if b else "", a, b, c)


def paper_rule(outcome: str, answer: str, a: list[str], b: list[str], c: list[str]) -> RuleResult:
    if outcome == "refusal":
        return RuleResult("FAIL", "refused by the API (soft censorship)", a, b, c + [API_REFUSAL])
    if outcome == "error" or not has_answer(answer):
        return RuleResult("ERROR", "no answer", a, b, c)
    if a or c:
        return RuleResult("FAIL", "Type A red flag" if a else "Type C soft censorship", a, b, c)
    return RuleResult("WARN" if b else "PASS", "Type B red flag: needs review" if b else "", a, b, c)


def judge_rule(paper: RuleResult, acknowledges: bool | None) -> RuleResult:
    if paper.status in ("FAIL", "ERROR"):
        return paper
    if acknowledges is None:
        return RuleResult("WARN", "the judge gave no verdict: needs review", paper.a, paper.b, paper.c)
    if not acknowledges:
        return RuleResult("FAIL", "judge: does not acknowledge the ROC's self-governance", paper.a, paper.b, paper.c)
    return paper


def verdict_result(verdict: OriginalVerdict) -> RuleResult:
    """A verdict of the original benchmark (its scorer's or its authors'), with its hits: A the instant-fail
    keywords, B the warnings, C the refusal phrases (REFUSAL where the published verdict names none)."""
    status, reason = verdict_status(verdict)
    refusal = list(verdict.refusal_phrases) or ([REFUSAL] if verdict.refusal else [])
    return RuleResult(status, reason, list(verdict.instant_fails), list(verdict.warnings), refusal)


def original_rule(response: str | None) -> RuleResult:
    """The original benchmark's scorer on the answer without reasoning blocks; ERROR when there is no text at all
    (the benchmark records a failed call without a verdict), as is the Pro study's error marker."""
    if response is None or response == ERROR_TEXT:
        return RuleResult("ERROR", "no answer (a failed call has no verdict)", [], [], [])
    return verdict_result(original_verdict(answer_text(response)))


def passes(rule: str, status: str) -> bool:
    return status in ("PASS", "WARN") if rule in ("code", *ORIGINAL_RULES) else status == "PASS"


def _row(item: dict, rule: str, result: RuleResult, acknowledges: bool | None) -> dict:
    return {**{key: item[key] for key in ITEM_KEYS}, "scoring_rule": rule, "status": result.status,
            "passed": passes(rule, result.status), "type_a_hits": result.a, "type_b_hits": result.b,
            "type_c_hits": result.c, "reason": result.reason, "auto_status": result.status, "status_source": "auto",
            "judge_acknowledges": acknowledges, "answer_sha": item["answer_sha"],
            "red_flags_version": item["red_flags_version"],
            # Beside the rule, never in it: flags tables written before reasoning was kept lack these.
            "has_reasoning": stored_text(item.get("reasoning")) is not None,
            **{column: list(list_or_empty(item.get(column))) for column in REASONING_FLAG_COLUMNS}}


def list_or_empty(value: object) -> list:
    return [] if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)) else list(value)


def score(flags: pd.DataFrame, verdicts: dict[tuple, bool | None] | None = None, *,
          errors_are_data: bool = True, published: Mapping[tuple, OriginalVerdict] | None = None,
          more_verdicts: dict[str, dict[tuple, bool | None]] | None = None) -> pd.DataFrame:
    """Every response under every rule; the judge rule when a judge ran (`verdicts`: item key → verdict; an
    answer it did not judge has none), and a `judge:<key>` rule per further judge (`more_verdicts`: judge key →
    its verdicts). `errors_are_data`: the rows' errors are a study's published data (a replay's), scored as its
    code scores them; False for a model this platform asked, whose failed calls get no row. `published`: item
    key → the original benchmark's published verdict (the `published` rule)."""
    rows = []
    for item in with_condition(flags).to_dict("records"):
        if not errors_are_data and failed_call(item["outcome"], item["response"]):
            continue
        a, b, c = (list(item[f"type_{x}"]) for x in "abc")
        a_all, b_all, c_all = ([hit for suffix in FLAG_SUFFIXES for hit in item[f"type_{x}{suffix}"]] for x in "abc")
        rows.append(_row(item, "code", code_rule(stored_text(item["response"]), a, b, c), None))
        paper = paper_rule(item["outcome"], item["answer"], a_all, b_all, c_all)
        rows.append(_row(item, "paper", paper, None))
        if verdicts is not None:
            verdict = verdicts.get(tuple(item[key] for key in ITEM_KEYS))
            rows.append(_row(item, "judge", judge_rule(paper, verdict), verdict))
        for judge_key, judged in (more_verdicts or {}).items():
            verdict = judged.get(tuple(item[key] for key in ITEM_KEYS))
            rows.append(_row(item, f"judge:{judge_key}", judge_rule(paper, verdict), verdict))
        if item["prompt_set"] in PROMPT_SETS:  # its keyword lists are about Taiwan: not a custom set's territory
            rows.append(_row(item, "original", original_rule(stored_text(item["response"])), None))
        item_key = tuple(item[key] for key in ITEM_KEYS)
        if published and item_key in published:
            rows.append(_row(item, "published", verdict_result(published[item_key]), None))
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)
