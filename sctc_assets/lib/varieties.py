"""The language varieties and regions the platform compares, one row each (pure Python, no Dagster).

Every spelling of a variety (partition key, display name, short tag, plot colour, OpenCC configuration, the word
SC-TC-Bench's file names use) and of a region (code, table value, file tag, upstream label) lives in one row here,
so that the report, the plots and the upstream readers cannot drift apart. What is specific to one paper (its
contrasts such as S−T or T−E, which variety pairs it compares, the Mainland/Taiwan columns of an upstream file)
stays with that benchmark and reads its spellings from these rows.

The paper's two regions (`REGIONS`: cn, tw) are joined by Hong Kong, Macau, Singapore and Malaysia (`ALL_REGIONS`)
for item sets with more regions, and a *prompting variety* (`PromptingVariety`: zh-CN, zh-TW, zh-HK, …) is a script
plus a region cue. A YAML file (`load_catalog`, `$SCTC_VARIETIES`) declares more of both.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping


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
    tag: str | None  # one-letter tag of the name task's top-name tables (the paper's regions only)
    file_tag: str | None  # SC-TC-Bench's corpus-count file prefix (the paper's regions only)
    upstream_spelling: str | None  # SC-TC-Bench's label in its term and name source files (the paper's regions only)
    opencc_script: str  # OpenCC configuration into this region's script with its character variants
    opencc_phrases: str | None  # … and with its phrasing (vocabulary), as the reviews' translated copies use


@dataclass(frozen=True)
class PromptingVariety:
    """A script plus a region cue: what an item set's prompts are written in and whose forms count as correct."""

    code: str  # BCP 47-style tag: zh-CN, zh-TW, …
    script: str  # simplified or traditional
    region: str  # the region whose forms are the correct answers
    display_name: str
    opencc_config: str  # script-only OpenCC configuration INTO this script (never a phrasing one)
    cue: str  # one neutral sentence, written in the variety, asking for the region's usage


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
REGIONS: tuple[Region, ...] = (MAINLAND, TAIWAN)  # the paper's regions: the name task and reports iterate them

HONG_KONG = Region(code="hk", display_name="Hong Kong", adjective="Hong Kong", name="hong_kong", tag=None,
                   file_tag=None, upstream_spelling=None, opencc_script="s2hk", opencc_phrases=None)
MACAU = Region(code="mo", display_name="Macau", adjective="Macanese", name="macau", tag=None, file_tag=None,
               upstream_spelling=None, opencc_script="s2hk", opencc_phrases=None)  # OpenCC has no Macau variants
SINGAPORE = Region(code="sg", display_name="Singapore", adjective="Singaporean", name="singapore", tag=None,
                   file_tag=None, upstream_spelling=None, opencc_script="t2s", opencc_phrases=None)
MALAYSIA = Region(code="my", display_name="Malaysia", adjective="Malaysian", name="malaysia", tag=None,
                  file_tag=None, upstream_spelling=None, opencc_script="t2s", opencc_phrases=None)
ALL_REGIONS: tuple[Region, ...] = (MAINLAND, TAIWAN, HONG_KONG, MACAU, SINGAPORE, MALAYSIA)

SCRIPT_CONFIG = {"simplified": "t2s", "traditional": "s2t"}  # script-only OpenCC configuration into each script

ZH_CN = PromptingVariety(code="zh-CN", script="simplified", region="cn", display_name="Chinese (Mainland)",
                         opencc_config="t2s", cue="请使用中国大陆的用语回答。")
ZH_TW = PromptingVariety(code="zh-TW", script="traditional", region="tw", display_name="Chinese (Taiwan)",
                         opencc_config="s2t", cue="請使用臺灣的用語回答。")
ZH_HK = PromptingVariety(code="zh-HK", script="traditional", region="hk", display_name="Chinese (Hong Kong)",
                         opencc_config="s2t", cue="請使用香港的用語回答。")
ZH_MO = PromptingVariety(code="zh-MO", script="traditional", region="mo", display_name="Chinese (Macau)",
                         opencc_config="s2t", cue="請使用澳門的用語回答。")
ZH_SG = PromptingVariety(code="zh-SG", script="simplified", region="sg", display_name="Chinese (Singapore)",
                         opencc_config="t2s", cue="请使用新加坡的用语回答。")
ZH_MY = PromptingVariety(code="zh-MY", script="simplified", region="my", display_name="Chinese (Malaysia)",
                         opencc_config="t2s", cue="请使用马来西亚的用语回答。")
PROMPTING_VARIETIES: tuple[PromptingVariety, ...] = (ZH_CN, ZH_TW, ZH_HK, ZH_MO, ZH_SG, ZH_MY)
# The paper's prompting languages as prompting varieties: each script stands for its region.
PROMPTING_OF_LANG = {SIMPLIFIED.code: ZH_CN, TRADITIONAL.code: ZH_TW}

_VARIETIES = {row.code: row for row in VARIETIES}
_REGIONS = {row.code: row for row in ALL_REGIONS}
_PROMPTING = {row.code: row for row in PROMPTING_VARIETIES}


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


def prompting_variety(code: str) -> PromptingVariety:
    """A built-in prompting variety by code (zh-CN …), or the one the paper's language code stands for (zh_hans)."""
    if code in PROMPTING_OF_LANG:
        return PROMPTING_OF_LANG[code]
    try:
        return _PROMPTING[code]
    except KeyError:
        raise KeyError(f"unknown prompting variety {code!r}; known: {', '.join(_PROMPTING)}") from None


class VarietiesFileError(ValueError):
    """A varieties file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Catalog:
    """The regions and prompting varieties in use: the built-in rows plus those a varieties file declares."""

    regions: Mapping[str, Region] = field(default_factory=lambda: dict(_REGIONS))
    varieties: Mapping[str, PromptingVariety] = field(default_factory=lambda: dict(_PROMPTING))
    source: str | None = None  # the varieties file, if any

    def region(self, code: str) -> Region:
        try:
            return self.regions[code]
        except KeyError:
            raise KeyError(f"unknown region {code!r}; known: {', '.join(self.regions)}"
                           + (f" (declared in {self.source})" if self.source else "")) from None

    def variety(self, code: str | PromptingVariety) -> PromptingVariety:
        if isinstance(code, PromptingVariety):
            return code
        if code in PROMPTING_OF_LANG:
            return PROMPTING_OF_LANG[code]
        try:
            return self.varieties[code]
        except KeyError:
            raise KeyError(f"unknown prompting variety {code!r}; known: {', '.join(self.varieties)}"
                           + (f" (declared in {self.source})" if self.source else "")) from None


VARIETIES_ENV_VAR = "SCTC_VARIETIES"
_REGION_KEYS = {"code", "display_name", "adjective", "name", "opencc_script"}
_VARIETY_KEYS = {"code", "script", "region", "display_name", "cue"}
_REGION_CODE = re.compile(r"^[a-z][a-z0-9]*$")


def _text(entry: dict, key: str, where: str, file: str, *, required: bool = True) -> str | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise VarietiesFileError(f"{file}: {where}.{key}: expected a non-empty string, got {value!r}")
    return value.strip()


def _entries(document: dict, key: str, allowed: set[str], file: str) -> list[tuple[str, dict]]:
    entries = document.get(key) or []
    if not isinstance(entries, list):
        raise VarietiesFileError(f"{file}: {key}: expected a list")
    checked = []
    for index, entry in enumerate(entries):
        where = f"{key}[{index}]"
        if not isinstance(entry, dict):
            raise VarietiesFileError(f"{file}: {where}: expected a mapping")
        unknown = sorted(set(entry) - allowed)
        if unknown:
            raise VarietiesFileError(f"{file}: {where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
        checked.append((where, entry))
    return checked


def catalog_from_document(document: object, file: str) -> Catalog:
    """The built-in rows plus the `regions:` and `varieties:` a parsed varieties file declares."""
    from sctc_assets.lib.conversion import CONFIGS

    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise VarietiesFileError(f"{file}: expected a mapping with `regions:` and/or `varieties:`")
    unknown = sorted(set(document) - {"regions", "varieties"})
    if unknown:
        raise VarietiesFileError(f"{file}: unknown key(s) {unknown}; allowed: regions, varieties")
    regions, varieties = dict(_REGIONS), dict(_PROMPTING)
    for where, entry in _entries(document, "regions", _REGION_KEYS, file):
        code = _text(entry, "code", where, file)
        if not _REGION_CODE.match(code):
            raise VarietiesFileError(f"{file}: {where}.code: {code!r} must be lowercase letters and digits "
                                     "(it names the item sets' `term_<code>` column)")
        if code in regions:
            raise VarietiesFileError(f"{file}: {where}.code: region {code!r} is already declared")
        display = _text(entry, "display_name", where, file)
        script_config = _text(entry, "opencc_script", where, file, required=False) or "t2s"
        if script_config not in CONFIGS:
            raise VarietiesFileError(f"{file}: {where}.opencc_script: {script_config!r} is not one of {CONFIGS}")
        regions[code] = Region(code=code, display_name=display,
                               adjective=_text(entry, "adjective", where, file, required=False) or display,
                               name=_text(entry, "name", where, file, required=False) or code, tag=None,
                               file_tag=None, upstream_spelling=None, opencc_script=script_config,
                               opencc_phrases=None)
    for where, entry in _entries(document, "varieties", _VARIETY_KEYS, file):
        code = _text(entry, "code", where, file)
        if code in varieties or code in PROMPTING_OF_LANG:
            raise VarietiesFileError(f"{file}: {where}.code: variety {code!r} is already declared")
        script = _text(entry, "script", where, file)
        if script not in SCRIPT_CONFIG:
            raise VarietiesFileError(f"{file}: {where}.script: {script!r} is not one of {sorted(SCRIPT_CONFIG)}")
        region_code = _text(entry, "region", where, file)
        if region_code not in regions:
            raise VarietiesFileError(f"{file}: {where}.region: unknown region {region_code!r}; known: "
                                     f"{', '.join(regions)}")
        varieties[code] = PromptingVariety(code=code, script=script, region=region_code,
                                           display_name=_text(entry, "display_name", where, file),
                                           opencc_config=SCRIPT_CONFIG[script], cue=_text(entry, "cue", where, file))
    return Catalog(regions=regions, varieties=varieties, source=file)


def load_catalog(path: str | Path | None = None, *, environ: Mapping[str, str] | None = None) -> Catalog:
    """The built-in regions and varieties, plus those of the YAML file at `path` (else `$SCTC_VARIETIES`, if set).

    The file: `regions:` a list of {code, display_name, [adjective, name, opencc_script]}, `varieties:` a list of
    {code, script, region, display_name, cue}. Errors name the file and the key (`varieties[0].script`)."""
    if path is None:
        path = (os.environ if environ is None else environ).get(VARIETIES_ENV_VAR) or None
    if path is None:
        return Catalog()
    from sctc_assets.lib.yaml_files import load_yaml

    return catalog_from_document(load_yaml(path, what="varieties file", error=VarietiesFileError), str(path))


def regions_of(varieties: Iterable[PromptingVariety]) -> list[str]:
    """The regions of `varieties`, once each, in order."""
    return list(dict.fromkeys(row.region for row in varieties))
