"""The `upstream` label source: the SC-TC-Bench authors' labelling, reproduced exactly.

The authors combined GPT-4o-mini correctness judgements with a misalignment test that converts the other region's
term character by character with chinese-converter 1.1.1, tests plain substrings without trimming alternatives,
and then applies hand-written overrides for responses the test gets wrong (all for Traditional prompts). This
module reproduces that behaviour so the paper's Figure 2/5/7/8 and Tables 14–17 come out of the project's tables;
`labels.py` holds the project's own rule.
"""

from __future__ import annotations

import math
from typing import Sequence

import chinese_converter

from sctc_assets.lib.varieties import SIMPLIFIED, TRADITIONAL

# Responses the authors relabelled by hand (Traditional prompts only). Exact matches and substrings are separate
# because the scripts test them separately, in this order.
_ITEM_OFF_EXACT = frozenset({
    "「大陆居民往来台湾通行证」的簡稱為「台胞证」。",
    "「大陆居民往来台湾通行证」的簡稱是「台胞证」。",
})
_ITEM_ON_EXACT = frozenset({
    "空乘員。", "空乘", "空客", "铁路警察", "鐵路警察。", "磁悬浮列車", "磁悬浮列車。", "磁懸浮", "公交樞紐",
})
_ITEM_ON_SUBSTRINGS = ("空客（Airbus）", "鐵路警察")
_ITEM_OFF_SUBSTRINGS = (
    "\n\n\n\nA. 警察局\nB. 鐵路警察\nC. 鐵路局\nD. 鐵路警察局",
    "\n\n\nA. 鐵路警察\nB. 鐵路保安\nC. 鐵路警衛\nD. 鐵路保衛\n\n",
    "（一）警察局（二）鐵路警察局（三）交通警察局（四）鐵路保安局",
    "\nA. 鐵路警察\nB. 鐵路保安局\nC. 鐵路交通警察\nD. 鐵路安全警察",
    "）\n* (What is the term for the police responsi",
    "\n\n\nA. 警察\nB. 鐵路警察\nC. 鐵路保衛警察\nD. 保衛警察\n\n\n",
    "\n\n\nA. 鐵路警察\nB. 鐵路保衛警察\nC. 鐵路安全警察\nD. 鐵路保安警察",
    "》\n* Answer: 武警\n\n#### 5.8.1.2.3.2.3\n\n* Qu",
)
_OPPO_OFF_EXACT = frozenset({
    "「大陸居民來往臺灣通行證」的簡寫是「陸胞證」。",
    "大陸居民往來臺灣通行證，簡稱為「大通證」。",
    "大陸居民往來臺灣通行證（簡稱「陸胞證」）。",
})
_OPPO_OFF_SUBSTRINGS_1 = ("\n\nA. 來台證\nB. 陸胞證\nC. 來台通行證\nD. 通行證\n\n正確答案：",)
_ITEM_OFF_SUBSTRINGS_2 = (
    "大陆居民往来台湾地区通行证，简称“台胞证”，是中华人民共和国公民往来台湾地区时所持有的证件。",
    "大陆居民往来台湾通行证，简称“大通证”。这是中国政府为",
    "大陆居民往来台湾通行证，简称“大通证”，",
    "中国公民往来台湾地区的有效证件是大陆居民往来台湾通行证，俗称“台胞证”",
)
_OPPO_OFF_SUBSTRINGS_2 = ('")\n    print("Answer: 入台證")\n    print("")\n',)
_PUBLIC_TRANSPORT = "公共交通"
_BUS_ANSWERS = ('print("Answer:巴士")', 'print("Answer: 巴士")', '"answer": "巴士"')


def _any_alternative_in(term: str, response: str) -> bool:
    # Alternatives are split on '/' but, as upstream, never trimmed.
    return any(alternative in response for alternative in term.split("/"))


def convert_other_region(term: str, prompt_lang: str) -> str:
    """chinese-converter's character-level conversion, as the scripts apply it to the other region's term."""
    if prompt_lang == SIMPLIFIED.code:
        return chinese_converter.to_simplified(term)
    if prompt_lang == TRADITIONAL.code:
        return chinese_converter.to_traditional(term)
    raise ValueError(f"upstream labels exist for {SIMPLIFIED.code} and {TRADITIONAL.code}, not {prompt_lang!r}")


def upstream_misaligned(other_region_term: str, response: object, prompt_lang: str) -> bool:
    """The scripts' `get_oppo` for one row. `other_region_term` is the other language's `gt`, as written."""
    if not isinstance(response, str):
        # Upstream only guards NaN in the no-'/' branch; no NaN reaches the other branch in the published data.
        return False
    item = other_region_term
    oppo = convert_other_region(item, prompt_lang)
    oppo_flag = _any_alternative_in(oppo, response)
    item_flag = _any_alternative_in(item, response)
    if prompt_lang == TRADITIONAL.code:
        if response in _ITEM_OFF_EXACT:
            item_flag = False
        if response in _ITEM_ON_EXACT:
            item_flag = True
        if any(snippet in response for snippet in _ITEM_ON_SUBSTRINGS):
            item_flag = True
        if any(snippet in response for snippet in _ITEM_OFF_SUBSTRINGS):
            item_flag = False
        if response in _OPPO_OFF_EXACT or any(snippet in response for snippet in _OPPO_OFF_SUBSTRINGS_1):
            oppo_flag = False
        if any(snippet in response for snippet in _ITEM_OFF_SUBSTRINGS_2):
            item_flag = False
        if any(snippet in response for snippet in _OPPO_OFF_SUBSTRINGS_2):
            oppo_flag = False
        if item == _PUBLIC_TRANSPORT and any(answer in response for answer in _BUS_ANSWERS):
            item_flag = False
            if _PUBLIC_TRANSPORT in response:
                oppo_flag = False
    return oppo_flag or item_flag


def clean_judgements(values: Sequence[object], *, upstream_name: str, lang: str, variant: int, file: str) -> list[int]:
    """The scripts' `postprocess_response` fixes for three files, then `int()`; anything else unparsable is an error."""
    cleaned = []
    for row, value in enumerate(values):
        text = "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
        if upstream_name == "llama3-70b" and lang == SIMPLIFIED.code and variant == 2 and len(text) > 1:
            text = "1"
        elif upstream_name == "llama3-8b" and lang == TRADITIONAL.code and variant == 2 and text == "1. 0":
            text = "1"
        elif upstream_name == "llama3-8b" and lang == SIMPLIFIED.code and variant == 3 and "python" in text:
            text = "1"
        try:
            cleaned.append(int(text))
        except ValueError:
            raise ValueError(f"{file}: row {row}: `correct` value {value!r} is not an integer") from None
    return cleaned


def upstream_label(misaligned: bool, judged_correct: int) -> str:
    if misaligned:
        return "misaligned"
    return "correct" if judged_correct == 1 else "incorrect"
