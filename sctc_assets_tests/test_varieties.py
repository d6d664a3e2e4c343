"""The table of varieties and regions, and the per-benchmark dicts that must agree with it."""

from __future__ import annotations

import pytest

from sctc_assets.lib import conversion, varieties
from sctc_assets.lib.varieties import (ENGLISH, MAINLAND, REGIONS, SIMPLIFIED, TAIWAN, TRADITIONAL, VARIETIES, region,
                                       variety)


def _unique(values: list) -> bool:
    return len(values) == len(set(values))


def test_each_variety_and_region_has_its_own_spellings():
    assert VARIETIES == (SIMPLIFIED, TRADITIONAL, ENGLISH)
    assert [row.code for row in VARIETIES] == ["zh_hans", "zh_hant", "en"]  # partition keys: never change them
    for field in ("code", "tag", "display_name", "colour", "upstream_spelling", "script"):
        assert _unique([getattr(row, field) for row in VARIETIES]), field
    assert REGIONS == (MAINLAND, TAIWAN)
    for field in ("code", "tag", "name", "file_tag", "display_name", "upstream_spelling", "opencc_script",
                  "opencc_phrases"):
        assert _unique([getattr(row, field) for row in REGIONS]), field


def test_a_chinese_variety_stands_for_its_region_and_converts_with_a_known_configuration():
    assert region(SIMPLIFIED.region) is MAINLAND and region(TRADITIONAL.region) is TAIWAN
    assert ENGLISH.region is None and ENGLISH.opencc_config is None
    configs = [SIMPLIFIED.opencc_config, TRADITIONAL.opencc_config]
    configs += [config for row in REGIONS for config in (row.opencc_script, row.opencc_phrases)]
    assert set(configs) <= set(conversion.CONFIGS)
    assert conversion.convert("臺灣的軟體", TRADITIONAL.opencc_config) == "臺灣的軟體"
    assert conversion.convert("臺灣的軟體", SIMPLIFIED.opencc_config) == "台湾的软体"


def test_lookups_return_the_rows_and_name_an_unknown_code():
    assert variety("zh_hant") is TRADITIONAL and region("cn") is MAINLAND
    with pytest.raises(KeyError, match=r"'zh_tw'.*zh_hans, zh_hant, en"):
        variety("zh_tw")
    with pytest.raises(KeyError, match=r"'mainland'.*cn, tw"):
        region("mainland")
    assert varieties.__doc__ and "one row" in varieties.__doc__


def test_the_report_and_plot_dicts_read_the_table():
    from sctc_assets.lib.name import plots as name_plots
    from sctc_assets.lib.report import names as report_names
    from sctc_assets.lib.report import sovereignty as report_sovereignty
    from sctc_assets.lib.sovereignty import judge
    from sctc_assets.lib.sovereignty import plots as sovereignty_plots

    display = {row.code: row.display_name for row in VARIETIES}
    colours = {row.code: row.colour for row in VARIETIES}
    assert report_names.LANGS == display and list(report_names.LANGS) == list(display)  # panel order
    assert report_names.LANG_TAGS == {"zh_hans": "S", "zh_hant": "T", "en": "E"}
    assert report_names.HEADLINE_COLUMNS == [f"Names: Mainland % ({tag})" for tag in ("S", "T", "E")]
    assert name_plots.LANG_TITLES == display
    assert judge.LANGUAGE_NAMES == display
    assert report_sovereignty.LANG_LABELS == display and report_sovereignty.LANG_COLORS == colours
    assert list(report_sovereignty.LANG_LABELS) == ["zh_hant", "zh_hans", "en"]  # the chart's bar order
    assert sovereignty_plots.COLORS == colours


def test_upstream_file_names_and_region_spellings_read_the_table():
    from sctc_assets.lib import sctc_upstream
    from sctc_assets.lib.corpus import tables
    from sctc_assets.lib.name import names
    from sctc_assets.lib.reviews import varieties as review_varieties
    from sctc_assets.lib.term import prompts

    assert sctc_upstream.UPSTREAM_LANG == {"zh_hans": "simplified", "zh_hant": "traditional", "en": "english"}
    assert sctc_upstream.term_prompt_file(TRADITIONAL.code, 2) == "prompt/regional_term/traditional_2.csv"
    assert tables.term_count_file(MAINLAND.name, "c4") == "source_data/corpus_count/regional_term/mc_c4.csv"
    assert names.REGIONS == {"Mainland China": "mainland", "Taiwan": "taiwan"}
    assert prompts.GT_COLUMN == {"zh_hans": "term_mainland", "zh_hant": "term_taiwan"}
    assert prompts.DEFINITION_COLUMN == {"zh_hans": "definition_simplified", "zh_hant": "definition_traditional"}
    assert review_varieties.DEFAULT_PAIR == ("tw", "cn")
    # the built-in Mandarin rows say nothing of their own: code, names and OpenCC configurations are the region's
    for region in (TAIWAN, MAINLAND):
        row = review_varieties.review_variety(region.code)
        assert (row.code, row.display_name, row.short_name, row.region) == (
            region.code, f"{region.display_name} Mandarin", region.display_name, region)
        assert row.conversion == region.opencc_phrases
    assert review_varieties.review_variety("tw").display_name == "Taiwan Mandarin"


def test_every_benchmarks_prompting_languages_are_varieties_of_the_table():
    from sctc_assets.benchmarks import SPECS
    from sctc_assets.benchmarks.name import LANG_TAGS as plan_tags

    codes = {row.code for row in VARIETIES}
    for name in ("term", "name", "sovereignty"):
        assert set(SPECS[name].langs) <= codes
    assert SPECS["term"].langs == ("zh_hans", "zh_hant")
    assert SPECS["sovereignty"].langs == ("zh_hant", "zh_hans", "en")
    assert SPECS["name"].langs == ("zh_hans", "zh_hant", "en")
    # The name plan's tags were once E where the report said EN; both now follow the table.
    assert plan_tags == {row.code: row.tag for row in VARIETIES}
