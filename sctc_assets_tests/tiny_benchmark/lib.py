"""The tiny benchmark's library: its questions and how an answer is scored (no Dagster)."""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.varieties import SIMPLIFIED, TRADITIONAL

QUESTIONS = {
    SIMPLIFIED.code: [("天空是什么颜色？", "蓝"), ("草是什么颜色？", "绿"), ("雪是什么颜色？", "白")],
    TRADITIONAL.code: [("天空是什麼顏色？", "藍"), ("草是什麼顏色？", "綠"), ("雪是什麼顏色？", "白")],
}


def prompt_table() -> pd.DataFrame:
    return pd.DataFrame([{"lang": lang, "row": row, "prompt": prompt, "expected": expected}
                         for lang, items in QUESTIONS.items() for row, (prompt, expected) in enumerate(items)])


def requests(prompts: pd.DataFrame) -> list[GenerationRequest]:
    return [GenerationRequest.user(prompt, benchmark="tiny", lang=lang, row=int(row))
            for prompt, lang, row in zip(prompts["prompt"], prompts["lang"], prompts["row"])]


def scores(responses: pd.DataFrame, prompts: pd.DataFrame) -> pd.DataFrame:
    joined = responses.merge(prompts[["lang", "row", "expected"]], on=["lang", "row"])
    right = [isinstance(answer, str) and expected in answer
             for answer, expected in zip(joined["response"], joined["expected"])]
    return joined.assign(right=right)[["model", "lang", "row", "expected", "response", "right"]]


def summary(scored: pd.DataFrame) -> pd.DataFrame:
    grouped = scored.groupby(["model", "lang"], as_index=False).agg(n=("right", "size"), share_right=("right", "mean"))
    return grouped.astype({"n": "int64", "share_right": "float64"})
