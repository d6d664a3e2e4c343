"""The rating prompts of Section 4 / Appendix C in the three input formats, and the OpenCC cross-conversion
control of Section 4.1 (each review also rewritten in the other variety, where the paper used Google Translate).

`TEMPLATES` holds one prompt set per language; a review is asked in its variety's `prompt_language`. The paper's
English set serves both Chinese varieties (its instructions are English on purpose) and English pairs; a pair in
another language brings its set in a varieties file (`lib.reviews.declared`). The control exists only for a pair
of two Chinese varieties (or two declared with an OpenCC configuration): for any other pair every prompt is an
`original` one (the model translation control, `lib.reviews.translation`, works for any pair).

`structured` keeps title, positive and negative feedback apart; `plain` joins the non-empty parts into one
paragraph; `shuffled` joins them in a random order drawn per review from the seed (the same order for a review and
its conversion, so the control compares like with like).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from sctc_assets.lib.conversion import convert
from sctc_assets.lib.reviews.source import TEXT_FIELDS
from sctc_assets.lib.reviews.varieties import ReviewVariety, VarietyPair, pair_of_columns

FORMATS = ("structured", "plain", "shuffled")

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


@dataclass(frozen=True)
class PromptTemplates:
    """One language's prompts: the system message, the `structured` prompt (fields `title`, `positive`,
    `negative`) and the `plain`/`shuffled` one (field `text`)."""

    system: str
    structured: str
    text: str


# Appendix C, verbatim.
TEMPLATES = {"en": PromptTemplates(SYSTEM_PROMPT, STRUCTURED_PROMPT, TEXT_PROMPT)}
PROMPT_COLUMNS = ["pair_id", "review_id", "variety", "version", "text_variety", "format", "part_order", "system",
                  "prompt"]


def shuffled_order(review_id: str, seed: int) -> list[str]:
    order = list(TEXT_FIELDS)
    random.Random(f"{seed}:{review_id}").shuffle(order)
    return order


def templates_for(language: str) -> PromptTemplates:
    try:
        return TEMPLATES[language]
    except KeyError:
        raise KeyError(f"no review prompts in {language!r} (prompt languages: {', '.join(TEMPLATES)})") from None


def variety_templates(variety: ReviewVariety) -> PromptTemplates:
    """The prompts a variety's reviews are asked in: those a varieties file gave it, else its prompt language's."""
    if variety.prompts is not None:
        return PromptTemplates(*variety.prompts)
    return templates_for(variety.prompt_language)


def render(fields: dict[str, str], fmt: str, order: list[str], templates: PromptTemplates = TEMPLATES["en"]) -> str:
    if fmt == "structured":
        return templates.structured.format(**{name: fields[name] for name in TEXT_FIELDS})
    parts = order if fmt == "shuffled" else list(TEXT_FIELDS)
    return templates.text.format(text=" ".join(fields[name] for name in parts if fields[name]))


def _versions(review: dict, pair: VarietyPair) -> dict[str, tuple[str, dict[str, str]]]:
    """The texts a review is asked in: as written, and for a Chinese pair converted into the other variety (OpenCC
    with that region's phrasing: tw2sp for Taiwan reviews, s2twp for Mainland ones; a declared variety's own
    configuration)."""
    fields = {name: review[name] for name in TEXT_FIELDS}
    versions = {"original": (review["variety"], fields)}
    if pair.convertible:
        other = pair.other(review["variety"])
        versions["converted"] = (other.code, {name: convert(text, other.conversion)
                                              for name, text in fields.items()})
    return versions


def review_prompts(pairs: pd.DataFrame, varieties: pd.DataFrame, *, seed: int = 0,
                   declared: Sequence[ReviewVariety] = ()) -> pd.DataFrame:
    """One row per paired review × version (original, and converted for a Chinese pair) × format, with the
    system and user prompt in the language of the review's variety; the pair is the pair table's (its varieties
    among `REVIEW_VARIETIES` and the `declared` ones)."""
    pair = pair_of_columns(pairs.columns, "review_id", declared)
    sides = [pairs[["pair_id", f"review_id_{suffix}"]].rename(columns={f"review_id_{suffix}": "review_id"})
             .assign(side=side) for side, suffix in enumerate(pair.suffixes)]
    reviews = pd.concat(sides).merge(varieties[["review_id", "variety", *TEXT_FIELDS]], on="review_id", how="left")
    templates = {variety.code: variety_templates(variety) for variety in (pair.first, pair.second)}
    rows = []
    for review in reviews.sort_values(["pair_id", "side"]).to_dict("records"):
        order = shuffled_order(review["review_id"], seed)
        chosen = templates[review["variety"]]
        for version, (text_variety, fields) in _versions(review, pair).items():
            for fmt in FORMATS:
                rows.append({"pair_id": review["pair_id"], "review_id": review["review_id"],
                             "variety": review["variety"], "version": version, "text_variety": text_variety,
                             "format": fmt, "part_order": ",".join(order if fmt == "shuffled" else TEXT_FIELDS),
                             "system": chosen.system, "prompt": render(fields, fmt, order, chosen)})
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
