"""The language varieties and regions the platform compares, one row each (pure Python, no Dagster).

Every spelling of a variety (partition key, display name, short tag, plot colour, OpenCC configuration, the word
SC-TC-Bench's file names use) and of a region (code, table value, file tag, upstream label) lives in one row here,
so that the report, the plots and the upstream readers cannot drift apart. What is specific to one paper (its
contrasts such as S−T or T−E, which variety pairs it compares, the Mainland/Taiwan columns of an upstream file)
stays with that benchmark and reads its spellings from these rows.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variety:
    code: str  # partition key and table value
    script: str
    region: str | None  # the region of the paper's contrast the variety stands for, if it stands for one
    display_name: str
    tag: str  # one-letter tag of report columns and plot ticks (S, T, E)
    colour: str
    opencc_config: str | None  # script-only OpenCC configuration converting text INTO this variety's script
    upstream_spelling: str  # the word SC-TC-Bench's file names use


@dataclass(frozen=True)
class Region:
    code: str
    display_name: str
    adjective: str
    name: str  # table value and column-name stem of the region axis (`region`, `term_mainland`, …)
    tag: str  # one-letter tag of the name task's top-name tables
    file_tag: str  # SC-TC-Bench's corpus-count file prefix
    upstream_spelling: str  # SC-TC-Bench's label in its term and name source files
    opencc_script: str  # OpenCC configuration into this region's script with its character variants
    opencc_phrases: str  # … and with its phrasing (vocabulary), as the reviews' translated copies use


SIMPLIFIED = Variety(code="zh_hans", script="simplified", region="cn", display_name="Simplified Chinese", tag="S",
                     colour="#e8857c", opencc_config="t2s", upstream_spelling="simplified")
TRADITIONAL = Variety(code="zh_hant", script="traditional", region="tw", display_name="Traditional Chinese", tag="T",
                      colour="#7cb9e8", opencc_config="s2t", upstream_spelling="traditional")
ENGLISH = Variety(code="en", script="latin", region=None, display_name="English", tag="E", colour="#9bd18b",
                  opencc_config=None, upstream_spelling="english")
VARIETIES: tuple[Variety, ...] = (SIMPLIFIED, TRADITIONAL, ENGLISH)

MAINLAND = Region(code="cn", display_name="Mainland", adjective="Mainland", name="mainland", tag="M", file_tag="mc",
                  upstream_spelling="Mainland China", opencc_script="tw2s", opencc_phrases="tw2sp")
TAIWAN = Region(code="tw", display_name="Taiwan", adjective="Taiwanese", name="taiwan", tag="T", file_tag="tw",
                upstream_spelling="Taiwan", opencc_script="s2tw", opencc_phrases="s2twp")
REGIONS: tuple[Region, ...] = (MAINLAND, TAIWAN)

_VARIETIES = {row.code: row for row in VARIETIES}
_REGIONS = {row.code: row for row in REGIONS}


def variety(code: str) -> Variety:
    try:
        return _VARIETIES[code]
    except KeyError:
        raise KeyError(f"unknown variety {code!r}; known: {', '.join(_VARIETIES)}") from None


def region(code: str) -> Region:
    try:
        return _REGIONS[code]
    except KeyError:
        raise KeyError(f"unknown region {code!r}; known: {', '.join(_REGIONS)}") from None
