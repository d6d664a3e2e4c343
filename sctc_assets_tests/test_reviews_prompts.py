"""Appendix C's prompts in the three formats, the OpenCC control, the reduced-run selection and answer parsing."""

from __future__ import annotations

import pandas as pd
import pytest

from sctc_assets.lib.conversion import convert
from sctc_assets.lib.reviews.prompts import FORMATS, review_prompts, selected_prompts, shuffled_order
from sctc_assets.lib.reviews.scoring import parse_score

INSTRUCTION = ("The following is a hotel review from a user. Based on the {what}, give an overall score from 1 to "
               "10, where 1 is the worst and 10 is the best. DO NOT include any words in your output, just provide "
               "the number.\n\n")
VARIETIES = pd.DataFrame({
    "review_id": ["t1", "c1"], "variety": ["tw", "cn"],
    "title": ["", "性价比高"], "positive": ["櫃檯很友善，還幫我們叫計程車", "出租车很方便"], "negative": ["冷氣很吵", ""],
})
PAIRS = pd.DataFrame({"pair_id": [0], "review_id_tw": ["t1"], "review_id_cn": ["c1"]})


def _prompt(table, review_id, version, fmt):
    row = table[(table.review_id == review_id) & (table.version == version) & (table.format == fmt)]
    assert len(row) == 1
    return row.iloc[0]


def test_the_paper_prompts_verbatim():
    table = review_prompts(PAIRS, VARIETIES)
    assert len(table) == 2 * 2 * 3 and set(table.system) == {"You are a grading assistant for hotel reviews"}
    structured = INSTRUCTION.format(what="title, positive feedback, and negative feedback provided below")
    plain = INSTRUCTION.format(what="input review below")
    assert _prompt(table, "t1", "original", "structured").prompt == structured + (
        "Title: \nPositive Feedback: 櫃檯很友善，還幫我們叫計程車\nNegative Feedback: 冷氣很吵\nOverall Score (1-10):")
    assert _prompt(table, "c1", "original", "plain").prompt == plain + (
        "input: 性价比高 出租车很方便\nOverall Score (1-10):")
    order = shuffled_order("t1", 0)
    parts = {"title": "", "positive": "櫃檯很友善，還幫我們叫計程車", "negative": "冷氣很吵"}
    shuffled = _prompt(table, "t1", "original", "shuffled")
    assert shuffled.part_order == ",".join(order) and sorted(order) == ["negative", "positive", "title"]
    assert shuffled.prompt == plain + "input: " + " ".join(parts[p] for p in order if parts[p]) + "\nOverall Score (1-10):"


def test_the_conversion_control_rewrites_each_review_in_the_other_variety():
    table = review_prompts(PAIRS, VARIETIES)
    tw = _prompt(table, "t1", "converted", "structured")
    cn = _prompt(table, "c1", "converted", "structured")
    assert (tw.variety, tw.text_variety, cn.variety, cn.text_variety) == ("tw", "cn", "cn", "tw")
    assert f"Positive Feedback: {convert('櫃檯很友善，還幫我們叫計程車', 'tw2sp')}\n" in tw.prompt
    assert "出租车" in convert("計程車", "tw2sp") and "計程車" in convert("出租车", "s2twp")  # phrasing, not only script
    assert f"input: {convert('性价比高', 's2twp')} {convert('出租车很方便', 's2twp')}\n" in \
        _prompt(table, "c1", "converted", "plain").prompt
    # a review and its conversion share the shuffled order
    assert tw.part_order == _prompt(table, "t1", "original", "structured").part_order


def test_the_shuffled_order_is_seeded_per_review():
    orders = {tuple(shuffled_order(f"r{i}", 0)) for i in range(50)}
    assert len(orders) == 6  # every permutation of the three parts occurs
    assert shuffled_order("r1", 3) == shuffled_order("r1", 3)


def test_a_reduced_run_takes_the_first_pairs_and_can_skip_the_control():
    table = pd.DataFrame({"pair_id": [0, 0, 1, 1, 2], "format": ["plain"] * 4 + ["structured"],
                          "version": ["original", "converted"] * 2 + ["original"]})
    assert len(selected_prompts(table, "plain")) == 4
    assert selected_prompts(table, "plain", max_pairs=1).pair_id.tolist() == [0, 0]
    assert selected_prompts(table, "plain", translation_control=False).version.tolist() == ["original", "original"]
    assert FORMATS == ("structured", "plain", "shuffled")


@pytest.mark.parametrize("answer, score", [
    ("8", 8), (" 10\n", 10), ("7.", 7), ("9/10", 9), ("6.0", 6), ("８", 8), ("<think>hmm</think>5", 5),
    ("0", None), ("11", None), ("8.5", None), ("The score is 8", None), ("8 分", None), ("", None), (None, None),
    ("7-8", None),
])
def test_only_the_number_alone_is_a_valid_answer(answer, score):
    assert parse_score(answer) == score
