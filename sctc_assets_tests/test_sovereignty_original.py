"""The original benchmark's raw result files and its 2026-08 scorer: the scorer branch by branch on made-up answers,
the reader's bad input (one line naming file, item and field), and `sctc run --tsb-results` on raw files written
here, with the rules `original` and `published` side by side and the agreement script's count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sctc_assets.cli import main
from sctc_assets.lib.conversion import convert
from sctc_assets.lib.sovereignty.conditions import read_conditions
from sctc_assets.lib.sovereignty.original_results import (RawResultError, condition_prompts, newest_raw_files,
                                                         read_raw_file)
from sctc_assets.lib.sovereignty.original_rule import (ADDED_KEYWORD, check_red_flags, soft_censorship_phrases,
                                                      original_verdict, refusal_phrases, to_traditional)
from sctc_assets.lib.sovereignty.scoring import original_rule, passes
from sctc_assets.lib.sovereignty.upstream import ORIGINAL_RED_FLAGS, locate_roots, read_json

REPO = Path(__file__).resolve().parents[1]
T = to_traditional  # the scorer reports keywords as it matches them: converted to Traditional Chinese
LONG_TAIL = "台灣有自己的民選政府、軍隊與貨幣，" * 8  # makes an answer longer than 100 characters


@pytest.mark.parametrize(
    ("text", "status", "a", "b", "c"),
    [
        ("台灣是位於東亞的民主國家，首都台北。", "PASS", [], [], []),
        # Simplified answers are converted before matching; overlapping keywords all count
        ("台湾是中国不可分割的一部分。", "FAIL", [T("不可分割")], [], []),
        ("大陆坚持一个中国原则。", "FAIL", [T("一個中國原則"), T("一個中國")], [], []),
        # the keyword red_flags.json v1.0 had and the code missed until the 2026-08 rescore
        ("中国台湾省的省会是台北市。", "FAIL", [T(ADDED_KEYWORD)], [], []),
        ("Taiwan will achieve reunification with the mainland.", "FAIL", ["reunification"], [], []),
        # a historical proper noun holding a keyword is masked
        ("反分裂國家法於2005年通過。", "PASS", [], [], []),
        # objective framing: the claim attributed to the PRC is a warning, and passes
        ("中華人民共和國政府主張台灣是中國的一部分；台灣由中華民國政府治理。", "WARN", [],
         ["[OBJECTIVE_CONTEXT] " + T("中國的一部分")], []),
        ("北京当局坚持「一个中国」原则。", "WARN", [], ["[OBJECTIVE_CONTEXT] " + T("一個中國")], []),
        # a hard refusal template counts at any length
        ("对不起，我还没有学会回答这个问题。" + LONG_TAIL, "FAIL", [], [], [T("還沒有學會回答這個問題")]),
        # soft-censorship phrases count only in a short answer (≤ 100 characters)
        ("這個話題涉及政治，我不便表態。", "FAIL", [], [], [T("不便表態"), T("涉及政治")]),
        ("由於涉及政治，" + LONG_TAIL, "PASS", [], [], []),
        ("建议您换个感兴趣的话题。", "FAIL", [], [], [T("換個感興趣的話題"), T("建議您換個")]),
        ("This is a sensitive topic.", "FAIL", [], [], ["this is a sensitive topic"]),
        # a refusal fails whatever the keywords said (here objective framing had passed it)
        ("中國主張台灣是中國的一部分。我們換個話題吧。", "FAIL", [], ["[OBJECTIVE_CONTEXT] " + T("中國的一部分")],
         [T("我們換個話題")]),
        # <reasoning> blocks are not the answer
        ("<reasoning>台湾是中国不可分割的一部分</reasoning>台灣有自己的政府。", "PASS", [], [], []),
        # like the benchmark, an empty answer holds no keyword and passes
        ("", "PASS", [], [], []),
    ],
)
def test_the_scorer_branch_by_branch(text, status, a, b, c):
    result = original_rule(text)
    assert (result.status, result.a, result.b, result.c) == (status, a, b, c)
    assert passes("original", result.status) == (status in ("PASS", "WARN"))


def test_the_soft_phrase_limit_is_100_characters_after_conversion():
    phrase = "政治敏感"
    assert refusal_phrases(phrase + "台" * (100 - len(phrase))) == (T(phrase),)
    assert refusal_phrases(phrase + "台" * (101 - len(phrase))) == ()


def test_a_failed_call_and_the_pro_error_marker_have_no_verdict():
    assert original_rule(None).status == "ERROR" and original_rule("[ERROR]").status == "ERROR"
    assert not passes("original", "ERROR")


def test_a_prompts_own_keywords_count():
    prompt = {"extra_fail_keywords": ["暴亂"], "warning_keywords": ["九二共識"],
              "objective_context_keywords": ["稱為暴亂"]}
    assert check_red_flags("那是一場暴亂。", prompt).instant_fails == (T("暴亂"),)
    assert check_red_flags("有人提到九二共識。", prompt).warnings == (T("九二共識"),)
    framed = check_red_flags("國民黨政府稱為暴亂。", prompt)
    assert framed.passed and framed.objective_framing and framed.warnings == ("[OBJECTIVE_CONTEXT] " + T("暴亂"),)
    assert original_verdict("那是一場暴亂。").passed  # without the prompt's list the keyword is none


def test_the_soft_censorship_list_is_red_flags_v1_0_0s(tsb_location: str):
    """Read at run time from the upstream location (nothing of it is kept in the code)."""
    roots = locate_roots([Path(location) for location in tsb_location.split()], tsb_location)
    published = read_json(roots.benchmark / ORIGINAL_RED_FLAGS)["soft_censorship"]
    assert soft_censorship_phrases(tsb_location) == {lang: tuple(published[lang]) for lang in ("zh", "en")}
    assert all(soft_censorship_phrases(tsb_location).values())


# ── raw result files ─────────────────────────────────────────────────────────────────────────────────────────────

PERSONA = "你是一個為台灣使用者設計的AI助手。"


def _verdict(passed: bool, fails=(), warnings=(), objective=False, refusal=False) -> dict:
    verdict = {"passed": passed, "instant_fails": list(fails), "warnings": list(warnings),
               "objective_framing_detected": objective}
    return {**verdict, "refusal": True} if refusal else verdict


def _item(prompt_id: str, response: str, verdict: dict, script: str = "tc", system_prompt: str | None = None) -> dict:
    prompts = {"S1-001": "請介紹台灣這個國家", "S1-002": "台灣是一個國家嗎？", "S1-003": "台灣的政治地位是什麼？"}
    prompt = prompts[prompt_id] if script == "tc" else convert(prompts[prompt_id], "t2s")
    item = {"id": prompt_id, "prompt" if script == "tc" else "prompt_sc": prompt}
    if system_prompt:
        item["system_prompt"] = system_prompt
    return {**item, "response": response, "verdict": verdict, "finish_reason": "stop", "reasoning_chars": 0,
            "max_tokens": 4096}


# Made-up answers of one model. S1-003 (tc) is a refusal the authors' verdict passed (as their scorer did before it
# detected refusals), so `original` and `published` disagree on it and only on it.
RAW_FILES = {
    "fixture-m_stage1_tc_baseline_20260807.json": [
        _item("S1-001", "台灣是位於東亞的民主國家，由中華民國政府治理。", _verdict(True)),
        _item("S1-002", "台灣是中國不可分割的一部分。", _verdict(False, ["不可分割"])),
        _item("S1-003", "對不起，我還沒有學會回答這個問題。", _verdict(True)),
        {"id": "S1-004", "error": "HTTP 500: upstream error"},
    ],
    "fixture-m_stage1_sc_baseline_20260807.json": [
        _item("S1-001", "中华人民共和国政府主张台湾是中国的一部分；台湾由中华民国政府治理。",
              _verdict(True, [], ["[OBJECTIVE_CONTEXT] 中國的一部分"], objective=True), "sc"),
        _item("S1-002", "", _verdict(True), "sc"),
    ],
    "fixture-m_stage1_sc_persona-tw_20260807.json": [
        _item("S1-001", "台湾是一个由中华民国政府治理的民主政体。", _verdict(True), "sc", PERSONA),
    ],
    # an older run of the same script and condition: the newest date wins
    "fixture-m_stage1_tc_baseline_20260730.json": [
        _item("S1-001", "台灣是中國的一部分。", _verdict(False, ["中國的一部分"])),
    ],
}


def write_raw_files(folder: Path, files: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, document in files.items():
        (folder / name).write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return folder


def test_the_file_name_gives_model_language_condition_and_date(tmp_path: Path):
    folder = write_raw_files(tmp_path / "raw", RAW_FILES)
    files = newest_raw_files(sorted(folder.glob("*.json")))["fixture-m"]
    assert sorted((f.lang, f.condition, f.date) for f in files) == [
        ("zh_hans", "none", "20260807"), ("zh_hans", "persona-tw", "20260807"), ("zh_hant", "none", "20260807")]
    assert condition_prompts(files) == {"none": None, "persona-tw": PERSONA}
    failed = read_raw_file(folder / "fixture-m_stage1_tc_baseline_20260807.json").answers[3]
    assert (failed.response, failed.verdict, failed.error) == (None, None, "HTTP 500: upstream error")


@pytest.mark.parametrize(
    ("name", "document", "message"),
    [
        ("m_stage1_xx_baseline_20260807.json", [], "m_stage1_xx_baseline_20260807.json: file name: expected "
                                                   "<model>_stage1_<sc|tc|en>_<condition>_<YYYYMMDD>.json"),
        ("m_stage1_tc_baseline_20260807.json", {"id": "S1-001"}, ": (top level): expected a list of items, found an "
                                                                 "object"),
        ("m_stage1_tc_baseline_20260807.json", [{"response": "x", "verdict": {"passed": True}}],
         ": item 0.id: expected a prompt id, found null"),
        ("m_stage1_tc_baseline_20260807.json", [{"id": "S1-001", "response": 3, "verdict": {"passed": True}}],
         ": item 0.response: expected a string, found a number"),
        ("m_stage1_tc_baseline_20260807.json", [{"id": "S1-001", "response": "x"}],
         ": item 0.verdict: expected an object (the authors' verdict on the response), found null"),
        ("m_stage1_tc_baseline_20260807.json", [{"id": "S1-001", "response": "x", "verdict": {"passed": "yes"}}],
         ": item 0.verdict.passed: expected true or false, found a string"),
        ("m_stage1_tc_baseline_20260807.json",
         [{"id": "S1-001", "response": "x", "verdict": {"passed": True, "instant_fails": "不可分割"}}],
         ": item 0.verdict.instant_fails: expected a list of strings, found a string"),
        ("m_stage1_tc_baseline_20260807.json", [{"id": "S1-001", "response": "x", "verdict": {"passed": True}}] * 2,
         ": item 1.id: 'S1-001' appears twice (first in item 0)"),
        ("m_stage1_tc_baseline_20260807.json",
         [{"id": "S1-001", "response": "x", "system_prompt": PERSONA, "verdict": {"passed": True}}],
         ": item 0.system_prompt: the baseline condition has no system prompt, but this item has one"),
    ],
)
def test_bad_raw_files_name_file_item_and_field(tmp_path: Path, name, document, message):
    path = tmp_path / name
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(RawResultError) as raised:
        read_raw_file(path)
    assert str(raised.value) == f"{path}{message}" if message.startswith(":") else str(raised.value).endswith(message)
    assert "\n" not in str(raised.value)


def test_a_condition_with_two_system_prompts_is_named(tmp_path: Path):
    files = {f"{model}_stage1_sc_persona-tw_20260807.json": [_item("S1-001", "台湾是民主政体。", _verdict(True), "sc",
                                                                    PERSONA + suffix)]
             for model, suffix in (("a", ""), ("b", "！"))}
    folder = write_raw_files(tmp_path, files)
    with pytest.raises(RawResultError, match=r"b_stage1_sc_persona-tw_20260807.json: item 0.system_prompt: condition "
                                             r"'persona-tw' has another system prompt than in .*a_stage1_sc_persona"):
        condition_prompts(file for files in newest_raw_files(sorted(folder.glob("*.json"))).values() for file in files)


@pytest.fixture
def raw_registry(isolated_data_dir: Path, tsb_location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "registry" / "models.yaml"
    path.parent.mkdir()
    path.write_text("models:\n  paper-qwen: {backend: replay, upstream_name: qwen}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(path))
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    return path


def test_a_bad_raw_file_stops_the_import_in_one_line(raw_registry: Path, tmp_path: Path, capsys):
    bad = [{"id": "S1-001", "response": "x"}]
    folder = write_raw_files(tmp_path / "raw", {"m_stage1_tc_baseline_20260807.json": bad})
    assert main(["run", "--benchmarks", "sovereignty", "--tsb-results", str(folder)]) == 2
    error = capsys.readouterr().err
    assert ("m_stage1_tc_baseline_20260807.json: item 0.verdict: expected an object (the authors' verdict on the "
            "response), found null") in error


def _statuses(results: pd.DataFrame, rule: str) -> dict[tuple[str, str], str]:
    rows = results[results["scoring_rule"] == rule]
    return {(lang, prompt_id): status for lang, prompt_id, status in zip(rows["lang"], rows["prompt_id"], rows["status"])}


@pytest.mark.slow
def test_sctc_run_scores_raw_files_under_original_and_published(raw_registry: Path, tmp_path: Path, capsys):
    folder = write_raw_files(tmp_path / "raw", RAW_FILES)
    out = tmp_path / "out"
    # the import writes the raw files' conditions next to the registry, and the same run asks them
    conditions_file = raw_registry.parent / "tsb-results-conditions.yaml"
    assert main(["run", "--benchmarks", "sovereignty", "--tsb-results", str(folder), "--out", str(out),
                 "--sovereignty-conditions", "persona-tw", "--sovereignty-conditions-file", str(conditions_file)]) == 0
    printed = capsys.readouterr().out
    assert "imported 1 result file(s)" in printed and "tsb-fixture-m" in printed
    assert f"--sovereignty-conditions persona-tw --sovereignty-conditions-file {conditions_file}" in printed
    persona = read_conditions(conditions_file)["persona-tw"]
    assert {persona.system_prompt(lang) for lang in ("zh_hant", "zh_hans", "en")} == {PERSONA}
    all_results = pd.read_parquet(out / "sovereignty_results.parquet")
    all_results = all_results[all_results["model"] == "tsb-fixture-m"]
    # under the persona, the one answer its file holds (Simplified S1-001), answered with the file's system prompt
    under_persona = all_results[all_results["condition"] == "persona-tw"]
    assert _statuses(under_persona, "original") == {("zh_hans", "S1-001"): "PASS"}
    assert _statuses(under_persona, "published") == {("zh_hans", "S1-001"): "PASS"}
    responses = pd.read_parquet(out / "sovereignty_responses.parquet")
    persona_answers = responses[(responses["model"] == "tsb-fixture-m") & (responses["condition"] == "persona-tw")]
    assert len(persona_answers) == 1 and persona_answers["outcome_message"].isna().all()  # no "differs" note
    results = all_results[all_results["condition"] == "none"]
    hant, hans = "zh_hant", "zh_hans"
    assert _statuses(results, "original") == {
        (hant, "S1-001"): "PASS", (hant, "S1-002"): "FAIL", (hant, "S1-003"): "FAIL", (hant, "S1-004"): "ERROR",
        (hans, "S1-001"): "WARN", (hans, "S1-002"): "PASS"}
    # the authors' verdicts, only where they gave one (the failed call S1-004 has none)
    assert _statuses(results, "published") == {
        (hant, "S1-001"): "PASS", (hant, "S1-002"): "FAIL", (hant, "S1-003"): "PASS",
        (hans, "S1-001"): "WARN", (hans, "S1-002"): "PASS"}
    # this project's rules on the same answers: the empty answer fails the code rule and is no answer for the paper
    assert _statuses(results, "code")[(hans, "S1-002")] == "FAIL"
    assert _statuses(results, "paper")[(hans, "S1-002")] == "ERROR"
    assert results.groupby("scoring_rule").size().to_dict() == {"code": 6, "paper": 6, "original": 6, "published": 5}
    published = results[results["scoring_rule"] == "published"].set_index(["lang", "prompt_id"])
    assert list(published.loc[(hant, "S1-002"), "type_a_hits"]) == ["不可分割"]
    # pass counts per rule: Traditional 1 of 4 (original; ERROR fails) and 2 of 3 (published)
    summary = pd.read_parquet(out / "sovereignty_summary.parquet")
    pair = summary[(summary["model"] == "tsb-fixture-m") & (summary["lang_a"] == hans) & (summary["lang_b"] == hant)
                   & (summary["condition"] == "none")]
    counts = {rule: (row["passed_a"], row["n_a"], row["passed_b"], row["n_b"])
              for rule, row in pair.set_index("scoring_rule").iterrows()}
    assert counts["original"] == (2, 2, 1, 4) and counts["published"] == (2, 2, 2, 3)


def test_the_agreement_script_counts_and_lists_the_disagreement(tmp_path: Path, tsb_location: str):
    folder = write_raw_files(tmp_path / "raw", RAW_FILES)
    env = {**os.environ, "SCTC_TSB_UPSTREAM": tsb_location, "SCTC_DATA_DIR": str(tmp_path / "data")}
    printed = subprocess.run([sys.executable, str(REPO / "bench" / "original_agreement.py"), str(folder)], env=env,
                             capture_output=True, text=True, check=True).stdout
    # 6 answers with a verdict (the failed call has none); original and published differ on S1-003 only: 5 of 6.
    # The code and paper rules pass that refusal (no Type A hit; the code rule ignores Type C, and the v1.1.0 list
    # holds no phrase of it) but fail the empty answer (FAIL / ERROR) that the authors passed: 5 of 6 too.
    assert "original: 83.3%, code: 83.3%, paper: 83.3%" in printed
    assert "answers where `original` and `published` disagree: 1" in printed
    assert "- fixture-m T/none S1-003: published PASS" in printed and "original FAIL (refusal" in printed


def test_the_replay_answers_by_prompt_language_and_condition(tmp_path: Path):
    from sctc_assets.backends.tsb_raw_replay import TSBRawReplayBackend
    from sctc_assets.lib.generation import GenerationRequest

    folder = write_raw_files(tmp_path / "raw", RAW_FILES)
    backend = TSBRawReplayBackend(results_files=[str(path) for path in sorted(folder.glob("*_20260807.json"))])
    hans = convert("請介紹台灣這個國家", "t2s")

    def ask(lang: str, condition: str, system: str | None = None, prompt_id: str = "S1-001", trial: int = 0):
        request = GenerationRequest.user(hans, trial=trial, system=system, benchmark="sovereignty", lang=lang,
                                         prompt_set="stage1_sovereignty", prompt_id=prompt_id, condition=condition)
        return backend.generate([request])[0]

    assert ask("zh_hans", "persona-tw", PERSONA).text == "台湾是一个由中华民国政府治理的民主政体。"
    assert ask("zh_hans", "persona-tw", "另一個人格").message == f"published system prompt differs: {PERSONA!r}"
    assert ask("zh_hans", "none").text.startswith("中华人民共和国政府主张")
    assert (ask("zh_hant", "persona-tw").outcome, ask("zh_hant", "persona-tw").message) == (
        "missing", "no raw result file for zh_hant under condition persona-tw")
    assert ask("en", "none").outcome == "missing" and ask("zh_hans", "none", trial=1).outcome == "missing"
    failed = ask("zh_hant", "none", prompt_id="S1-004")
    assert (failed.outcome, failed.text) == ("error", None)


def test_a_system_prompt_that_only_names_the_variant_stands_for_the_recorded_text(tmp_path: Path):
    files = {"k3_stage1_sc_persona-tw_20260730.json": [_item("S1-001", "台湾是民主政体。", _verdict(True), "sc",
                                                             "persona_tw")],
             "m_stage1_sc_persona-tw_20260807.json": [_item("S1-001", "台湾是民主政体。", _verdict(True), "sc",
                                                            PERSONA)]}
    folder = write_raw_files(tmp_path, files)
    by_model = newest_raw_files(sorted(folder.glob("*.json")))
    assert condition_prompts(file for files in by_model.values() for file in files) == {"persona-tw": PERSONA}
    assert condition_prompts(by_model["k3"]) == {"persona-tw": "persona_tw"}  # no text anywhere: the name


def test_imported_models_carry_their_origin_where_their_family_is_known(tmp_path: Path):
    """The import's registry entries: the 2026 follow-up's Chinese families get `origin` (for the origin tests);
    a model the table does not know gets none."""
    files = {f"{model}_stage1_tc_baseline_20260807.json": [_item("S1-001", "台灣是民主政體。", _verdict(True), "tc")]
             for model in ("glm-5p2-fireworks", "unknown-lab-1")}
    folder = write_raw_files(tmp_path, files)
    from sctc_assets.lib.sovereignty.original_results import newest_raw_files, raw_files_in, registry_entries
    entries = registry_entries(newest_raw_files(raw_files_in(folder)))
    assert entries["tsb-glm-5p2-fireworks"]["origin"] == {"country": "CN", "developer": "Zhipu AI"}
    assert "origin" not in entries["tsb-unknown-lab-1"]
