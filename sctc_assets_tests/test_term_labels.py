"""The `rules` label source on hand-made cases, and the `upstream` reproduction on hand-made and published data."""

from __future__ import annotations

import pandas as pd
import pytest

from sctc_assets.lib.term.judge import judge_prompt, parse_verdict
from sctc_assets.lib.term.labels import find_misaligned, label_answer, term_forms
from sctc_assets.lib.term.terms import split_alternatives
from sctc_assets.lib.term.upstream_labels import clean_judgements, upstream_label, upstream_misaligned


def test_alternatives_are_split_on_slash_and_trimmed():
    assert split_alternatives("門眼/ 防盗眼") == ["門眼", "防盗眼"]
    assert split_alternatives("一米线/一米等待线") == ["一米线", "一米等待线"]
    assert split_alternatives("复印件") == ["复印件"]
    assert split_alternatives(" / ") == []


@pytest.mark.parametrize(
    ("lang", "expected", "other", "answer", "label"),
    [
        # any alternative of the expected term counts
        ("zh_hans", ["一米线", "一米等待线"], ["等待線"], "一米等待线。", "correct"),
        ("zh_hant", ["影本", "複印品"], ["复印件"], "這叫做複印品", "correct"),
        # the other region's term as written
        ("zh_hant", ["滑鼠"], ["鼠标"], "鼠标", "misaligned"),
        # … or converted character by character into the prompting script
        ("zh_hant", ["箱型車"], ["面包车"], "面包車", "misaligned"),
        ("zh_hant", ["箱型車"], ["面包车"], "麵包車", "misaligned"),
        ("zh_hans", ["鼠标"], ["滑鼠"], "滑鼠", "misaligned"),
        ("zh_hant", ["樓中樓"], ["复式楼"], "復式樓", "misaligned"),
        # misaligned wins over correct when both appear
        ("zh_hant", ["滑鼠"], ["鼠标"], "滑鼠，也叫鼠標", "misaligned"),
        # the other region's term inside an expected term is not a misalignment
        ("zh_hans", ["一米线", "一米等待线"], ["等待線"], "一米等待线", "correct"),
        # the expected term in the wrong script is not correct
        ("zh_hant", ["網路購物"], ["网上购物"], "网路购物", "incorrect"),
        ("zh_hant", ["滑鼠"], ["鼠标"], "我不知道", "incorrect"),
        ("zh_hant", ["滑鼠"], ["鼠标"], None, "incorrect"),
        # reasoning blocks are not part of the answer
        ("zh_hant", ["滑鼠"], ["鼠标"], "<think>大陆叫鼠标</think>滑鼠", "correct"),
    ],
)
def test_rules_labels(lang, expected, other, answer, label):
    assert label_answer(answer, term_forms(lang, expected, other)) == label


def test_converted_form_equal_to_expected_is_not_a_misaligned_form():
    forms = term_forms("zh_hant", ["商標"], ["商标"])
    assert "商標" not in forms.misaligned
    assert label_answer("商標", forms) == "correct"
    assert label_answer("商标", forms) == "misaligned"


def test_find_misaligned_reports_forms():
    forms = term_forms("zh_hant", ["箱型車"], ["面包车"])
    assert find_misaligned("是麵包車，不是面包车", forms) == ["面包车", "麵包車"]


def test_upstream_rule_keeps_the_scripts_quirks():
    # A misaligned substring inside the correct answer counts (the project's rule does not).
    assert upstream_misaligned("等待線", "一米等待线", "zh_hans")
    # Alternatives are not trimmed: " 防盗眼" only matches with its leading space.
    assert not upstream_misaligned("門眼/ 防盗眼", "防盗眼", "zh_hans")
    assert upstream_misaligned("門眼/ 防盗眼", "門眼", "zh_hans")
    # chinese-converter's character-level conversion of the Mainland term.
    assert upstream_misaligned("面包车", "麵包車", "zh_hant")
    # Hand-written overrides for Traditional prompts.
    assert upstream_misaligned("空乘人员", "空乘", "zh_hant")
    assert not upstream_misaligned("通行证", "「大陆居民往来台湾通行证」的簡稱為「台胞证」。", "zh_hant")
    assert not upstream_misaligned("公共交通", 'print("Answer: 巴士") # 公共交通', "zh_hant")
    assert not upstream_misaligned("鼠标", float("nan"), "zh_hant")


def test_upstream_label_precedence():
    assert upstream_label(True, 1) == "misaligned"
    assert upstream_label(False, 1) == "correct"
    assert upstream_label(False, 0) == "incorrect"


def test_judgement_cleaning_reproduces_the_three_fixes():
    assert clean_judgements(["1", "10", "0"], upstream_name="llama3-70b", lang="zh_hans", variant=2, file="f") == [1, 1, 0]
    assert clean_judgements(["1. 0", "0"], upstream_name="llama3-8b", lang="zh_hant", variant=2, file="f") == [1, 0]
    assert clean_judgements(["```python\n1```", 0], upstream_name="llama3-8b", lang="zh_hans", variant=3, file="f") == [1, 0]
    with pytest.raises(ValueError, match=r"f: row 1: `correct` value '1. 0'"):
        clean_judgements(["1", "1. 0"], upstream_name="qwen", lang="zh_hans", variant=1, file="f")


def test_judge_prompt_and_verdicts():
    prompt = judge_prompt("問題", "滑鼠", "滑鼠")
    assert "The question is 問題." in prompt and "The correct answer is 滑鼠." in prompt
    assert parse_verdict("1") is True
    assert parse_verdict(" 0\n") is False
    assert parse_verdict("The answer is 1.") is True
    assert parse_verdict("1.5") is None
    assert parse_verdict("") is None


def test_upstream_labels_reproduce_the_published_term_details(sctc_source):
    """Every per-term count of the authors' response_details files (prompt 1, 11 models, both languages)."""
    from sctc_assets.lib.sctc_upstream import (PAPER_MODELS, term_details_file, term_judgement_file,
                                               term_prompt_file, term_response_file)

    other = {"zh_hans": "zh_hant", "zh_hant": "zh_hans"}
    mismatches = []
    for lang in ("zh_hans", "zh_hant"):
        details = sctc_source.read_csv(term_details_file(lang, 1))
        other_gt = sctc_source.read_csv(term_prompt_file(other[lang], 1))["gt"].tolist()
        for model in PAPER_MODELS:
            responses = sctc_source.read_csv(term_response_file(model, lang, 1, no_think=model == "ds"))["response"]
            file = term_judgement_file(model, lang, 1)
            judged = clean_judgements(sctc_source.read_csv(file)["correct"].tolist(), upstream_name=model,
                                      lang=lang, variant=1, file=file)
            labels = [upstream_label(upstream_misaligned(other_gt[row], responses[row], lang), judged[row])
                      for row in range(len(responses))]
            for term in range(110):
                counts = pd.Series(labels[term::110]).value_counts()
                ours = f"{counts.get('correct', 0)},{counts.get('misaligned', 0)},{counts.get('incorrect', 0)}"
                if ours != details[model][term]:
                    mismatches.append((lang, model, term, ours, details[model][term]))
    assert mismatches == []


def _one_term_partition(answers: list[str], verdicts: list[object]) -> tuple[pd.DataFrame, ...]:
    """Responses, prompts and judgements for term 0 (滑鼠 in Taiwan, 鼠标 in the mainland), one row per trial."""
    keys = [{"lang": "zh_hant", "prompt_variant": 1, "trial": trial, "term_id": 0} for trial in range(len(answers))]
    responses = pd.DataFrame([{**key, "model": "m", "response": answer, "outcome": "ok", "row": key["trial"]}
                              for key, answer in zip(keys, answers)])
    prompts = pd.DataFrame([{**key, "expected": ["滑鼠"], "other_region": ["鼠标"], "gt": "滑鼠", "prompt": "問題"}
                            for key in keys])
    judgements = pd.DataFrame([{**key, "judge_correct": verdict} for key, verdict in zip(keys, verdicts)])
    return responses, prompts, judgements


def test_answers_without_a_judge_verdict_are_left_out_unless_misaligned():
    from sctc_assets.lib.term.labelling import judge_labels

    answers = ["滑鼠", "滑鼠", "鼠标", "不知道", "不知道"]
    responses, prompts, judgements = _one_term_partition(answers, [True, None, None, float("nan"), False])

    labels, left_out = judge_labels(responses, prompts, judgements)

    assert left_out == 2  # trials 1 and 3: the judge failed and nothing else decides
    assert dict(zip(labels.trial, labels.label)) == {0: "correct", 2: "misaligned", 4: "incorrect"}
    assert set(labels.label_source) == {"judge"}


def test_a_short_upstream_file_is_an_error_naming_it(tmp_path):
    from sctc_assets.assets.term.labels import published_label_inputs
    from sctc_assets.lib.sctc_upstream import term_judgement_file, term_prompt_file
    from sctc_assets.lib.upstream_source import UpstreamSchemaError, UpstreamSource

    def write(relative: str, header: str, rows: int) -> None:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(header + "\n" + "1\n" * rows, encoding="utf-8")

    write(term_prompt_file("zh_hans", 1), "gt", 30)
    write(term_judgement_file("qwen", "zh_hant", 1), "correct", 30)
    source = UpstreamSource(tmp_path, origin=str(tmp_path))

    other_gt, verdicts, missing = published_label_inputs(source, "qwen", "zh_hant", {1: 30})
    assert (len(other_gt[1]), len(verdicts[1]), missing) == (30, 30, [])
    write(term_judgement_file("qwen", "zh_hant", 1), "correct", 12)
    with pytest.raises(UpstreamSchemaError, match=r"correctness_annotated_by_gpt/qwen_traditional_1\.csv: 12 rows, but"
                                                  r" the published qwen zh_hant responses of prompt variant 1 have 30"):
        published_label_inputs(source, "qwen", "zh_hant", {1: 30})


def test_labelling_each_distinct_answer_once_equals_the_row_by_row_labels():
    """`rules_labels` and `upstream_labels` label a repeated answer once; the labels equal those of each row on
    its own: missing answers (NaN from the `str` dtype, pd.NA from `string`), refusals, reasoning, two terms
    with the same answer, expected forms as lists or arrays, and an empty partition."""
    import numpy as np

    from sctc_assets.lib.generation import stored_text, strip_reasoning
    from sctc_assets.lib.term.labelling import LABEL_COLUMNS, rules_labels, upstream_labels

    answers = ["滑鼠", "滑鼠", "鼠标", None, "<think>鼠标</think>滑鼠", "鼠标", "鍵盤", None, "滑鼠", ""]
    keys = [{"lang": "zh_hant", "prompt_variant": 1 + i % 2, "trial": i // 2, "term_id": i % 2}
            for i in range(len(answers))]
    responses = pd.DataFrame([{**key, "model": "m", "response": answer, "row": i,
                               "outcome": "refusal" if i == 5 else "ok"} for i, (key, answer)
                              in enumerate(zip(keys, answers))])
    forms = {0: (["滑鼠"], ["鼠标"]), 1: (np.array(["鍵盤"], dtype=object), ["键盘", "鼠标"])}
    prompts = pd.DataFrame([{**key, "expected": forms[key["term_id"]][0], "other_region": forms[key["term_id"]][1],
                             "gt": "x", "prompt": "問題"} for key in keys])
    other_gt = {1: ["滑鼠/鼠標"] * 10, 2: ["鍵盤"] * 10}
    verdicts = {1: [1, 0] * 5, 2: [0, 1] * 5}

    def by_row(frame: pd.DataFrame) -> tuple[list, list, list]:
        merged = frame.merge(prompts, on=["lang", "prompt_variant", "trial", "term_id"])
        rules, hits, upstream = [], [], []
        for record in merged.to_dict("records"):
            refused = record["outcome"] == "refusal"
            found = term_forms(record["lang"], record["expected"], record["other_region"])
            hits.append("" if refused else ", ".join(find_misaligned(strip_reasoning(record["response"]), found)))
            rules.append("incorrect" if refused else label_answer(record["response"], found))
            variant, row = record["prompt_variant"], record["row"]
            upstream.append("incorrect" if refused else upstream_label(
                upstream_misaligned(other_gt[variant][row], stored_text(record["response"]), record["lang"]),
                verdicts[variant][row]))
        return rules, hits, upstream

    for dtype in ("str", "string", object):
        frame = responses.astype({"response": dtype})
        rules, hits, upstream = by_row(frame)
        labelled = rules_labels(frame, prompts)
        assert labelled["label"].tolist() == rules and labelled["misaligned_forms"].tolist() == hits
        assert upstream_labels(frame, other_gt, verdicts)["label"].tolist() == upstream
    assert "misaligned" in rules and "correct" in rules
    empty = rules_labels(responses.iloc[:0], prompts)
    assert empty.empty and list(empty.columns) == LABEL_COLUMNS
    assert upstream_labels(responses.iloc[:0], other_gt, verdicts).empty
