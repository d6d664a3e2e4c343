"""The term prompts for any prompting variety: the paper's prompts for the default set, cue modes, skipped blanks."""

from __future__ import annotations

import dataclasses

import pytest

from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
from sctc_assets.lib.term.items import CSLD_THREE_PLACES, Concept, ItemSet, from_csld, from_sctc_upstream
from sctc_assets.lib.term.prompts import build_prompts
from sctc_assets.lib.term.terms import parse_terms
from sctc_assets.lib.term.variety_prompts import (build_variety_prompts, identical_prompts,
                                                  identical_prompts_warning, render_prompt)
from sctc_assets.lib.varieties import (PROMPTING_OF_LANG, SIMPLIFIED, TRADITIONAL, ZH_CN, ZH_HK, ZH_MO, ZH_MY, ZH_SG,
                                       ZH_TW)

ALL_SIX = (ZH_CN, ZH_TW, ZH_HK, ZH_MO, ZH_SG, ZH_MY)


def test_the_default_set_under_the_script_cue_gives_the_papers_prompts(sctc_source):
    terms = parse_terms(sctc_source.read_csv(TERMS_FILE, TERM_COLUMNS), source_name=TERMS_FILE)
    paper = build_prompts(terms)
    ours = build_variety_prompts(from_sctc_upstream(terms), [ZH_CN, ZH_TW])
    assert len(ours) == len(paper) == 2 * 3 * 15 * 110
    for lang in (SIMPLIFIED.code, TRADITIONAL.code):
        theirs = paper[paper["lang"] == lang].reset_index(drop=True)
        mine = ours[ours["variety"] == PROMPTING_OF_LANG[lang].code].reset_index(drop=True)
        assert mine["prompt"].tolist() == theirs["prompt"].tolist()
        assert mine["row"].tolist() == theirs["row"].tolist()
        assert mine["concept_id"].tolist() == theirs["term_id"].astype(str).tolist()
        assert [tuple(forms) for forms in mine["expected"]] == [tuple(forms) for forms in theirs["expected"]]


HAND = ItemSet(name="hand", regions=("cn", "tw", "hk"), concepts=(
    Concept("a", {"cn": ("甲车",), "tw": ("乙車",), "hk": ()}, definition_zh_hans="一种两人骑的车"),
    Concept("b", {"cn": ("丙袋",), "tw": ("丁袋",), "hk": ("戊袋",)}, definition_zh_hant="用來裝書的袋"),
))


def test_cue_modes_and_script_only_conversion():
    script = build_variety_prompts(HAND, [ZH_TW, ZH_HK], trials=1, variants=[1])
    # Concept a has no Hong Kong form: not asked in zh-HK. Definitions are converted by script only.
    assert script[["variety", "concept_id"]].values.tolist() == [["zh-TW", "a"], ["zh-TW", "b"], ["zh-HK", "b"]]
    assert script["prompt"].iloc[0] == "定義為'一種兩人騎的車'的是什麼，請用一個詞回答？"
    assert script["prompt"].iloc[1] == script["prompt"].iloc[2]  # the script is the only cue
    stated = build_variety_prompts(HAND, [ZH_TW, ZH_HK], trials=1, variants=[2], cue="stated")
    assert stated["prompt"].iloc[0] == ZH_TW.cue + "请问'一种两人骑的车'是指什么？请用一个词回答"
    assert stated["prompt"].iloc[2] == ZH_HK.cue + "请问'用来装书的袋'是指什么？请用一个词回答"
    both = render_prompt(ZH_HK, 3, "用來裝書的袋", cue="both")
    assert both == ZH_HK.cue + "請用一個詞回答，什麼被定義為'用來裝書的袋'？"
    assert [tuple(forms) for forms in stated["expected"]] == [("乙車",), ("丁袋",), ("戊袋",)]


def test_varieties_with_identical_prompts_are_named():
    assert identical_prompts(ALL_SIX) == [("zh-CN", "zh-SG", "zh-MY"), ("zh-TW", "zh-HK", "zh-MO")]
    assert identical_prompts(ALL_SIX, cue="stated") == []
    assert identical_prompts(ALL_SIX, cue="both") == []
    assert identical_prompts([ZH_CN, ZH_TW]) == []
    warning = identical_prompts_warning([ZH_CN, ZH_SG])
    assert len(warning) == 1 and "zh-CN, zh-SG" in warning[0] and "`script`" in warning[0]


def test_unknown_cue_mode_is_refused():
    with pytest.raises(ValueError, match="unknown region cue mode 'loud'"):
        build_variety_prompts(HAND, [ZH_TW], cue="loud")


def test_the_csld_list_is_asked_per_region_it_has_forms_for(csld_location):
    three = from_csld(csld_location / CSLD_THREE_PLACES)
    with pytest.raises(ValueError, match="item set .*: concept '1' has no definition .*sctc terms define"):
        build_variety_prompts(three, [ZH_TW], trials=1, variants=[1])
    # The lists carry no definitions: a stand-in for drafted ones.
    three = dataclasses.replace(three, concepts=tuple(dataclasses.replace(concept, definition_zh_hant=f"定義{index}")
                                                      for index, concept in enumerate(three.concepts)))
    prompts = build_variety_prompts(three, [ZH_CN, ZH_TW, ZH_HK, ZH_MO], trials=1, variants=[1])
    counts = prompts.groupby("variety").size().to_dict()
    assert counts == {"zh-CN": three.count_forms("cn"), "zh-TW": three.count_forms("tw"),
                      "zh-HK": three.count_forms("hk"), "zh-MO": three.count_forms("mo")}
    assert (counts["zh-HK"], counts["zh-MO"]) == (215, 182)
