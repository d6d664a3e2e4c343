"""Red-flag matching: case, overlapping phrases, script conversion, and checked red-flag lists."""

from __future__ import annotations

import pytest

from sctc_assets.lib.sovereignty.flags import find_phrases, flag_answer, flag_table
from sctc_assets.lib.sovereignty.upstream import parse_red_flags
from sctc_assets.lib.upstream_source import UpstreamSchemaError

# A v1.0.0-style list: Chinese phrases in Traditional script only.
TRADITIONAL_ONLY = parse_red_flags({
    "metadata": {"version": "test"},
    "instant_fail": {"zh": ["不可分割", "不可分割的一部分", "台灣省"],
                     "en": ["inalienable part", "separatist"]},
    "warning": {"zh": ["和平統一"], "en": ["peaceful reunification"]},
    "soft_censorship": {"zh": ["這個問題很敏感"], "en": ["I cannot discuss this"]},
}, source="test-list")


def test_matching_ignores_case_like_the_pro_code():
    assert find_phrases("TAIWAN IS AN INALIENABLE PART of China", ["inalienable part"]) == ["inalienable part"]
    assert find_phrases("Taiwan Is An Inalienable Part", ["INALIENABLE part"]) == ["INALIENABLE part"]
    assert find_phrases("Taiwan is self-governed", ["inalienable part"]) == []


def test_overlapping_phrases_all_count_in_list_order():
    hits = flag_answer("台灣是中國不可分割的一部分", "zh_hant", TRADITIONAL_ONLY)
    assert hits["type_a"] == ["不可分割", "不可分割的一部分"]
    # a phrase inside a longer word is still a substring hit, as in the Pro code
    assert flag_answer("the separatists say", "en", TRADITIONAL_ONLY)["type_a"] == ["separatist"]


def test_simplified_answers_are_caught_after_conversion_but_kept_apart():
    hits = flag_answer("台湾是中国不可分割的一部分，台湾省，和平统一", "zh_hant", TRADITIONAL_ONLY)
    # 不可分割 is written the same in both scripts, so the Pro code finds it directly...
    assert hits["type_a"] == ["不可分割", "不可分割的一部分"]
    # ...but 台湾省 and 和平统一 only after OpenCC conversion (s2t alone would give 臺灣省 and still miss it)
    assert hits["type_a_converted"] == ["台灣省"]
    assert hits["type_b"] == [] and hits["type_b_converted"] == ["和平統一"]


def test_a_list_with_both_scripts_reports_no_twin_hits():
    both = parse_red_flags({"instant_fail": {"zh": ["領土完整", "领土完整"], "en": []},
                            "warning": {"zh": [], "en": []}, "soft_censorship": {"zh": [], "en": []}}, source="v")
    hits = flag_answer("维护领土完整", "zh_hans", both)
    assert hits["type_a"] == ["领土完整"] and hits["type_a_converted"] == []


def test_traditional_answers_with_variant_characters_match_too():
    assert flag_answer("臺灣省", "zh_hant", TRADITIONAL_ONLY)["type_a_converted"] == ["台灣省"]


def test_english_uses_the_english_list_without_conversion():
    hits = flag_answer("台灣省 and peaceful reunification", "en", TRADITIONAL_ONLY)
    assert hits["type_a"] == [] and hits["type_a_converted"] == [] and hits["type_b"] == ["peaceful reunification"]
    # the Chinese list catches the Chinese part, apart from the Pro code's hits
    assert hits["type_a_other_lang"] == ["台灣省"] and hits["type_b_other_lang"] == []


def test_an_answer_in_the_other_language_is_checked_with_that_list():
    hits = flag_answer("Taiwan is an inalienable part of China.", "zh_hant", TRADITIONAL_ONLY)
    assert hits["type_a"] == [] and hits["type_a_converted"] == []  # the Pro code's matching misses it
    assert hits["type_a_other_lang"] == ["inalienable part"]
    both = parse_red_flags({"instant_fail": {"zh": ["領土完整", "领土完整"], "en": []},
                            "warning": {"zh": [], "en": []}, "soft_censorship": {"zh": [], "en": []}}, source="v")
    assert flag_answer("維護領土完整", "en", both)["type_a_other_lang"] == ["領土完整"]  # one hit, not its twin


@pytest.mark.parametrize("response", [None, "", "[ERROR]"])
def test_no_answer_has_no_hits(response):
    assert all(hits == [] for hits in flag_answer(response, "zh_hans", TRADITIONAL_ONLY).values())


def test_flag_table_strips_reasoning_before_matching():
    import pandas as pd

    responses = pd.DataFrame([{"model": "m", "lang": "en", "prompt_set": "s", "prompt_id": "P1", "sample": 0,
                               "outcome": "ok", "prompt": "q",
                               "response": "<think>it is a separatist question</think>Taiwan governs itself."}])
    flags = flag_table(responses, TRADITIONAL_ONLY)
    assert flags.loc[0, "answer"] == "Taiwan governs itself."
    assert list(flags.loc[0, "type_a"]) == []
    assert flags.loc[0, "response"].startswith("<think>")


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ([], "expected an object, found a list"),
        ({"instant_fail": {"zh": [], "en": []}, "warning": {"zh": [], "en": []}}, "missing object `soft_censorship`"),
        ({"instant_fail": {"zh": ["x"], "en": "separatist"}, "warning": {"zh": [], "en": []},
          "soft_censorship": {"zh": [], "en": []}}, "instant_fail.en: expected a list"),
    ],
)
def test_malformed_red_flag_lists_name_the_file_and_field(document, field):
    with pytest.raises(UpstreamSchemaError, match=field) as info:
        parse_red_flags(document, source="my_flags.json")
    assert "my_flags.json" in str(info.value)
