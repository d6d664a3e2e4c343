"""Tables 31–33: descriptive words in the name explanations of Baichuan-2 and Qwen-1.5.

Input: `response/regional_name/explanation/{llm}_{lang}.csv` (columns `adjective`, `name`, `region`: 1 Mainland,
0 Taiwanese), the words GPT-4o-mini extracted from the first 2,000 valid `main` answers (Appendix C.7).

Two ways to count the words, side by side (`word_source`):
- `scripts`: `tab_31.py` exactly: drop 的, split on ", ", "、" or two spaces + newline, map 资质… → 最有资质,
  最好/最佳 → 最好, 最常见 → 常见, 最常見/普遍 → 常見, `Counter.most_common(10)`.
- `jieba`: the extracted text segmented by jieba 0.42.1 (`jieba.posseg`, its default dictionary and HMM) after
  folding to Simplified with OpenCC (`t2s`, which keeps every character in place, so each word is cut back out of
  the original script); descriptive words are the tokens tagged adjective (`a`, `ad`, `an`, `ag`), idiom (`i`),
  fixed expression (`l`) or status word (`z`). No hand-written splitting.
"""

from __future__ import annotations

import logging
from collections import Counter
from functools import lru_cache
from typing import Iterable

import pandas as pd

from sctc_assets.lib.conversion import convert

TALENT_WORDS = ("才华横溢", "有才华", "智慧", "才智", "才华出众")  # tab_31.py --name_example
DESCRIPTIVE_TAGS = ("a", "ad", "an", "ag", "i", "l", "z")
REGIONS = {1: "mainland", 0: "taiwan"}


def _normalise_scripts(word: str) -> str:
    if "资质" in word:
        return "最有资质"
    if "最好" in word or "最佳" in word:
        return "最好"
    if "最常见" in word:
        return "常见"
    if "最常見" in word or "普遍" in word:
        return "常見"
    return word


def scripts_words(adjective: object) -> list[str]:
    """`identify_top_adjective` of tab_31.py for one cell (NaN/None: no words)."""
    if not isinstance(adjective, str):
        return []
    text = adjective.replace("的", "")
    for separator in (", ", "、", "  \n"):
        if separator in text:
            return [_normalise_scripts(part) for part in text.split(separator)]
    return [_normalise_scripts(text)]


@lru_cache(maxsize=1)
def _posseg():
    import jieba
    import jieba.posseg

    jieba.setLogLevel(logging.WARNING)
    return jieba.posseg


def jieba_words(adjective: object) -> list[str]:
    """Descriptive words of one cell by jieba's POS tags, in the cell's own script."""
    if not isinstance(adjective, str) or not adjective.strip():
        return []
    folded = convert(adjective, "t2s")
    if len(folded) != len(adjective):  # a phrase conversion changed the length: segment the original
        folded = adjective
    words, offset = [], 0
    for pair in _posseg().cut(folded):
        start, offset = offset, offset + len(pair.word)
        if pair.flag in DESCRIPTIVE_TAGS:
            words.append(adjective[start:offset])
    return words


def top_words(explanations: pd.DataFrame, *, top: int = 10) -> pd.DataFrame:
    """Rows `model, lang, region, word_source, rank, word, count` for every model × lang × region."""
    rows = []
    for (model, lang, region), frame in explanations.groupby(["model", "lang", "region"], sort=True):
        cells = frame["adjective"].tolist()
        for source, split in (("scripts", scripts_words), ("jieba", jieba_words)):
            words = [split(cell) for cell in cells]  # each cell split once (jieba is the slow part)
            counts = Counter(word for cell_words in words for word in cell_words)
            with_words = sum(1 for cell_words in words if cell_words)
            for rank, (word, count) in enumerate(counts.most_common(top), start=1):
                rows.append({"model": model, "lang": lang, "region": REGIONS.get(int(region), str(region)),
                             "word_source": source, "rank": rank, "word": word, "count": count,
                             "n_explanations": len(frame), "n_with_words": with_words})
    return pd.DataFrame(rows)


def top_region_exclusive(table: pd.DataFrame) -> pd.DataFrame:
    """The paper's blue highlight: a word in one region's top 10 but not in the other region's (same model, lang,
    source)."""
    if table.empty:
        return table.assign(only_in_this_region=[])
    tops = table.groupby(["model", "lang", "word_source", "region"])["word"].agg(set)
    exclusive = []
    for record in table.to_dict("records"):
        other = "taiwan" if record["region"] == "mainland" else "mainland"
        other_words = tops.get((record["model"], record["lang"], record["word_source"], other), set())
        exclusive.append(record["word"] not in other_words)
    return table.assign(only_in_this_region=exclusive)


def talent_names(explanations: pd.DataFrame, words: Iterable[str] = TALENT_WORDS, *, top: int = 3) -> pd.DataFrame:
    """Table 33 as `tab_31.py --name_example`: the 3 Taiwanese names most often described with a talent/wisdom
    word (substring of the extracted text), per model × lang."""
    rows = []
    words = tuple(words)
    for (model, lang), frame in explanations.groupby(["model", "lang"], sort=True):
        taiwan = frame[(frame["region"] == 0) & frame["adjective"].map(lambda cell: isinstance(cell, str))]
        names = [name for cell, name in zip(taiwan["adjective"], taiwan["name"]) if any(w in cell for w in words)]
        for rank, (name, count) in enumerate(Counter(names).most_common(top), start=1):
            rows.append({"model": model, "lang": lang, "rank": rank, "name": name, "count": count,
                         "n_described": len(names)})
    return pd.DataFrame(rows, columns=["model", "lang", "rank", "name", "count", "n_described"])
