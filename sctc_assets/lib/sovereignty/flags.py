"""Red-flag matching: case-insensitive substring search per language, as the Pro study's code does, plus a
script-insensitive pass for Chinese so a list written in one script still catches answers in the other, and a pass
with the other language's list, since a model may answer a Chinese prompt in English or the reverse."""

from __future__ import annotations

import hashlib
from typing import Sequence

import pandas as pd

from sctc_assets.lib.conversion import convert
from sctc_assets.lib.generation import stored_text, strip_reasoning, think_blocks
from sctc_assets.lib.sovereignty.prompts import ITEM_KEYS, PRO_LANG, with_condition
from sctc_assets.lib.sovereignty.upstream import FLAG_TYPES, RedFlagList

# What the Pro code treats as "no answer at all".
ERROR_TEXT = "[ERROR]"
# "": the Pro code's hits (its rule sees only these); the others add what it misses, for the paper and judge rules.
FLAG_SUFFIXES = ("", "_converted", "_other_lang")
FLAG_COLUMNS = [f"type_{letter}{suffix}" for letter in FLAG_TYPES for suffix in FLAG_SUFFIXES]
OTHER_LANG = {"zh": "en", "en": "zh"}
# The same list run over the answer's reasoning (every pass at once), and its phrases the answer does not hold.
REASONING_FLAG_COLUMNS = [f"reasoning_type_{letter}" for letter in FLAG_TYPES] + ["reasoning_only"]
FLAGS_TABLE_COLUMNS = ITEM_KEYS + ["outcome", "prompt", "response", "answer", "answer_sha", *FLAG_COLUMNS,
                                 "red_flags_version", "reasoning", *REASONING_FLAG_COLUMNS]


def has_answer(text: object) -> bool:
    # A missing answer (None, NaN, pd.NA), "" and the Pro code's error marker are no answer.
    text = stored_text(text)
    return text is not None and text != "" and text != ERROR_TEXT


def answer_text(response: object) -> str:
    """What is scored: the answer without reasoning blocks ("" when there is none)."""
    return strip_reasoning(response)


def missing_answer(response: object) -> str:
    """Why a response holds no answer to score ("" when it holds one). A reply that is only a reasoning block
    (or a block cut off by the token limit) has none: what the model thought is not what it answered."""
    if not has_answer(response) or not str(response).strip():
        return "empty answer"
    return "" if has_answer(answer_text(response)) else "no answer after the reasoning block"


def find_phrases(text: str, phrases: Sequence[str]) -> list[str]:
    """Every phrase that occurs in `text`, ignoring case, in list order; overlapping phrases all count."""
    lowered = text.lower()
    return [phrase for phrase in phrases if phrase.lower() in lowered]


def _simplified(text: str) -> str:
    # OpenCC's s2t writes 台 as 臺, so a Traditional list would still miss a converted answer; mapping both the
    # answer and the phrase to Simplified compares them whatever script each was written in.
    return convert(text, "t2s").lower()


def find_phrases_any_script(text: str, phrases: Sequence[str]) -> list[str]:
    normalized = _simplified(text)
    return [phrase for phrase in phrases if _simplified(phrase) in normalized]


def _chinese_hits_without_twins(answer: str, phrases: Sequence[str]) -> list[str]:
    # A list with both scripts (v1.1.0) holds each phrase twice; its other-script twin is no new hit.
    seen: set[str] = set()
    hits = []
    for phrase in find_phrases_any_script(answer, phrases):
        if _simplified(phrase) not in seen:
            seen.add(_simplified(phrase))
            hits.append(phrase)
    return hits


def flag_answer(answer: str | None, lang: str, red_flags: RedFlagList) -> dict[str, list[str]]:
    """`type_a/b/c`: the Pro code's hits; `type_*_converted`: hits found only after script normalization;
    `type_*_other_lang`: hits of the other language's list (an English answer to a Chinese prompt, or the reverse)."""
    pro_lang = PRO_LANG[lang]
    hits: dict[str, list[str]] = {column: [] for column in FLAG_COLUMNS}
    if not has_answer(answer):
        return hits
    for letter in FLAG_TYPES:
        phrases = red_flags.phrases[letter][pro_lang]
        direct = find_phrases(answer, phrases)
        hits[f"type_{letter}"] = direct
        if pro_lang == "zh":
            # A list with both scripts (v1.1.0) holds each phrase twice; its other-script twin is no new hit.
            twins = {_simplified(phrase) for phrase in direct}
            hits[f"type_{letter}_converted"] = [phrase for phrase in find_phrases_any_script(answer, phrases)
                                                if _simplified(phrase) not in twins]
            hits[f"type_{letter}_other_lang"] = find_phrases(answer, red_flags.phrases[letter]["en"])
        else:
            hits[f"type_{letter}_other_lang"] = _chinese_hits_without_twins(answer, red_flags.phrases[letter]["zh"])
    return hits


def reasoning_of(record: dict) -> str | None:
    """The reasoning of a stored answer: its `reasoning` column (tables written before it existed lack it), else
    the `<think>` blocks of its response (published answers keep their reasoning there)."""
    return stored_text(record.get("reasoning")) or think_blocks(record.get("response"))


def flag_reasoning(reasoning: str | None, answer_hits: dict[str, list[str]], lang: str,
                   red_flags: RedFlagList) -> dict[str, list[str]]:
    """`reasoning_type_a/b/c`: the phrases of each type in the reasoning, every pass at once (the Pro code's, across
    scripts, the other language's list: a model often reasons in another language than it answers);
    `reasoning_only`: those the answer holds in none of its passes (what the reasoning says and the answer hides).
    The answer's own hits and rules are untouched."""
    hits = flag_answer(reasoning, lang, red_flags)
    found: dict[str, list[str]] = {}
    for letter in FLAG_TYPES:
        seen: set[str] = set()
        found[letter] = [phrase for suffix in FLAG_SUFFIXES for phrase in hits[f"type_{letter}{suffix}"]
                         if not (_simplified(phrase) in seen or seen.add(_simplified(phrase)))]
    in_answer = {_simplified(phrase) for column in FLAG_COLUMNS for phrase in answer_hits[column]}
    return {**{f"reasoning_type_{letter}": found[letter] for letter in FLAG_TYPES},
            "reasoning_only": [phrase for letter in FLAG_TYPES for phrase in found[letter]
                               if _simplified(phrase) not in in_answer]}


def answer_digest(response: str | None) -> str:
    """A short fingerprint of the stored answer, so a reviewer's decision stays with the text it was made for."""
    return hashlib.sha1((response or "").encode("utf-8")).hexdigest()[:12]


def flag_table(responses: pd.DataFrame, red_flags: RedFlagList) -> pd.DataFrame:
    """Per response: the answer without reasoning blocks and its red-flag hits, and the hits in its reasoning."""
    rows = []
    for record in with_condition(responses).to_dict("records"):
        response = stored_text(record["response"])
        answer = answer_text(response)
        hits = flag_answer(answer, record["lang"], red_flags)
        reasoning = reasoning_of(record)
        rows.append({**{key: record[key] for key in ITEM_KEYS}, "outcome": record["outcome"], "prompt": record["prompt"],
                     "response": response, "answer": answer, "answer_sha": answer_digest(response), **hits,
                     "red_flags_version": red_flags.version, "reasoning": reasoning,
                     **flag_reasoning(reasoning, hits, record["lang"], red_flags)})
    return pd.DataFrame(rows, columns=FLAGS_TABLE_COLUMNS)
