"""The rating prompts of Section 4 / Appendix C in the three input formats, and the OpenCC cross-conversion
control of Section 4.1 (each review also rewritten in the other variety, where the paper used Google Translate).

`structured` keeps title, positive and negative feedback apart; `plain` joins the non-empty parts into one
paragraph; `shuffled` joins them in a random order drawn per review from the seed (the same order for a review and
its conversion, so the control compares like with like).
"""

from __future__ import annotations

import random

import pandas as pd

from sctc_assets.lib.conversion import convert
from sctc_assets.lib.reviews.source import TEXT_FIELDS
from sctc_assets.lib.varieties import MAINLAND, TAIWAN

FORMATS = ("structured", "plain", "shuffled")
# OpenCC with regional phrasing: Taiwan Traditional → Mainland Simplified and back.
CONVERSIONS = {TAIWAN.code: (MAINLAND.opencc_phrases, MAINLAND.code),
               MAINLAND.code: (TAIWAN.opencc_phrases, TAIWAN.code)}

SYSTEM_PROMPT = "You are a grading assistant for hotel reviews"
STRUCTURED_PROMPT = (
    "The following is a hotel review from a user. Based on the title, positive feedback, and negative feedback "
    "provided below, give an overall score from 1 to 10, where 1 is the worst and 10 is the best. DO NOT include "
    "any words in your output, just provide the number.\n\n"
    "Title: {title}\n"
    "Positive Feedback: {positive}\n"
    "Negative Feedback: {negative}\n"
    "Overall Score (1-10):"
)
TEXT_PROMPT = (
    "The following is a hotel review from a user. Based on the input review below, give an overall score from 1 "
    "to 10, where 1 is the worst and 10 is the best. DO NOT include any words in your output, just provide the "
    "number.\n\n"
    "input: {text}\n"
    "Overall Score (1-10):"
)
PROMPT_COLUMNS = ["pair_id", "review_id", "variety", "version", "text_variety", "format", "part_order", "system",
                  "prompt"]


def shuffled_order(review_id: str, seed: int) -> list[str]:
    order = list(TEXT_FIELDS)
    random.Random(f"{seed}:{review_id}").shuffle(order)
    return order


def render(fields: dict[str, str], fmt: str, order: list[str]) -> str:
    if fmt == "structured":
        return STRUCTURED_PROMPT.format(**{name: fields[name] for name in TEXT_FIELDS})
    parts = order if fmt == "shuffled" else list(TEXT_FIELDS)
    return TEXT_PROMPT.format(text=" ".join(fields[name] for name in parts if fields[name]))


def review_prompts(pairs: pd.DataFrame, varieties: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """One row per paired review × version (original, converted) × format, with the system and user prompt."""
    sides = [pairs[["pair_id", f"review_id_{variety}"]].rename(columns={f"review_id_{variety}": "review_id"})
             for variety in ("tw", "cn")]
    reviews = pd.concat(sides).merge(varieties[["review_id", "variety", *TEXT_FIELDS]], on="review_id", how="left")
    rows = []
    for review in reviews.sort_values(["pair_id", "variety"], ascending=[True, False]).to_dict("records"):
        order = shuffled_order(review["review_id"], seed)
        config, other = CONVERSIONS[review["variety"]]
        versions = {
            "original": (review["variety"], {name: review[name] for name in TEXT_FIELDS}),
            "converted": (other, {name: convert(review[name], config) for name in TEXT_FIELDS}),
        }
        for version, (text_variety, fields) in versions.items():
            for fmt in FORMATS:
                rows.append({"pair_id": review["pair_id"], "review_id": review["review_id"],
                             "variety": review["variety"], "version": version, "text_variety": text_variety,
                             "format": fmt, "part_order": ",".join(order if fmt == "shuffled" else TEXT_FIELDS),
                             "system": SYSTEM_PROMPT, "prompt": render(fields, fmt, order)})
    return pd.DataFrame(rows, columns=PROMPT_COLUMNS)


def selected_prompts(table: pd.DataFrame, fmt: str, *, max_pairs: int | None = None,
                     translation_control: bool = True) -> pd.DataFrame:
    """The prompts one model × format partition asks: the first `max_pairs` pairs (pair ids are a seeded random
    order, so this is a random sample), with or without the converted versions."""
    chosen = table[table["format"] == fmt]
    if not translation_control:
        chosen = chosen[chosen["version"] == "original"]
    if max_pairs is not None:
        chosen = chosen[chosen["pair_id"] < max_pairs]
    return chosen.reset_index(drop=True)
