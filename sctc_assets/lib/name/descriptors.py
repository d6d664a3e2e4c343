"""Tables 31–33 for any model: descriptive words an LLM extractor finds in the explanations of a model's name
answers (the paper's Appendix C.7), counted per region of the chosen name and prompting language.

- Which answers: the `main` experiment's answers the rules (`rules` extraction source) read as one valid candidate,
  whose text, once the name, spaces and punctuation are taken out, is not empty, in row order, at most
  `PAPER_EXPLANATIONS` per model × language (the paper used the first 2,000 valid `main` answers).
- The prompt: C.7's, word for word (`extraction_prompt`), one call per answer through the response cache.
- The extractor's answer (`parse_words`): a JSON array of strings, a JSON object holding one (`{"adjectives":
  [...]}`), `NA` (no words), or a list: one item per line (bullets and numbers dropped) or on one line separated by
  `,` `，` `、` `;` `；`. Quotes and end punctuation around an item are dropped; Latin words are lower-cased. An
  answer none of these read (an item longer than `MAX_WORD_CHARS`, a sentence, an empty or failed reply) is
  `unparseable`: counted in `n_unparseable`, its words never guessed.
- Top words: each explanation's distinct words counted once, ranked by count, ties by the word (code point order),
  the first `TOP_WORDS`; a word in one region's top 10 but not the other's (same model, extractor, language) is
  marked `only_in_this_region` (the paper's blue highlight).
- Top names per descriptor (Table 33's shape): for each word in either region's top 10, the `TOP_NAMES` names most
  often described with it, ties by the name.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Iterable

import numpy as np
import pandas as pd

from sctc_assets.lib.frames import empty_table
from sctc_assets.lib.generation import stored_text, strip_reasoning
from sctc_assets.lib.name.variants import PAPER_VARIANT

EXTRACTION_PROMPT = ("Please determine if there are any adjectives describing the name {name} in the provided text: "
                     "{text}. Do not include the adjectives in the name itself. If adjectives are found, extract them "
                     "and list them only. If no adjectives are present, respond with 'NA'.")
PAPER_EXPLANATIONS = 2000
EXPERIMENT = "main"
TOP_WORDS = 10
TOP_NAMES = 3
MAX_WORD_CHARS = 16
WORDS, NO_WORDS, UNPARSEABLE, FAILED = "words", "none", "unparseable", "failed"
REGIONS = ("mainland", "taiwan")

_PUNCTUATION = re.compile(r"[\s\W_]+", re.UNICODE)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.)、:：]|\(\d+\))\s*")
_SEPARATORS = re.compile(r"[,，、;；]")
_ITEM_TRIM = "\"'“”‘’「」『』《》()（）[]【】.。!！?？:：`* \t"
_NA = {"na", "n/a", "none", "无", "無", "没有", "沒有"}
_SENTENCE = re.compile(r"[。！？!?]|\.\s|\b(?:the|are|is|there|no)\b", re.IGNORECASE)


def extraction_prompt(name: str, text: str) -> str:
    """Appendix C.7's prompt for one answer."""
    return EXTRACTION_PROMPT.format(name=name, text=text)


def explains(text: object, name: str) -> bool:
    """Whether an answer says more than the chosen name: anything but the name, spaces and punctuation."""
    body = strip_reasoning(text)
    return bool(_PUNCTUATION.sub("", body.replace(name, "")))


def _item(raw: str) -> str | None:
    """One listed word, trimmed; None when it is not a word (too long, or a sentence)."""
    word = _BULLET.sub("", raw).strip(_ITEM_TRIM)
    if not word:
        return ""
    if len(word) > MAX_WORD_CHARS or _SENTENCE.search(word + " "):
        return None
    return word.lower() if word.isascii() else word


def _words(items: Iterable[object]) -> list[str] | None:
    words: list[str] = []
    for raw in items:
        if not isinstance(raw, str):
            return None
        word = _item(raw)
        if word is None:
            return None
        if word and word not in words:
            words.append(word)
    return words


def parse_words(answer: object) -> tuple[str, list[str]]:
    """(`words` | `none` | `unparseable`, the distinct words in order) of one extractor answer."""
    text = _FENCE.sub("", strip_reasoning(answer).strip()).strip()
    if not text:
        return UNPARSEABLE, []
    if text.strip(_ITEM_TRIM).lower() in _NA:
        return NO_WORDS, []
    if text[0] in "[{":
        try:
            value = json.loads(text)
        except ValueError:
            return UNPARSEABLE, []
        if isinstance(value, dict):
            lists = [item for item in value.values() if isinstance(item, list)]
            value = lists[0] if len(lists) == 1 else None
        words = _words(value) if isinstance(value, list) else None
        if words is None:
            return UNPARSEABLE, []
        return (WORDS, words) if words else (NO_WORDS, [])
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].rstrip().endswith((":", "：")):  # "Adjectives:" above the list
        lines = lines[1:]
    items = [part for line in lines for part in (_SEPARATORS.split(line) if len(lines) == 1 else [line])]
    words = _words(items)
    if words is None:
        return UNPARSEABLE, []
    return (WORDS, words) if words else (NO_WORDS, [])


EXPLANATION_KEYS = ["model", "lang", "experiment", "list_source", "list_id", "shuffle", "row"]


def explanations_to_ask(selections: pd.DataFrame, responses: pd.DataFrame, *,
                        limit: int = PAPER_EXPLANATIONS) -> pd.DataFrame:
    """The valid `main` answers (rules) that explain their choice: `EXPLANATION_KEYS + name, region, response`,
    the first `limit` in row order. Only the answers to the paper's wording (prompt variant 1) are read, as the
    selections are; a variants run's other answers share their row keys."""
    columns = EXPLANATION_KEYS + ["name", "region", "response"]
    if "prompt_variant" in responses.columns:
        responses = responses[responses["prompt_variant"] == PAPER_VARIANT]
    if selections.empty or responses.empty:
        return pd.DataFrame(columns=columns)
    chosen = selections[(selections["extraction_source"] == "rules") & (selections["status"] == "valid")
                        & (selections["experiment"] == EXPERIMENT) & selections["region"].isin(REGIONS)]
    keys = EXPLANATION_KEYS[2:]
    merged = chosen[["model", "lang", *keys, "selected_name", "region"]].merge(
        responses[keys + ["response"]], on=keys, how="inner").rename(columns={"selected_name": "name"})
    # a boolean array, not a list: an empty list would select no columns instead of no rows
    merged = merged[np.array([explains(text, name) for text, name in zip(merged["response"], merged["name"])],
                             dtype=bool)]
    merged = merged.sort_values(["list_source", "row"], kind="stable").head(limit)
    return merged[columns].reset_index(drop=True)


def parsed(extractions: pd.DataFrame) -> pd.DataFrame:
    """`extractions` with `parse_status` and `words` (a failed call: `failed`, no words)."""
    statuses, words = [], []
    for answer, outcome in zip(extractions["extractor_answer"], extractions["extractor_outcome"]):
        if outcome != "ok" or stored_text(answer) is None:
            statuses.append(FAILED)
            words.append([])
            continue
        status, found = parse_words(answer)
        statuses.append(status)
        words.append(found)
    return extractions.assign(parse_status=statuses, words=words)


WORD_COLUMNS = ["model", "extractor", "lang", "region", "rank", "word", "count", "n_explanations", "n_with_words",
                "n_no_words", "n_unparseable", "n_failed", "only_in_this_region"]
# the types of an empty table's counts and flag (text otherwise), as a table with rows has them
WORD_TYPES = {**{name: "int64" for name in ("rank", "count", "n_explanations", "n_with_words", "n_no_words",
                                             "n_unparseable", "n_failed")}, "only_in_this_region": "boolean"}


def top_words(extractions: pd.DataFrame, *, top: int = TOP_WORDS) -> pd.DataFrame:
    """Tables 31–32 for the models in `extractions` (columns of `name_explanation_extractions`)."""
    if extractions.empty:
        return empty_table(WORD_COLUMNS, WORD_TYPES)
    table = parsed(extractions)
    rows = []
    for (model, extractor, lang), frame in table.groupby(["model", "extractor", "lang"], sort=True):
        tops: dict[str, list[tuple[str, int]]] = {}
        counts_of: dict[str, dict] = {}
        for region in REGIONS:
            part = frame[frame["region"] == region]
            counts = Counter(word for words in part["words"] for word in words)
            tops[region] = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:top]
            statuses = part["parse_status"].value_counts()
            counts_of[region] = {"n_explanations": len(part), "n_with_words": int(statuses.get(WORDS, 0)),
                                 "n_no_words": int(statuses.get(NO_WORDS, 0)),
                                 "n_unparseable": int(statuses.get(UNPARSEABLE, 0)),
                                 "n_failed": int(statuses.get(FAILED, 0))}
        for region in REGIONS:
            other = {word for word, _ in tops[REGIONS[1 - REGIONS.index(region)]]}
            for rank, (word, count) in enumerate(tops[region], start=1):
                rows.append({"model": model, "extractor": extractor, "lang": lang, "region": region, "rank": rank,
                             "word": word, "count": count, **counts_of[region],
                             "only_in_this_region": word not in other})
    return pd.DataFrame(rows, columns=WORD_COLUMNS) if rows else empty_table(WORD_COLUMNS, WORD_TYPES)


NAME_COLUMNS = ["model", "extractor", "lang", "word", "rank", "name", "region", "count", "n_described"]
NAME_TYPES = {"rank": "int64", "count": "int64", "n_described": "int64"}


def top_names(extractions: pd.DataFrame, words: pd.DataFrame, *, top: int = TOP_NAMES) -> pd.DataFrame:
    """Table 33's shape: per model, extractor, language and descriptor (a word of either region's top 10), the
    `top` names most often described with it."""
    if extractions.empty or words.empty:
        return empty_table(NAME_COLUMNS, NAME_TYPES)
    table = parsed(extractions)
    rows = []
    for (model, extractor, lang), frame in table.groupby(["model", "extractor", "lang"], sort=True):
        chosen = words[(words["model"] == model) & (words["extractor"] == extractor) & (words["lang"] == lang)]
        regions = dict(zip(frame["name"], frame["region"]))
        for word in sorted(set(chosen["word"])):
            named = Counter(name for name, found in zip(frame["name"], frame["words"]) if word in found)
            ranked = sorted(named.items(), key=lambda item: (-item[1], item[0]))[:top]
            for rank, (name, count) in enumerate(ranked, start=1):
                rows.append({"model": model, "extractor": extractor, "lang": lang, "word": word, "rank": rank,
                             "name": name, "region": regions[name], "count": count,
                             "n_described": sum(named.values())})
    return pd.DataFrame(rows, columns=NAME_COLUMNS) if rows else empty_table(NAME_COLUMNS, NAME_TYPES)
