"""Script conversion with OpenCC.

`convert` uses OpenCC's phrase-aware configurations. `convert_chars` converts one character at a time, which is
what the SC-TC-Bench misalignment rule asks for: a Mainland term "directly converted to Traditional Chinese at the
character level" is still the Mainland term.
"""

from __future__ import annotations

from functools import lru_cache

import opencc

# OpenCC configurations the platform uses: s2t/t2s (script only), s2tw/tw2s/s2hk/hk2s (script with Taiwan/Hong Kong
# character variants), s2twp/tw2sp (Taiwan/Mainland phrasing).
CONFIGS = ("s2t", "t2s", "s2tw", "tw2s", "s2hk", "hk2s", "s2twp", "tw2sp")


@lru_cache(maxsize=None)
def _converter(config: str) -> opencc.OpenCC:
    if config not in CONFIGS:
        raise ValueError(f"unknown OpenCC configuration {config!r}; expected one of {CONFIGS}")
    return opencc.OpenCC(f"{config}.json") if _needs_suffix() else opencc.OpenCC(config)


@lru_cache(maxsize=1)
def _needs_suffix() -> bool:
    try:
        opencc.OpenCC("s2t")
        return False
    except Exception:  # older bindings want the file name
        return True


def convert(text: str, config: str) -> str:
    return _converter(config).convert(text) if text else text


@lru_cache(maxsize=65536)
def _convert_char(char: str, config: str) -> str:
    return _converter(config).convert(char)


def convert_chars(text: str, config: str) -> str:
    """Convert `text` one character at a time, ignoring OpenCC's phrase tables."""
    return "".join(_convert_char(char, config) for char in text) if text else text


def to_traditional(text: str) -> str:
    return convert(text, "s2t")


def to_simplified(text: str) -> str:
    return convert(text, "t2s")
