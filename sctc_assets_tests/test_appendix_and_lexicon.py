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
    # a marked answer ends at its line, quote or bracket, not at a quote further on
    ('。")\n    print("Answer:驾校")\n    print("")\n    print("Question: \'A place\'")', "驾校"),
    ("答案是“空客”，也叫空中客车", "空客"),
    (float("nan"), ""),
    (None, ""),
])
def test_answer_extraction(response, answer):
    assert lx.extract_answer(lx.answer_text(response)) == answer


def test_v1_extraction_is_kept_for_the_comparison():
    text = lx.answer_text('。")\n    print("Answer:驾校")\n    print("")\n    print("Question: \'A place\'")')
    assert lx.extract_answer(text, cut_marked_answer=False) == "Question"


@pytest.mark.parametrize(("response", "seen", "answer"), [
    ("）\nAnswer: Turn signal.", "）\n答案:.", ""),  # the judge saw `）:.`: no answer at all
    ('",\n    "answer": "尾灯",\n    "options": ["尾灯", "前照灯"]', '",\n"答案":"尾灯",\n"":["尾灯","前照灯"]', "尾灯"),
    ("。\r\nAnswerassistant\n\n铁警", "。\n\n铁警", "铁警"),
])
def test_llama_answers_are_read_as_the_judge_saw_them(response, seen, answer):
    assert lx.judge_saw_ascii_stripped("llama3-70b") and lx.judge_saw_ascii_stripped("llama3-8b")
    assert not lx.judge_saw_ascii_stripped("gpt4o") and not lx.judge_saw_ascii_stripped(None)
    assert lx.answer_text(response, ascii_stripped=True) == seen
    texts, answers = lx.answer_keys([response], ["llama3-8b"])
    assert (texts, answers) == ([seen], [answer])
    assert lx.answer_keys([response], ["llama3-8b"], lx.V1)[0] == [lx.answer_text(response)]  # V1: raw text


def test_abbreviation_is_a_non_contiguous_subsequence():
    assert lx.is_abbreviation("空客", "空中客车") and lx.is_abbreviation("网购", "网上购物")
    assert not lx.is_abbreviation("短裤", "紧身短裤")  # a contiguous piece names a broader thing
    assert not lx.is_abbreviation("客", "空中客车") and not lx.is_abbreviation("空中客车", "空中客车")
    # only V1 accepts abbreviations: those no lexicon knows were judged correct only 16 % of the time
    assert not lx.rule_correct("空客", ["空中客车"], "空客")
    assert lx.rule_correct("空客", ["空中客车"], "空客", abbreviations=True)
    assert lx.rule_correct("", ["空中客车"], "空中客车（Airbus）")


def test_authors_misalignment_test_without_their_exceptions():
    from sctc_assets.lib.term.upstream_labels import upstream_misaligned

    # chinese-converter, character by character, the other region's term as written or converted
    assert lx.authors_misaligned_forms("計程車", "计程车。", "zh_hans") == ["计程车"]
    assert lx.authors_misaligned_forms("計程車", "計程車", "zh_hans") == ["計程車"]
    assert lx.authors_misaligned_forms("出租车", "出租車。", "zh_hant") == ["出租車"]
    assert lx.authors_misaligned_forms("一米线/一米等待线", "一米等待线", "zh_hant") == ["一米等待线"]
    assert lx.authors_misaligned_forms("出租车", None, "zh_hant") == []
    # the authors relabelled 空客 in Traditional answers by hand; that exception is theirs, not a rule
    assert upstream_misaligned("空中客车", "空客", "zh_hant")
    assert lx.authors_misaligned_forms("空中客车", "空客", "zh_hant") == []


def _labelled(models_and_labels):
    return pd.DataFrame({"model": [m for m, _ in models_and_labels], "lang": "zh_hans", "term_id": 7,
                         "response": "辅警", "label": [label for _, label in models_and_labels]})


def test_lexicon_votes_without_the_labelled_models_own_labels():
    labelled = _labelled([("a", "correct"), ("b", "correct"), ("c", "correct"), ("d", "incorrect"),
                          ("d", "incorrect")])
    lexicon = lx.build_lexicon(labelled)
    assert lexicon.min_models == lx.MIN_MODELS == 3
    rows = pd.DataFrame({"lang": ["zh_hans"], "term_id": [7], "response": ["辅警。"], "expected": [["协警"]]})
    # for model d the three other models vote correct; d's own "incorrect" is never used
    assert lx.label_frame(rows, [False], lexicon, exclude_model="d")["label"].tolist() == ["correct"]
    # a lexicon of a, b and c: for model a only b and c are left, below min_models, so the fixed rules decide
    decided = lx.label_frame(rows, [False], lx.build_lexicon(labelled[labelled.model != "d"]), exclude_model="a")
    assert decided["label"].tolist() == ["incorrect"] and decided["decided_by"].tolist() == ["rule"]
    fixed = lx.fixed_labels(rows, [False])
    assert lx.apply_lexicon(fixed, rows, lexicon, exclude_models=("a", "b"))["decided_by"].tolist() == ["rule"]
    # one model's shares weigh as one vote, however often it gave the answer: d's two rows lose to a and b
    assert lx.apply_lexicon(fixed, rows, lexicon, exclude_models=("c",))["label"].tolist() == ["correct"]


def test_the_authors_misalignment_test_is_not_overruled_by_the_lexicon():
    lexicon = lx.build_lexicon(_labelled([("a", "correct"), ("b", "correct"), ("c", "correct")]))
    rows = pd.DataFrame({"lang": ["zh_hans"], "term_id": [7], "response": ["辅警"], "expected": [["协警"]]})
    decided = lx.label_frame(rows, [True], lexicon, exclude_model=None)
    assert decided["label"].tolist() == ["misaligned"] and decided["decided_by"].tolist() == ["misaligned_rule"]
    # V1 let the lexicon overrule the `rules` source's misaligned verdict (with two other models)
    v1 = lx.build_lexicon(_labelled([("a", "correct"), ("b", "correct")]), lx.V1)
    assert lx.label_frame(rows, [True], v1, exclude_model=None, settings=lx.V1)["label"].tolist() == ["correct"]


def test_lexicon_source_labels_read_back_from_parquet(tmp_path):
    """The `lexicon` rows of `term_labels` for answers stored with the project's IO manager (a missing answer
    reads back as NaN), with the authors' misalignment forms and without the replayed model's own labels."""
    import dagster as dg

    from sctc_assets.assets.term.labels import lexicon_source_labels
    from sctc_assets.lib.term.labelling import LABEL_COLUMNS
    from sctc_assets.resources.io_manager import ParquetIOManager

    prompts = pd.DataFrame({
        "lang": "zh_hant", "prompt_variant": 1, "trial": 0, "term_id": [28, 29, 30], "row": [0, 1, 2],
        "gt": ["計程車", "公車", "捷運"], "expected": [["計程車"], ["公車"], ["捷運"]],
        "other_region": [["出租车"], ["公交车"], ["地铁"]], "other_region_term": ["出租车", "公交车", "地铁"],
        "prompt": ["p0", "p1", "p2"]})
    responses = pd.DataFrame({"model": "paper-x", "lang": "zh_hant", "prompt_variant": 1, "trial": 0,
                              "term_id": [28, 29, 30], "row": [0, 1, 2], "response": ["出租車。", "巴士", None],
                              "outcome": ["ok", "ok", "refusal"]})
    io_manager = ParquetIOManager(base_dir=str(tmp_path))
    io_manager.handle_output(dg.build_output_context(asset_key=dg.AssetKey("term_responses"), step_key="s",
                                                     run_id="r"), responses)
    stored = io_manager.load_input(dg.build_input_context(asset_key=dg.AssetKey("term_responses")))
    lexicon = lx.build_lexicon(pd.DataFrame({
        "model": ["x", "a", "b", "c"], "lang": "zh_hant", "term_id": 29, "response": "巴士",
        "label": ["incorrect", "correct", "correct", "correct"]}))
    assert stored["response"].isna().tolist() == [False, False, True]
    # the `rules` rows these are built from (only their keys and answers are read)
    rules = stored.assign(label_source="rules", label="incorrect", misaligned_forms="")[LABEL_COLUMNS]
    labels = lexicon_source_labels(rules, prompts, lexicon.table, "x").set_index("term_id")
    assert labels["label_source"].unique().tolist() == ["lexicon"]
    assert labels.loc[28, ["label", "misaligned_forms"]].tolist() == ["misaligned", "出租車"]
    assert labels.loc[29, "label"] == "correct"  # a, b and c accepted 巴士; x's own verdict is left out
    assert labels.loc[30, "label"] == "incorrect"
    assert lexicon_source_labels(rules, prompts, lexicon.table.iloc[0:0], None).set_index("term_id").loc[
        29, "label"] == "incorrect"  # without a lexicon: the fixed rules


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
    # the rules' agreement per model (measured; docs/benchmarks/term.md)
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
    """The term page's figures (`term_label_source_agreement`): `rules` and `lexicon_v1` exactly, `lexicon` as lower
    bounds (a change that loses agreement fails)."""
    from sctc_assets.assets.term.label_sources import label_source_agreement
    from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
    from sctc_assets.lib.term.prompts import build_prompts
    from sctc_assets.lib.term.published import published_term_labels
    from sctc_assets.lib.term.terms import parse_terms

    prompts = build_prompts(parse_terms(sctc_source.read_csv(TERMS_FILE, TERM_COLUMNS)))
    published, missing = published_term_labels(sctc_source, prompts)
    assert missing == [] and len(published) == 108_900
    lexicon = lx.build_lexicon(published.rename(columns={"upstream_label": "label"}))
    table = label_source_agreement(published, lexicon.table)
    summary = table.set_index(["label_source", "evaluation", "model"])["agreement"]
    assert summary[("rules", "fixed_rules", "mean")] == pytest.approx(0.8983, abs=5e-5)
    assert summary[("rules", "fixed_rules", "worst")] == pytest.approx(0.7832, abs=5e-5)
    assert summary[("lexicon_v1", "leave_one_model_out", "mean")] == pytest.approx(0.9428, abs=5e-5)
    assert summary[("lexicon_v1", "leave_one_model_out", "worst")] == pytest.approx(0.7749, abs=5e-5)
    assert summary[("lexicon_v1", "in_sample", "mean")] == pytest.approx(0.9479, abs=5e-5)
    assert summary[("lexicon", "leave_one_model_out", "mean")] >= 0.9476
    assert summary[("lexicon", "leave_one_model_out", "worst")] >= 0.7967
    assert summary[("lexicon", "in_sample", "mean")] >= 0.9504
    assert summary[("lexicon", "in_sample", "worst")] >= 0.7965
    groups = table[~table["model"].isin(["mean", "worst"])].set_index(
        ["label_source", "evaluation", "model", "lang"]).sort_index()
    lomo = groups.loc[("lexicon", "leave_one_model_out"), "agreement"]
    # what stays below the 90 % worst-group target (term page): the two Llama-3 Simplified groups and
    # Llama-3-70B Traditional; every other group reaches it
    assert sorted(lomo[lomo < 0.90].index) == [("llama3-70b", "zh_hans"), ("llama3-70b", "zh_hant"),
                                               ("llama3-8b", "zh_hans")]
    assert lomo.drop([("llama3-70b", "zh_hans"), ("llama3-70b", "zh_hant"), ("llama3-8b", "zh_hans")]).min() >= 0.9033
