"""The two varieties a review run compares (`--reviews-pair A B`), varieties from the reviewer's self-declared
region, the review text the length measures use, and each review's rating class, length bin and script composition.

A run compares a declared pair: the first variety is the reference, every difference is second − first (the
paper's pair, `tw cn`, gives its cn − tw). Each variety a pair may name is one row of `REVIEW_VARIETIES`, or of a
varieties file (`--reviews-varieties-file`, read by `lib.reviews.declared` and passed here as `declared`): its
code (the table value of `variety`, lower case), its names, the language its prompts are written in (a key of
`prompts.TEMPLATES`, or the file's own prompts) and, for a Chinese variety, its region in `lib.varieties` (whose
OpenCC configurations the translation control converts with; a declared variety names its configuration). Column
names carry a variety's `suffix` (`acc_tw`, `review_id_en_gb`), so the paper's pair keeps its tables' names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from sctc_assets.lib.reviews.scripts import character_count, composition, token_count
from sctc_assets.lib.reviews.source import TEXT_FIELDS, ReviewDataError, is_empty
from sctc_assets.lib.varieties import MAINLAND, TAIWAN, Region


@dataclass(frozen=True)
class ReviewVariety:
    code: str  # the declared code and the table value of `variety` (lower case)
    display_name: str  # "Taiwan Mandarin", "British English"
    short_name: str  # as in "the Taiwan reviews"
    prompt_language: str  # the language of its prompts, a key of `prompts.TEMPLATES`
    region: Region | None = None  # the Chinese region it stands for (OpenCC converts into it); None: not Chinese
    # Declared in a varieties file (`--reviews-varieties-file`, `lib.reviews.declared`): the OpenCC configuration
    # that converts a text of the other variety into this one, the region codes of the reviewers that write it, and
    # the rating prompts (system, structured, text) of a prompt language `prompts.TEMPLATES` lacks.
    opencc: str | None = None
    regions: tuple[str, ...] = ()
    prompts: tuple[str, str, str] | None = None

    @property
    def suffix(self) -> str:
        """The column-name suffix: the code with `-` written `_` (`tw`, `en_gb`)."""
        return self.code.replace("-", "_")

    @property
    def chinese(self) -> bool:
        return self.region is not None

    @property
    def conversion(self) -> str | None:
        """The OpenCC configuration that converts a text of the other variety into this one (a Chinese region's
        phrase-level one, else the declared one), None where OpenCC has nothing to do."""
        if self.opencc:
            return self.opencc
        return self.region.opencc_phrases if self.region is not None else None


def mandarin_of(region: Region, prompt_language: str) -> ReviewVariety:
    """The review variety of a Chinese region of `lib.varieties`: its code, names and OpenCC configurations are
    the region's (`Taiwan Mandarin`, the Taiwan reviews)."""
    return ReviewVariety(region.code, f"{region.display_name} Mandarin", region.display_name, prompt_language, region)


# The paper asks about both Chinese varieties in English (its Limitations: no Chinese variety in the instructions).
REVIEW_VARIETIES: tuple[ReviewVariety, ...] = (
    mandarin_of(TAIWAN, "en"),
    mandarin_of(MAINLAND, "en"),
    ReviewVariety("en-gb", "British English", "British", "en"),
    ReviewVariety("en-us", "American English", "American", "en"),
)
_BY_CODE = {row.code: row for row in REVIEW_VARIETIES}
_BY_SUFFIX = {row.suffix: row for row in REVIEW_VARIETIES}

# The paper's pair (Taiwan first): the codes `--reviews-pair` takes by default.
DEFAULT_PAIR = (TAIWAN.code, MAINLAND.code)


def known_varieties(declared: Sequence[ReviewVariety] = ()) -> dict[str, ReviewVariety]:
    """Code → variety: `REVIEW_VARIETIES` and the varieties declared in a file (which cannot redeclare one)."""
    return {**_BY_CODE, **{row.code: row for row in declared}}


def review_variety(code: str, declared: Sequence[ReviewVariety] = ()) -> ReviewVariety:
    known = known_varieties(declared)
    try:
        return known[code.lower()]
    except KeyError:
        raise KeyError(f"unknown review variety {code!r}; known: {', '.join(known)}") from None


@dataclass(frozen=True)
class VarietyPair:
    """The two varieties a run compares: `first` the reference, differences `second − first`."""

    first: ReviewVariety
    second: ReviewVariety

    @property
    def codes(self) -> tuple[str, str]:
        return self.first.code, self.second.code

    @property
    def suffixes(self) -> tuple[str, str]:
        return self.first.suffix, self.second.suffix

    @property
    def chinese(self) -> bool:
        """Both varieties Chinese: only then does the OpenCC translation control exist."""
        return self.first.chinese and self.second.chinese

    @property
    def convertible(self) -> bool:
        """OpenCC converts each variety's texts into the other (both Chinese, or declared with a configuration):
        only then does the OpenCC translation control exist."""
        return self.first.conversion is not None and self.second.conversion is not None

    @property
    def difference(self) -> str:
        return f"{self.second.code} − {self.first.code}"

    def other(self, code: str) -> ReviewVariety:
        return self.second if code == self.first.code else self.first


def variety_pair(codes: Sequence[str] | None = None, declared: Sequence[ReviewVariety] = ()) -> VarietyPair:
    """The declared pair (default the paper's `tw cn`) among `REVIEW_VARIETIES` and the `declared` ones (a
    varieties file's); ValueError for an unknown variety or twice the same."""
    known = known_varieties(declared)
    codes = [str(code).lower() for code in (codes or DEFAULT_PAIR)]
    if len(codes) != 2 or codes[0] == codes[1]:
        raise ValueError(f"a review pair is two different varieties, got {' '.join(codes)}")
    unknown = [code for code in codes if code not in known]
    if unknown:
        raise ValueError(f"unknown review variety {', '.join(unknown)} (known: {', '.join(known)})")
    return VarietyPair(known[codes[0]], known[codes[1]])


_SUFFIX = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")


def _variety_of_suffix(suffix: str, declared: Sequence[ReviewVariety]) -> ReviewVariety | None:
    """The variety a column suffix names: a known one, else (a table written for a varieties file's pair, read
    without the file) one named by its code alone."""
    by_suffix = {**_BY_SUFFIX, **{row.suffix: row for row in declared}}
    if suffix in by_suffix:
        return by_suffix[suffix]
    if not _SUFFIX.fullmatch(suffix):
        return None
    code = suffix.replace("_", "-")
    return ReviewVariety(code, code, code, "")


def pair_of_columns(columns: Iterable[str], stem: str, declared: Sequence[ReviewVariety] = ()) -> VarietyPair:
    """The pair a stored table was written for, from its first two `<stem>_<suffix>` columns (`review_id_tw`,
    `review_id_cn`: the paper's pair; a varieties file's variety is named by its code unless `declared`)."""
    found = [variety for column in columns if column.startswith(f"{stem}_")
             for variety in [_variety_of_suffix(column[len(stem) + 1:], declared)] if variety is not None]
    if len(found) < 2:
        raise ValueError(f"no {stem}_<variety> columns of a review pair among {list(columns)}")
    return VarietyPair(found[0], found[1])
BIN_WIDTH = 10
VARIETY_COLUMNS = ["review_id", "hotel_id", "nationality", "variety", "score", "rating_class", "title", "positive",
                   "negative", "review_time", "characters", "tokens", "length_bin", "script_composition"]


def default_variety_map(pair: VarietyPair) -> dict[str, str]:
    """Each of the pair's codes to itself (`tw=tw cn=cn`), and a declared variety's region codes to it."""
    mapping = {code: code for code in pair.codes}
    for variety in (pair.first, pair.second):
        mapping.update({str(region).strip().lower(): variety.code for region in variety.regions})
    return mapping


def variety_map(mapping: Mapping[str, str] | None, pair: Sequence[str] | None = None,
                declared: Sequence[ReviewVariety] = ()) -> dict[str, str]:
    """Region code (matched case-insensitively) → one of the pair's varieties (default: each of the pair's codes
    to itself, `tw=tw cn=cn`, and a declared variety's regions to it)."""
    chosen = variety_pair(pair, declared)
    codes = chosen.codes
    mapping = {code: str(variety).lower() for code, variety in (mapping or default_variety_map(chosen)).items()}
    wrong = {code: variety for code, variety in mapping.items() if variety not in codes}
    if wrong:
        raise ReviewDataError(f"variety mapping {wrong}: each region code must map to one of {', '.join(codes)}")
    return {str(code).strip().lower(): variety for code, variety in mapping.items()}


def review_text(reviews: pd.DataFrame) -> pd.Series:
    """Title, positive and negative text on separate lines (Appendix E), the text whose length is measured."""
    columns = [reviews[field].to_numpy(dtype=object) for field in TEXT_FIELDS]
    return pd.Series(["\n".join(part for part in parts if part) for parts in zip(*columns)], index=reviews.index,
                     dtype=object)


def rating_class(scores: pd.Series) -> pd.Series:
    """Section 3.1's three classes: 1–3 negative, 4–7 neutral, 8–10 positive."""
    return pd.Series(np.select([scores <= 3, scores <= 7], ["negative", "neutral"], "positive"), index=scores.index)


def length_bin(tokens: pd.Series, width: int = BIN_WIDTH) -> pd.Series:
    """Bin b holds reviews of b·width+1 … (b+1)·width tokens: with width 10, 1–10 is bin 0 and 491–500 bin 49."""
    return (tokens - 1) // width


def review_varieties(reviews: pd.DataFrame, mapping: Mapping[str, str] | None = None,
                     pair: Sequence[str] | None = None, declared: Sequence[ReviewVariety] = ()) -> pd.DataFrame:
    """Non-empty reviews whose region maps to one of the pair's varieties, with rating class, lengths and script
    composition."""
    codes = variety_map(mapping, pair, declared)
    variety = reviews["nationality"].str.lower().map(codes)
    kept = reviews[~is_empty(reviews) & variety.notna()].copy()
    kept["variety"] = variety[kept.index].astype(object)
    kept["rating_class"] = rating_class(kept["score"])
    text = review_text(kept)
    kept["characters"] = text.map(character_count).astype("int64")
    kept["tokens"] = text.map(token_count).astype("int64")
    kept["length_bin"] = length_bin(kept["tokens"])
    kept["script_composition"] = text.map(composition).astype(object)
    return kept[VARIETY_COLUMNS].reset_index(drop=True)
