"""`sctc terms define`: the prompt, the rules that accept or refuse a drafted definition, filling an item set, and the
command end to end with a fake model in a temporary registry (through the response cache and the budget).

The csld list is read at run time from `$SCTC_CSLD_UPSTREAM` (its licence forbids derivatives: the subset file is
written to the test's temporary folder only)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
import yaml

from sctc_assets.lib.conversion import to_simplified, to_traditional
from sctc_assets.lib.term.definitions import (apply_definitions, definition_request, form_in, missing_definitions,
                                              parse_definition)
from sctc_assets.lib.term.items import CSLD_THREE_PLACES, Concept, ItemSet, from_csld, read_item_csv, write_item_csv
from sctc_assets_tests.fakes import count_calls

BUS = Concept("bus", {"cn": ("公交车",), "tw": ("公車",), "hk": ("巴士",)})
FAKE_BACKEND = "sctc_assets_tests.fakes:ScriptedBackend"


# --- the prompt -------------------------------------------------------------------------------------------------------

def test_the_prompt_lists_every_regions_form_once_in_the_scripts_chinese():
    simplified = definition_request(BUS)
    assert all(f"「{form}」" in simplified for form in ("公交车", "公车", "巴士"))
    assert simplified.count("「") == 3
    assert "一句话" in simplified and "不能出现" in simplified  # one sentence; none of the forms
    traditional = definition_request(BUS, "traditional")
    assert all(f"「{form}」" in traditional for form in ("公交車", "公車", "巴士"))
    assert "一句話" in traditional and "这" not in traditional
    for prompt in (simplified, traditional):
        assert not re.search(r"[A-Za-z]", prompt), prompt  # no English in the instruction
    same_in_both = Concept("x", {"cn": ("公车",), "tw": ("公車",)})
    assert definition_request(same_in_both).count("「") == 1  # one form once its script is the prompt's


def test_an_unknown_script_is_refused():
    with pytest.raises(ValueError, match="unknown script 'cantonese'"):
        definition_request(BUS, "cantonese")


# --- reading an answer ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("answer, definition", [
    ("一种按固定路线行驶、供公众乘坐的汽车。", "一种按固定路线行驶、供公众乘坐的汽车。"),
    ("定义：一种按固定路线行驶的载客汽车。", "一种按固定路线行驶的载客汽车。"),
    ("**釋義**：一種按固定路線行駛的載客汽車。", "一種按固定路線行駛的載客汽車。"),
    ("答: “一种载客汽车。”", "一种载客汽车。"),
    ("「一種載客汽車。」", "一種載客汽車。"),
    ("<think>用户问的是公车，不能写公交车。</think>\n一种载客汽车。", "一种载客汽车。"),
    ("一种按固定路线行驶的\n载客汽车。\n\n希望这个定义对你有帮助。", "一种按固定路线行驶的载客汽车。"),
    ("定义：\n一种载客汽车。", "一种载客汽车。"),
])
def test_the_definition_is_the_first_paragraph_without_reasoning_labels_or_quotes(answer, definition):
    assert parse_definition(answer, BUS) == (definition, None)


@pytest.mark.parametrize("answer, problem", [
    ("", "the answer is empty"),
    (None, "the answer is empty"),
    ("   \n ", "the answer is empty"),
    ("<think>想一想</think>", "the answer is empty"),
    ("定义：", "the answer is empty"),
    ("公交车是一种载客汽车。", "the answer contains the form 公交车"),
    ("一种公車。", "the answer contains the form 公車"),
    ("一种公车，按固定路线行驶。", "the answer contains the form 公車"),  # the Taiwan form, in the other script
    ("一種公交車。", "the answer contains the form 公交车"),  # the Mainland form, in the other script
    ("香港叫巴 士的一种车。", "the answer contains the form 巴士"),
])
def test_an_empty_answer_or_one_naming_a_form_in_either_script_is_refused(answer, problem):
    assert parse_definition(answer, BUS) == (None, problem)


def test_a_form_is_found_as_written_and_across_scripts():
    assert form_in("一种汽车", BUS) is None
    assert form_in("坐公車", BUS) == "公車"
    assert form_in("坐公车", BUS) == "公車"


# --- filling the item set ---------------------------------------------------------------------------------------------

def _item_set() -> ItemSet:
    return ItemSet(name="t", regions=("cn", "tw"), concepts=(
        Concept("h1", {"cn": ("双座车",), "tw": ("雙座車",)}, "一种两人并排骑的车", "一種兩人並排騎的車", None, "hand"),
        Concept("h2", {"cn": ("书布袋",), "tw": ("書袋",)}, None, "用來裝書的布袋", "字典", "hand"),
        Concept("m1", {"cn": ("公交车",), "tw": ("公車",)}, category="交通"),
        Concept("m2", {"cn": ("出租车",), "tw": ("計程車",)}),
    ))


def test_missing_definitions_are_the_concepts_without_either_script():
    assert [c.concept_id for c in missing_definitions(_item_set())] == ["m1", "m2"]


def test_drafts_fill_only_the_missing_definitions_and_mark_them(tmp_path):
    item_set = _item_set()
    drafts = {"m1": "一种按固定路线行驶的载客汽车", "h1": "不会用到", "h2": "不会用到"}
    filled = apply_definitions(item_set, drafts, "drafter")
    assert filled.concepts[:2] == item_set.concepts[:2]  # the human rows as they were
    m1 = filled.concept("m1")
    assert (m1.definition_zh_hans, m1.definition_zh_hant) == ("一种按固定路线行驶的载客汽车", "一種按固定路線行駛的載客汽車")
    assert (m1.definition_source, m1.category, m1.forms) == ("model:drafter", "交通", item_set.concept("m1").forms)
    assert filled.concept("m2") == item_set.concept("m2")  # no draft: left blank, unmarked
    assert missing_definitions(filled) == [item_set.concept("m2")]
    path = write_item_csv(filled, tmp_path / "filled.csv")
    read = read_item_csv(path, require_definitions=False)
    assert (read.concept("m1"), read.concept("m2")) == (m1, filled.concept("m2"))  # the file keeps them as drafted


def test_a_traditional_draft_fills_the_traditional_column_and_converts_by_script_only():
    filled = apply_definitions(_item_set(), {"m2": "一種按里程計費、供人臨時僱用的汽車"}, "drafter", "traditional")
    m2 = filled.concept("m2")
    assert m2.definition_zh_hant == "一種按里程計費、供人臨時僱用的汽車"
    assert m2.definition_zh_hans == to_simplified("一種按里程計費、供人臨時僱用的汽車")
    assert m2.definition_source == "model:drafter"


# --- the command ------------------------------------------------------------------------------------------------------

ITEMS = """concept_id,category,definition_zh_hans,definition_zh_hant,definition_source,term_cn,term_tw,term_hk
h1,交通,一种两人并排骑的车,,hand,双座车,雙座車,孖座車
m1,交通,,,,公交车,公車,巴士
m2,交通,,,,出租车,計程車,的士
h2,,,用來裝書的布袋,dictionary,书布袋,書袋/書布袋,
m3,,,,,鼠标,滑鼠,滑鼠
"""
ANSWERS = {  # concept → the fake model's answer to its prompt
    "m1": "一种公车，按固定路线行驶。",  # names the Taiwan form in Simplified: refused
    "m2": "定义：一种供人临时雇用、按里程计费的汽车。",
    "m3": "<think>不能说鼠标</think>\n「一种用手移动以操控电脑光标的输入设备。」",
}


def _sctc(argv: list[str]) -> int:
    from sctc_assets.cli import main  # the command line, with the backends it loads

    return main(argv)


def _registry(folder: Path, answers: dict[str, str], *, default_answer: str = "", budget: str | None = None,
              delay_s: float = 0.0) -> Path:
    """A registry with one fake model, `drafter`, answering each prompt from `answers` (else `default_answer`),
    `delay_s` after each call, and logging its uncached calls to folder/calls.log."""
    entry = {"backend": FAKE_BACKEND, "name": "drafter", "calls_file": str(folder / "calls.log"),
             "default_answer": default_answer, "answers": answers}
    if delay_s:
        entry["delay_s"] = delay_s
    if budget:
        entry["budget"] = yaml.safe_load(budget)
    path = folder / "models.yaml"
    path.write_text(yaml.safe_dump({"models": {"drafter": entry}}, allow_unicode=True), encoding="utf-8")
    return path


def _prompts(items: Path, script: str = "simplified") -> dict[str, str]:
    item_set = read_item_csv(items, require_definitions=False)
    return {concept_id: definition_request(item_set.concept(concept_id), script) for concept_id in ANSWERS}


@pytest.fixture
def items(tmp_path: Path) -> Path:
    path = tmp_path / "items.csv"
    path.write_text(ITEMS, encoding="utf-8")
    return path


def test_define_drafts_the_missing_definitions_through_the_cache(items, tmp_path, isolated_data_dir, capsys):
    prompts = _prompts(items)
    registry = _registry(tmp_path, {prompts[key]: answer for key, answer in ANSWERS.items()})
    before = items.read_bytes()

    status = _sctc(["terms", "define", "--items", str(items), "--model", "drafter", "--registry", str(registry)])
    out = capsys.readouterr().out
    assert status == 1  # one refused
    assert "drafted: 2" in out and "refused: 1" in out
    assert "  m1: the answer contains the form 公車" in out
    assert "answers from the response cache: 0 (new model calls: 3)" in out
    assert "review" in out
    assert count_calls(tmp_path / "calls.log") == 3
    assert items.read_bytes() == before  # the input is never touched

    written = tmp_path / "items.defined.csv"
    drafted, original = read_item_csv(written, require_definitions=False), read_item_csv(items, require_definitions=False)
    assert [c.concept_id for c in drafted.concepts] == ["h1", "m1", "m2", "h2", "m3"]
    for concept_id in ("h1", "h2"):  # the human rows unchanged
        assert drafted.concept(concept_id) == original.concept(concept_id)
    assert {c.concept_id: c.definition_source for c in drafted.concepts} == {
        "h1": "hand", "m1": None, "m2": "model:drafter", "h2": "dictionary", "m3": "model:drafter"}
    m2, m3 = drafted.concept("m2"), drafted.concept("m3")
    assert m2.definition_zh_hans == "一种供人临时雇用、按里程计费的汽车。"
    assert m2.definition_zh_hant == to_traditional(m2.definition_zh_hans)
    assert m3.definition_zh_hans == "一种用手移动以操控电脑光标的输入设备。"
    assert drafted.concept("m1").definition_zh_hans is None  # refused: left blank for a person
    assert all(drafted.concept(c).forms == original.concept(c).forms for c in ("m1", "m2", "m3"))

    # A second run answers from the response cache: no new model call, the same file.
    first = written.read_bytes()
    assert _sctc(["terms", "define", "--items", str(items), "--model", "drafter", "--registry", str(registry)]) == 1
    out = capsys.readouterr().out
    assert "answers from the response cache: 3 (new model calls: 0)" in out
    assert count_calls(tmp_path / "calls.log") == 3
    assert written.read_bytes() == first


def test_define_counts_the_refusals_per_reason_and_suggests_a_stronger_model(items, tmp_path, isolated_data_dir,
                                                                             capsys):
    """A small model that names the term in every answer drafts nothing: the summary says so in numbers."""
    prompts = _prompts(items)
    registry = _registry(tmp_path, {prompts["m1"]: "公交车。", prompts["m2"]: "就是出租车。"}, default_answer="")
    assert _sctc(["terms", "define", "--items", str(items), "--model", "drafter", "--registry", str(registry)]) == 1
    out = capsys.readouterr().out
    assert "drafted: 0 of 3 (2 named the term, 1 empty)" in out
    assert "3 of drafter's answers named the term or were empty" in out and "another --model" in out


def test_define_halted_by_its_budget_counts_what_was_not_asked(items, tmp_path, isolated_data_dir, capsys):
    prompts = _prompts(items)
    registry = _registry(tmp_path, {prompts[key]: answer for key, answer in ANSWERS.items()})
    assert _sctc(["terms", "define", "--items", str(items), "--model", "drafter", "--registry", str(registry),
                  "--max-calls", "2"]) == 1
    out = capsys.readouterr().out
    assert "drafted: 1 of 3 (1 named the term, 1 not asked)" in out


def test_define_exits_0_when_everything_was_drafted_and_writes_out(items, tmp_path, isolated_data_dir, capsys):
    prompts = _prompts(items)
    answers = {prompts[key]: answer for key, answer in ANSWERS.items()}
    answers[prompts["m1"]] = "一种按固定路线行驶、供公众乘坐的汽车。"
    registry = _registry(tmp_path, answers)
    out = tmp_path / "elsewhere" / "reviewed.csv"
    assert _sctc(["terms", "define", "--items", str(items), "--model", "drafter", "--registry", str(registry),
                  "--out", str(out)]) == 0
    assert "drafted: 3" in capsys.readouterr().out
    assert not missing_definitions(read_item_csv(out, require_definitions=False))
    read_item_csv(out)  # runnable as it is, once reviewed


def test_define_on_a_model_slower_than_a_claim_renewal_writes_its_file(items, tmp_path, isolated_data_dir, capsys,
                                                                       monkeypatch):
    """The embedded model took longer than a claim's renewal period over 12 concepts: the claim-renewal thread then
    had a connection to the response cache, and closing the cache from the main thread crashed the command before
    it wrote its file. The same thread pattern, with a fake model slower than a (shortened) renewal period."""
    monkeypatch.setenv("SCTC_CLAIM_LEASE_S", "0.15")  # renewed every 0.05 s
    prompts = _prompts(items)
    registry = _registry(tmp_path, {prompts[key]: answer for key, answer in ANSWERS.items()}, delay_s=0.2)
    status = _sctc(["terms", "define", "--items", str(items), "--model", "drafter", "--registry", str(registry)])
    assert status == 1 and "drafted: 2" in capsys.readouterr().out  # m1 refused, as without the delay
    drafted = read_item_csv(tmp_path / "items.defined.csv", require_definitions=False)
    assert drafted.concept("m2").definition_source == "model:drafter"


def test_a_model_that_fails_midway_loses_none_of_its_answers(items, tmp_path, isolated_data_dir, capsys):
    prompts = _prompts(items)
    registry = _registry(tmp_path, {prompts[key]: answer for key, answer in ANSWERS.items()})
    entry = yaml.safe_load(registry.read_text(encoding="utf-8"))
    entry["models"]["drafter"]["fail_after"] = 2  # crashes after two answers of its one chunk
    registry.write_text(yaml.safe_dump(entry, allow_unicode=True), encoding="utf-8")
    assert _sctc(["terms", "define", "--items", str(items), "--model", "drafter", "--registry", str(registry)]) == 1
    captured = capsys.readouterr()
    assert "RuntimeError: simulated crash after 2 answers" in captured.err and "rerun" in captured.err
    assert "drafted: 1 of 3 (1 named the term, 1 not asked)" in captured.out
    drafted = read_item_csv(tmp_path / "items.defined.csv", require_definitions=False)
    assert drafted.concept("m2").definition_source == "model:drafter"  # the answer that arrived is in the file


def test_define_in_traditional_asks_in_traditional(items, tmp_path, isolated_data_dir, capsys):
    prompts = _prompts(items, "traditional")
    answers = {prompts["m2"]: "一種供人臨時僱用、按里程計費的汽車。"}
    registry = _registry(tmp_path, answers)
    assert _sctc(["terms", "define", "--items", str(items), "--model", "drafter", "--registry", str(registry),
                  "--script", "traditional"]) == 1  # m1 and m3 get the default answer: empty
    out = capsys.readouterr().out
    assert "  m1: the answer is empty" in out and "  m3: the answer is empty" in out
    m2 = read_item_csv(tmp_path / "items.defined.csv", require_definitions=False).concept("m2")
    assert (m2.definition_zh_hant, m2.definition_source) == ("一種供人臨時僱用、按里程計費的汽車。", "model:drafter")
    assert m2.definition_zh_hans == to_simplified(m2.definition_zh_hant)


def test_define_draws_on_the_budget(items, tmp_path, isolated_data_dir, capsys):
    prompts = _prompts(items)
    registry = _registry(tmp_path, {prompts[key]: answer for key, answer in ANSWERS.items()})
    argv = ["terms", "define", "--items", str(items), "--model", "drafter", "--registry", str(registry)]
    assert _sctc([*argv, "--max-calls", "1"]) == 1
    out = capsys.readouterr().out
    assert count_calls(tmp_path / "calls.log") == 1
    assert "model calls halted" in out and "not asked" in out
    # The rest on a rerun: the one answer already paid for comes from the cache.
    assert _sctc(argv) == 1
    assert "answers from the response cache: 1 (new model calls: 2)" in capsys.readouterr().out
    assert count_calls(tmp_path / "calls.log") == 3


def test_the_entrys_own_budget_applies_too(items, tmp_path, isolated_data_dir, capsys):
    prompts = _prompts(items)
    registry = _registry(tmp_path, {prompts[key]: answer for key, answer in ANSWERS.items()},
                         budget="{max_calls: 2}")
    assert _sctc(["terms", "define", "--items", str(items), "--model", "drafter", "--registry", str(registry)]) == 1
    assert count_calls(tmp_path / "calls.log") == 2
    assert "model calls halted" in capsys.readouterr().out


def test_an_unknown_model_key_exits_2_naming_it(items, tmp_path, isolated_data_dir, capsys):
    registry = _registry(tmp_path, {})
    status = _sctc(["terms", "define", "--items", str(items), "--model", "nosuch", "--registry", str(registry)])
    captured = capsys.readouterr()
    assert status == 2
    assert "'nosuch'" in captured.err and str(registry) in captured.err and "drafter" in captured.err
    assert not (tmp_path / "items.defined.csv").exists()
    assert count_calls(tmp_path / "calls.log") == 0


def test_a_missing_api_key_exits_2_naming_the_variable_not_a_value(items, tmp_path, isolated_data_dir, capsys,
                                                                  monkeypatch):
    monkeypatch.delenv("SCTC_TEST_DEFINE_KEY", raising=False)
    registry = tmp_path / "models.yaml"
    registry.write_text("models:\n  remote: {backend: openai, model: m, base_url: 'http://127.0.0.1:9/v1', "
                        "api_key_env: SCTC_TEST_DEFINE_KEY}\n", encoding="utf-8")
    assert _sctc(["terms", "define", "--items", str(items), "--model", "remote", "--registry", str(registry)]) == 2
    assert "SCTC_TEST_DEFINE_KEY is not set" in capsys.readouterr().err


@pytest.mark.parametrize("content, named", [
    (None, "items.csv"),  # no such file
    ("concept_id,term_xx\nk1,a\n", "row 1, column term_xx"),
    ("concept_id,term_cn\nk1,\n", "row 2"),
])
def test_a_bad_item_file_exits_2_naming_file_and_row(tmp_path, isolated_data_dir, capsys, content, named):
    items = tmp_path / "items.csv"
    if content is not None:
        items.write_text(content, encoding="utf-8")
    registry = _registry(tmp_path, {})
    assert _sctc(["terms", "define", "--items", str(items), "--model", "drafter", "--registry", str(registry)]) == 2
    err = capsys.readouterr().err
    assert str(items) in err and named in err


def test_the_output_never_replaces_the_input(items, tmp_path, isolated_data_dir, capsys):
    registry = _registry(tmp_path, {})
    before = items.read_bytes()
    assert _sctc(["terms", "define", "--items", str(items), "--model", "drafter", "--registry", str(registry),
                  "--out", str(tmp_path / "." / "items.csv")]) == 2
    assert "never overwritten" in capsys.readouterr().err
    assert items.read_bytes() == before


def test_terms_help_lists_define(capsys):
    with pytest.raises(SystemExit) as exit:
        _sctc(["terms", "--help"])
    assert exit.value.code == 0
    assert "define" in capsys.readouterr().out


def test_define_drafts_the_first_csld_concepts(csld_location, tmp_path, isolated_data_dir, capsys):
    """The csld three-places list has no definitions: the first five concepts, drafted by a fake model (its answer
    is refused only where it happens to contain one of a concept's forms)."""
    three = from_csld(csld_location / CSLD_THREE_PLACES)
    subset = ItemSet(name="csld5", regions=three.regions, concepts=three.concepts[:5])
    items = write_item_csv(subset, tmp_path / "csld5.csv")  # in the test's temporary folder only
    answer = "一种日常生活中用到的东西。"
    registry = _registry(tmp_path, {}, default_answer=answer)
    expected = {c.concept_id for c in subset.concepts if parse_definition(answer, c)[0] is not None}
    status = _sctc(["terms", "define", "--items", str(items), "--model", "drafter", "--registry", str(registry)])
    assert status == (0 if len(expected) == 5 else 1)
    assert f"drafted: {len(expected)}" in capsys.readouterr().out
    drafted = read_item_csv(tmp_path / "csld5.defined.csv", require_definitions=False)
    assert [c.concept_id for c in drafted.concepts] == [c.concept_id for c in subset.concepts]
    for concept, before in zip(drafted.concepts, subset.concepts):
        assert concept.forms == before.forms and concept.category == before.category
        if concept.concept_id in expected:
            assert (concept.definition_zh_hans, concept.definition_source) == (answer, "model:drafter")
            assert concept.definition_zh_hant == to_traditional(answer)
        else:
            assert concept.definition_zh_hans is None and concept.definition_source is None


def test_the_csld_path_plan_then_define_then_plan_again(csld_location, tmp_path, isolated_data_dir, capfd,
                                                        monkeypatch):
    """`sctc plan --term-items csld` names what is missing and the `sctc terms define` line that drafts it, which
    takes the same names, files and subsets as `--term-items`; the drafted file then plans. The csld list is read
    where it is; the drafted part goes to the test's temporary folder only."""
    monkeypatch.setenv("SCTC_CSLD_UPSTREAM", str(csld_location))
    registry = tmp_path / "drafter.yaml"
    registry.write_text("models:\n  drafter: {backend: 'sctc_assets_tests.fakes:DefinitionBackend'}\n",
                        encoding="utf-8")
    total = len(from_csld(csld_location / CSLD_THREE_PLACES))
    plan = ["plan", "--benchmarks", "term", "--models", "drafter", "--registry", str(registry), "--trials", "1"]

    assert _sctc([*plan, "--term-items", "csld"]) == 2
    err = capfd.readouterr().err
    assert f"{total} of {total} concepts have no definition (rows 2–{total + 1};" in err
    assert "`sctc terms define --items csld --model KEY` drafts them" in err
    assert _sctc([*plan, "--term-items", "csld", "--term-limit", "3"]) == 2
    assert ("3 of 3 concepts have no definition (rows 2–4;" in (err := capfd.readouterr().err)
            and "`sctc terms define --items csld --term-limit 3 --model KEY`" in err)

    define = ["terms", "define", "--model", "drafter", "--registry", str(registry), "--term-limit", "3"]
    with contextlib.chdir(tmp_path):  # a named source's file goes to the current folder, named after the set
        assert _sctc([*define, "--items", "csld"]) == 0
    drafted = read_item_csv(tmp_path / "csld_first3.defined.csv")  # every definition there: runnable
    assert [c.concept_id for c in drafted.concepts] == ["1", "2", "3"]
    assert "drafted: 3 of 3" in capfd.readouterr().out
    # the csld file itself, and a set registered under a name, as --term-items takes them
    assert _sctc([*define, "--items", str(csld_location / CSLD_THREE_PLACES), "--out", str(tmp_path / "a.csv")]) == 0
    sets = tmp_path / "sets.yaml"
    sets.write_text("item_sets:\n  first_two: {source: csld, limit: 2}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_ITEM_SETS", str(sets))
    assert _sctc(["terms", "define", "--model", "drafter", "--registry", str(registry), "--items", "first_two",
                  "--out", str(tmp_path / "b.csv")]) == 0
    assert "answers from the response cache: 2 (new model calls: 0)" in capfd.readouterr().out
    assert read_item_csv(tmp_path / "a.csv").concepts == drafted.concepts  # the same concepts and (cached) drafts
    assert len(read_item_csv(tmp_path / "b.csv")) == 2

    monkeypatch.delenv("SCTC_ITEM_SETS")  # first_two has no definitions: a run checks every registered set
    assert _sctc([*plan, "--term-items", str(tmp_path / "csld_first3.defined.csv")]) == 0, capfd.readouterr()


@pytest.mark.slow
def test_define_with_the_embedded_model_past_a_claim_renewal(csld_location, embedded_offline, tmp_path, capsys,
                                                             monkeypatch):
    """The real embedded model on the CPU (about 3 s an answer) outlives a shortened claim renewal period, as its 12
    concepts outlived the default 20 s one: the command ends normally, counts its refusals per reason and writes
    its file."""
    three = from_csld(csld_location / CSLD_THREE_PLACES)
    items = write_item_csv(ItemSet(name="csld3", regions=three.regions, concepts=three.concepts[:3]),
                           tmp_path / "csld3.csv")  # in the test's temporary folder only
    monkeypatch.setenv("SCTC_CLAIM_LEASE_S", "0.3")  # renewed every 0.1 s
    out = tmp_path / "csld3.defined.csv"
    status = _sctc(["terms", "define", "--items", str(items), "--model", "qwen2.5-coder-0.5b-instruct"])
    printed = capsys.readouterr().out
    drafted = re.search(r"drafted: (\d) of 3(?: \((.*)\))?\n", printed)
    assert drafted, printed
    counted = sum(int(part.split()[0]) for part in (drafted.group(2) or "").split(", ") if part)
    assert int(drafted.group(1)) + counted == 3
    assert status == (0 if drafted.group(1) == "3" else 1)
    written = read_item_csv(out, require_definitions=False)
    assert [c.concept_id for c in written.concepts] == ["1", "2", "3"]
    assert sum(c.definition_source == "model:qwen2.5-coder-0.5b-instruct" for c in written.concepts) == \
        int(drafted.group(1))
