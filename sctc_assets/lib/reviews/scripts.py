"""Script composition of a review (Appendix G, Table 8) and the two length measures the study uses.

Characters are classified with maintained libraries, as the paper did: `zhon`'s CC-CEDICT character lists
(Traditional, Simplified; a character in both is shared) and CJK punctuation, `emoji` for emoji sequences, and
Unicode script properties through `regex` for bopomofo, kana and hangul; Unicode categories decide the rest.

A review's composition is the set of element classes it contains, written like Table 8: "Only Traditional",
"Traditional + English", "Simplified + Emoji + Symbol". Punctuation and numbers are listed only when a review has
nothing else, since Table 8 counts almost every review as "Only Traditional/Simplified" although nearly all of them
contain punctuation. Han characters that are the same in both scripts (好, 的) decide nothing: a review whose Chinese
consists of them alone is "Shared Chinese", a class Table 8 does not show (the paper does not say where it put them).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import emoji
import regex
from zhon import cedict
from zhon.hanzi import punctuation as CJK_PUNCTUATION

TRADITIONAL = "Traditional"
SIMPLIFIED = "Simplified"
SHARED = "Shared Chinese"
ENGLISH = "English"
EMOJI = "Emoji"
SYMBOL = "Symbol"
BOPOMOFO = "Bopomofo"
JP_KR = "JP/KR"
UNKNOWN = "Unknown"
PUNCTUATION = "Punctuation"
NUMBER = "Number"
# The order classes are listed in a composition label.
ELEMENTS = (TRADITIONAL, SIMPLIFIED, SHARED, ENGLISH, EMOJI, SYMBOL, BOPOMOFO, JP_KR, UNKNOWN, PUNCTUATION, NUMBER)
NEUTRAL = frozenset({PUNCTUATION, NUMBER})
_IGNORED = None  # whitespace, control and format characters (zero-width joiners, variation selectors)
TRADITIONAL_CHARACTERS = frozenset(cedict.traditional)
SIMPLIFIED_CHARACTERS = frozenset(cedict.simplified)
SHARED_CHARACTERS = TRADITIONAL_CHARACTERS & SIMPLIFIED_CHARACTERS

_KANA_HANGUL = regex.compile(r"[\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Hangul}]")
_BOPOMOFO = regex.compile(r"\p{scx=Bopomofo}")
_HAN = regex.compile(r"\p{Han}")
# Emoji sequences are joined by these; on their own they are not an element of the text.
_EMOJI_PARTS = frozenset("\u200d\ufe0e\ufe0f\u20e3")
# Every non-ASCII code point that occurs in an emoji: a text without any of them has no emoji.
_EMOJI_CODEPOINTS = frozenset(char for sequence in emoji.EMOJI_DATA for char in sequence if not char.isascii()) | \
    _EMOJI_PARTS
_GRAPHEME = regex.compile(r"(?!\s)\X")
# A run of ASCII letters or digits is one token (an English word, a number); anything else visible is one token
# per grapheme (one Han character, one emoji sequence, one punctuation mark).
_TOKEN = regex.compile(r"[A-Za-z0-9]+|(?!\s)\X")


@lru_cache(maxsize=None)
def char_class(char: str) -> str | None:
    """The element class of one character outside an emoji sequence (None: ignored)."""
    if char.isspace() or unicodedata.category(char) in ("Cc", "Cf", "Mn", "Me"):
        return _IGNORED
    if char in SHARED_CHARACTERS:
        return SHARED
    if char in TRADITIONAL_CHARACTERS:
        return TRADITIONAL
    if char in SIMPLIFIED_CHARACTERS:
        return SIMPLIFIED
    if char.isascii() and char.isalpha():
        return ENGLISH
    if char in CJK_PUNCTUATION or unicodedata.category(char).startswith("P"):
        return PUNCTUATION
    if unicodedata.category(char) == "Nd":
        return NUMBER
    if _BOPOMOFO.match(char) and not _HAN.match(char):
        return BOPOMOFO
    if _KANA_HANGUL.match(char) and not _HAN.match(char):
        return JP_KR
    if unicodedata.category(char).startswith("S"):
        return SYMBOL
    # Han characters missing from CC-CEDICT, fullwidth Latin letters, other scripts: the paper's "Unknown".
    return UNKNOWN


def elements(text: str) -> frozenset[str]:
    """The element classes present in `text`, before the neutral classes are dropped."""
    chars = set(text)
    found: set[str] = set()
    if not chars.isdisjoint(_EMOJI_CODEPOINTS):
        stripped = emoji.replace_emoji(text, "")
        if len(stripped) < len(text):
            found.add(EMOJI)
        chars = set(stripped)
    for char in chars:
        kind = char_class(char)
        if kind is not None:
            found.add(kind)
    if TRADITIONAL in found or SIMPLIFIED in found:
        found.discard(SHARED)
    return frozenset(found)


def composition(text: str) -> str:
    """Table 8's label for `text`: "Only X" for one class, else the classes joined with " + "; "" when empty."""
    found = elements(text)
    if found - NEUTRAL:
        found = found - NEUTRAL
    ordered = [name for name in ELEMENTS if name in found]
    if not ordered:
        return ""
    return f"Only {ordered[0]}" if len(ordered) == 1 else " + ".join(ordered)


def composition_elements(label: str) -> frozenset[str]:
    """The classes a composition label names (the inverse of `composition`)."""
    if not label:
        return frozenset()
    if label.startswith("Only "):
        return frozenset({label[len("Only "):]})
    return frozenset(label.split(" + "))


def character_count(text: str) -> int:
    """Visible characters (grapheme clusters, whitespace excluded): the short (1–49) / long (50+) split."""
    return len(_GRAPHEME.findall(text))


def token_count(text: str) -> int:
    """Tokens for the 10-token length bins and the 500-token cut: one per Han character, kana, bopomofo, emoji or
    punctuation mark, one per run of ASCII letters or digits (an English word or a number), whitespace excluded.
    The paper does not name its tokenizer; this count needs no model and, for Chinese, equals the character count
    its Appendix E bins by."""
    return len(_TOKEN.findall(text))
