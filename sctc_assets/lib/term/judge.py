"""The `judge` label source: any registered model asked the paper's correctness question (gpt_eval.py)."""

from __future__ import annotations

import re

from sctc_assets.lib.generation import stored_text

# The authors' GPT-4o-mini prompt, whitespace included, so a judge sees exactly what theirs saw.
JUDGE_TEMPLATE = """
    The question is {question}.
    The correct answer is {gt}.

    The model's answer is {response}. If the model's answer is correct, respond with 1. Otherwise, respond with 0. 
    """

_VERDICT = re.compile(r"(?<![0-9.])([01])(?![0-9]|\.[0-9])")


def judge_prompt(question: str, gt: str, response: str | None) -> str:
    return JUDGE_TEMPLATE.format(question=question, gt=gt, response="" if response is None else response)


def parse_verdict(answer: object) -> bool | None:
    """1 → True, 0 → False; the first standalone 0/1 decides; None when the judge gave neither."""
    answer = stored_text(answer)
    if not answer:
        return None
    match = _VERDICT.search(answer.strip())
    if match is None:
        return None
    return match.group(1) == "1"
