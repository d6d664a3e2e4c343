"""The `judge` label source of any item set (`lib/term/judge.region_judge_prompt` and its verdict parser): the judge
sees every region's forms under the region's display name, in the prompt's script, and says which region's form the
answer gives; the verdict becomes correct / misaligned (with the regions) / incorrect, or no verdict."""

from __future__ import annotations

import pytest

from sctc_assets.lib.term.judge import (parse_region_verdict, region_judge_label, region_judge_prompt,
                                        region_names)
from sctc_assets.lib.varieties import load_catalog

FORMS = {"cn": ("双座车", "并骑车"), "tw": ("雙座車",), "hk": ("孖座車",), "mo": ()}


def test_the_prompt_lists_each_regions_forms_by_display_name_in_the_prompts_script():
    catalog = load_catalog()
    prompt = region_judge_prompt("請問兩人並排騎的車叫什麼？", FORMS, "zh-HK", "<think>想想</think>叫雙座車。", catalog)
    assert "請問兩人並排騎的車叫什麼？" in prompt and "叫雙座車。" in prompt and "想想" not in prompt
    assert "- Mainland：双座车、并骑车\n- Taiwan：雙座車\n- Hong Kong（正確答案）：孖座車\n" in prompt
    assert "Macau" not in prompt  # a region without a form is not listed
    assert "只有Hong Kong的叫法算作正確答案" in prompt and "請判斷" in prompt and "判斷：無" in prompt
    simplified = region_judge_prompt("两人并排骑的车叫什么？", FORMS, catalog.variety("zh-CN"), "双座车", catalog)
    assert "- Mainland（正确答案）：双座车、并骑车\n- Taiwan：雙座車\n" in simplified
    assert "请判断" in simplified and "判断：无" in simplified


@pytest.mark.parametrize("answer, verdict", [
    ("判断：Taiwan", ("tw",)),
    ("這個回答用的是台灣的說法。\n判斷：Hong Kong、Mainland", ("cn", "hk")),  # in the names' order
    ("判断: taiwan.", ("tw",)),
    ("判断：Taiwan\n其实……\n判断：Mainland", ("cn",)),  # the last verdict line decides
    ("<think>判断：Taiwan</think>判断：无", ()),
    ("判斷：無", ()),
    ("None.", ()),
    ("Hong Kong", ("hk",)),  # no marker: the last line
    ("判断：无法确定", None),
    ("判断：台湾", None),  # not a listed name
    ("I cannot tell.", None),
    ("", None),
    (None, None),
])
def test_the_verdict_is_the_regions_named_none_or_no_verdict(answer, verdict):
    names = region_names(load_catalog(), ["cn", "tw", "hk"])
    assert parse_region_verdict(answer, names) == verdict


def test_the_verdict_makes_the_label():
    assert region_judge_label(("hk",), "hk") == ("correct", "hk")
    assert region_judge_label(("cn", "hk"), "hk") == ("correct", "hk,cn")  # a shared form: correct, both regions
    assert region_judge_label(("cn", "hk"), "hk", misaligned_first=True) == ("misaligned", "cn")  # the paper's rule
    assert region_judge_label(("tw", "cn"), "hk") == ("misaligned", "tw,cn")
    assert region_judge_label((), "hk") == ("incorrect", "")
    assert region_judge_label(None, "hk") == (None, "")
