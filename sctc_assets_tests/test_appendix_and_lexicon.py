"""The `lexicon` term label source, Tables 19/20/31–33, on hand-made cases and on the published data."""

from __future__ import annotations

import pandas as pd
import pytest

from sctc_assets.lib.name import explanations
from sctc_assets.lib.term import lexicon_labels as lx


@pytest.mark.parametrize(("response", "answer"), [
    ("空客", "空客"),
    ("這個描述符合「轉運站」。", "转运站"),
    ('",\n    "answer": "巴士",\n    "options": ["巴士", "火車"]', "巴士"),
    ("。\n\nA. 桃子\nB. 榴莲\nC. 菠萝\n\n答案：C. 菠萝\n解释：…", "菠萝"),
    ("出租车。", "出租车"),
    ("<think>大陆叫鼠标</think>滑鼠", "滑鼠"),
    (float("nan"), ""),
    (None, ""),
])
def test_answer_extraction(response, answer):
    assert lx.extract_answer(lx.answer_text(response)) == answer


def test_abbreviation_is_a_non_contiguous_subsequence():
    assert lx.is_abbreviation("空客", "空中客车") and lx.is_abbreviation("网购", "网上购物")
    assert not lx.is_abbreviation("短裤", "紧身短裤")  # a contiguous piece names a broader thing
    assert not lx.is_abbreviation("客", "空中客车") and not lx.is_abbreviation("空中客车", "空中客车")


def test_lexicon_votes_without_the_labelled_models_own_verdicts():
    labelled = pd.DataFrame({
        "model": ["a", "b", "c", "c"], "lang": "zh_hans", "term_id": 7,
        "response": ["辅警", "辅警。", "辅警", "辅警"], "label": ["correct", "correct", "incorrect", "incorrect"]})
    lexicon = lx.build_lexicon(labelled)
    rows = pd.DataFrame({"lang": ["zh_hans"], "term_id": [7], "response": ["辅警"], "expected": [["协警"]]})
    # for model c the two other models (a, b) vote correct; c's own "incorrect" is never used
    assert lx.label_frame(rows, ["incorrect"], lexicon, exclude_model="c")["label"].tolist() == ["correct"]
    # a lexicon of a and c: for model a only c is left, below min_models, so the fixed rules decide
    decided = lx.label_frame(rows, ["incorrect"], lx.build_lexicon(labelled[labelled.model != "b"]),
                             exclude_model="a")
    assert decided["label"].tolist() == ["incorrect"] and decided["decided_by"].tolist() == ["rule"]
    # the rules' misaligned verdict stands without lexicon support
    assert lx.label_frame(rows, ["misaligned"], None, exclude_model=None)["label"].tolist() == ["misaligned"]


def test_scripts_word_splitting_is_tab_31s():
    assert explanations.scripts_words("优雅的, 才智, 资质最好的") == ["优雅", "才智", "最有资质"]
    assert explanations.scripts_words("美丽、最佳") == ["美丽", "最好"]
    assert explanations.scripts_words("最常見的") == ["常見"]
    assert explanations.scripts_words(float("nan")) == []


def test_jieba_keeps_tagged_descriptive_words_in_the_original_script():
    assert explanations.jieba_words("才華出眾") == ["才華出眾"]  # idiom, cut out of the Traditional text
    assert "优雅" in explanations.jieba_words("优雅, 良好教育")
    assert "教育" not in explanations.jieba_words("优雅, 良好教育")


def test_table_19_equals_the_paper(sctc_source):
    from sctc_assets.lib.term.incorrect_types import incorrect_type_file, incorrect_type_shares

    paper = {("qwen", "zh_hans"): (51.02, 48.98), ("qwen", "zh_hant"): (40.74, 59.26),
             ("ds", "zh_hant"): (32.26, 67.74), ("llama3-70b", "zh_hans"): (75.31, 24.69),
             ("llama3-8b", "zh_hans"): (74.07, 25.93), ("llama3-8b", "zh_hant"): (42.31, 57.69)}
    for (model, lang), cells in paper.items():
        file = incorrect_type_file(model, lang)
        row = incorrect_type_shares(model, lang, sctc_source.read_csv(file), source_name=file)
        assert (round(row["pct_entirely_wrong"], 2), round(row["pct_uncommon_usage"], 2)) == cells


def test_invalid_classes_against_the_human_annotations(sctc_source):
    from sctc_assets.lib.name.invalid_validation import ANNOTATED_MODELS, annotation_file, class_agreement

    names = sctc_source.read_csv("source_data/regional_name_and_characteristics.csv")["name"].tolist()
    tables = {model: class_agreement(model, sctc_source.read_csv(annotation_file(model)), names, source_name=model)
              .set_index("human_class") for model in ANNOTATED_MODELS}
    # Table 20's human breakdown
    assert tables["chatglm2"].loc[["insufficient", "multiple", "out-of-list"], "pct_of_sample"].tolist() == [70, 19, 11]
    # the rules' agreement per model (measured; README)
    assert {model: int(table.loc["all", "n_agree"]) for model, table in tables.items()} == \
        {"chatglm2": 80, "breeze": 95, "gpt4o": 99}


def test_tables_31_to_33_from_the_published_explanations(sctc_source):
    frames = [sctc_source.read_csv(f"response/regional_name/explanation/{model}_{file}.csv").assign(model=model, lang=lang)
              for model in ("baichuan2", "qwen") for lang, file in (("zh_hans", "simplified"), ("zh_hant", "traditional"))]
    frame = pd.concat(frames, ignore_index=True)
    words = explanations.top_words(frame)
    top = words[(words.model == "qwen") & (words.lang == "zh_hans") & (words.region == "taiwan")
                & (words.word_source == "scripts")]
    assert top["word"].head(3).tolist() == ["最好", "优秀", "最有资质"]
    talent = explanations.talent_names(frame)
    assert talent[(talent.model == "qwen") & (talent.lang == "zh_hans")]["name"].iloc[0] == "林彥廷"


def test_lexicon_agreement_with_the_published_verdicts(sctc_source):
    """The README's figures: rules 89.8 % mean (worst 78.3 %), lexicon leave-one-model-out 94.3 % (77.5 %)."""
    from sctc_assets.assets.term.label_sources import label_source_agreement
    from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
    from sctc_assets.lib.term.prompts import build_prompts
    from sctc_assets.lib.term.published import published_term_labels
    from sctc_assets.lib.term.terms import parse_terms

    prompts = build_prompts(parse_terms(sctc_source.read_csv(TERMS_FILE, TERM_COLUMNS)))
    published, missing = published_term_labels(sctc_source, prompts)
    assert missing == [] and len(published) == 108_900
    lexicon = lx.build_lexicon(published.rename(columns={"upstream_label": "label"}))
    table = label_source_agreement(published, lexicon.table).set_index(["label_source", "evaluation", "model"])
    assert table.loc[("rules", "fixed_rules", "mean"), "agreement"] == pytest.approx(0.8983, abs=5e-5)
    assert table.loc[("rules", "fixed_rules", "worst"), "agreement"] == pytest.approx(0.7832, abs=5e-5)
    assert table.loc[("lexicon", "leave_one_model_out", "mean"), "agreement"] == pytest.approx(0.9428, abs=5e-5)
    assert table.loc[("lexicon", "leave_one_model_out", "worst"), "agreement"] == pytest.approx(0.7749, abs=5e-5)
    assert table.loc[("lexicon", "in_sample", "mean"), "agreement"] == pytest.approx(0.9479, abs=5e-5)
