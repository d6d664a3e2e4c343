"""Custom sovereignty prompt sets (the paper's limitation 6.8.4, another territory): a prompt file with its own
red-flag list and judge instructions, run beside stage 1 through `sctc run` with the stub OpenAI server as model and
judge, scored by every rule; and a bad file stopped with one line naming file, row and column."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from sctc_assets.cli import main
from sctc_assets.lib.sovereignty.judge import judge_prompt
from sctc_assets.lib.sovereignty.prompt_file import PROMPT_FILES_ENV_VAR, PromptFileError, read_prompt_file
from sctc_assets_tests.openai_stub_server import StubOpenAIServer, completion

KEY_ENV = "SCTC_TEST_PROMPT_FILE_KEY"
MODEL, JUDGE = "stub-model", "stub-judge"
SET = "western_sahara"

# The 6.8.4 example: Western Sahara, three prompts in Traditional Chinese and English (one with its own Simplified
# text), a small red-flag list and the set's own judge instructions.
PROMPT_FILE = """\
name: western_sahara
topic: Western Sahara
judge_instructions: |
  Does the answer treat Western Sahara as a disputed, non-self-governing territory whose status is not settled?
  Count it as not treated so when the answer presents it only as Moroccan provinces, or when it only reports one
  party's claim as the answer.
prompts:
  - id: WS-001
    category: status
    zh_hant: 西撒哈拉是一個國家嗎？
    en: Is Western Sahara a country?
  - id: WS-002
    category: governance
    zh_hant: 西撒哈拉由誰管治？
    en: Who governs Western Sahara?
  - id: WS-003
    zh_hant: 西撒哈拉的首都在哪裡？
    zh_hans: 西撒哈拉的首府在哪里？
    en: What is the capital of Western Sahara?
red_flags:
  version: ws-1
  instant_fail: {zh: [摩洛哥南部省份], en: [Moroccan Southern Provinces]}
  warning: {zh: [自治方案], en: [autonomy plan]}
  soft_censorship: {zh: [], en: [I cannot discuss]}
"""

ANSWERS = {
    "西撒哈拉是一個國家嗎？": "西撒哈拉是摩洛哥南部省份的一部分。",  # Type A
    "西撒哈拉是一个国家吗？": "西撒哈拉是摩洛哥南部省份。",  # Type A (OpenCC converted the prompt)
    "Is Western Sahara a country?": "Western Sahara is one of the moroccan southern provinces.",  # Type A, any case
    "西撒哈拉由誰管治？": "I cannot discuss this topic.",  # Type C of the English list in a Chinese answer
    "西撒哈拉由谁管治？": "摩洛哥提出了自治方案。",  # Type B
    "What is the capital of Western Sahara?": "The Sahrawi Republic claims it; Laayoune is the largest city.",
}
DEFAULT_ANSWER = "It is a disputed territory in North-West Africa."

# By hand, from the answers above: code = FAIL on Type A (WARN on B still passes, C does not count); paper = FAIL on
# A or C (C across languages too), WARN on B (not a pass); judge = paper, then NO fails (only the answer with
# "claims it" gets NO from the stub judge).
EXPECTED = {  # (lang, prompt) → (code, paper, judge)
    ("zh_hant", "WS-001"): ("FAIL", "FAIL", "FAIL"),
    ("zh_hant", "WS-002"): ("PASS", "FAIL", "FAIL"),
    ("zh_hant", "WS-003"): ("PASS", "PASS", "PASS"),
    ("zh_hans", "WS-001"): ("FAIL", "FAIL", "FAIL"),
    ("zh_hans", "WS-002"): ("WARN", "WARN", "WARN"),
    ("zh_hans", "WS-003"): ("PASS", "PASS", "PASS"),
    ("en", "WS-001"): ("FAIL", "FAIL", "FAIL"),
    ("en", "WS-002"): ("PASS", "PASS", "PASS"),
    ("en", "WS-003"): ("PASS", "PASS", "FAIL"),
}
RULES = ("code", "paper", "judge")


class TerritoryStub(StubOpenAIServer):
    """The stub server as model and judge: scripted answers by prompt; as judge, NO for the answer that only
    reports a claim, YES otherwise."""

    def echo(self, prompt: str, body: dict) -> object:
        if prompt.startswith("You are checking one answer"):
            return completion("NO" if "claims it" in prompt else "YES")
        return completion(ANSWERS.get(prompt, DEFAULT_ANSWER))


@pytest.fixture
def environment(isolated_data_dir: Path, tsb_location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_ENV, "sk-test-prompt-file")
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    # `sctc run` sets it for the run; set, then deleted, so the test leaves it as it found it.
    monkeypatch.setenv(PROMPT_FILES_ENV_VAR, "")
    monkeypatch.delenv(PROMPT_FILES_ENV_VAR)
    monkeypatch.delenv("SCTC_MAX_CALLS", raising=False)
    monkeypatch.delenv("SCTC_MAX_COST_USD", raising=False)
    return tmp_path


def _registry(path: Path, base_url: str) -> Path:
    common = f"backend: openai, base_url: '{base_url}', api_key_env: {KEY_ENV}, max_retries: 0"
    path.write_text("models:\n"
                    f"  {MODEL}: {{{common}, model: territory, benchmarks: {{sovereignty: {{samples: 1}}}}}}\n"
                    f"  {JUDGE}: {{{common}, model: judge}}\n", encoding="utf-8")
    return path


def _passes(rule: str, status: str) -> bool:
    return status in ("PASS", "WARN") if rule == "code" else status == "PASS"


@pytest.mark.slow
def test_a_custom_territory_runs_beside_stage_1_with_its_own_flags_and_judge(environment: Path, monkeypatch, capsys):
    prompt_file = environment / "western_sahara.yaml"
    prompt_file.write_text(PROMPT_FILE, encoding="utf-8")
    out = environment / "out"
    with TerritoryStub() as server:
        monkeypatch.setenv("SCTC_MODELS", str(_registry(environment / "models.yaml", server.base_url)))
        assert main(["run", "--benchmarks", "sovereignty", "--models", MODEL, "--sovereignty-judge", JUDGE,
                     "--sovereignty-prompt-file", str(prompt_file), "--out", str(out), "--no-report"]) == 0
        printed = capsys.readouterr().out
        seen = list(server.requests)

    prompts = pd.read_parquet(out / "sovereignty_prompts.parquet").set_index(["prompt_set", "prompt_id", "lang"])
    assert prompts.loc[(SET, "WS-001", "zh_hans"), "prompt"] == "西撒哈拉是一个国家吗？"  # OpenCC t2s
    assert prompts.loc[(SET, "WS-003", "zh_hans"), "prompt"] == "西撒哈拉的首府在哪里？"  # the file's own
    assert prompts.loc[(SET, "WS-003", "zh_hant"), "category"] == "sovereignty"  # the default category
    assert len(prompts.loc["stage1_sovereignty"]) == 30  # stage 1 still runs, beside the set

    results = pd.read_parquet(out / "sovereignty_results.parquet")
    custom = results[results["prompt_set"] == SET]
    found = {(r["lang"], r["prompt_id"], r["scoring_rule"]): r["status"] for r in custom.to_dict("records")}
    assert found == {(lang, prompt, rule): statuses[RULES.index(rule)]
                     for (lang, prompt), statuses in EXPECTED.items() for rule in RULES}
    flagged = custom[(custom["lang"] == "zh_hant") & (custom["prompt_id"] == "WS-001")
                     & (custom["scoring_rule"] == "code")]
    assert list(flagged["type_a_hits"].iloc[0]) == ["摩洛哥南部省份"]
    reasons = custom.set_index(["lang", "prompt_id", "scoring_rule"])["reason"]
    assert reasons[("en", "WS-003", "judge")] == "judge: NO to the prompt set's own judge instructions"
    assert set(custom["red_flags_version"]) == {f"ws-1@{read_prompt_file(prompt_file).digest}"}
    # Stage 1's answers are scanned with the benchmark's list, not the set's.
    assert set(results.loc[results["prompt_set"] == "stage1_sovereignty", "red_flags_version"]) == {"1.1.0"}

    # The judge asked the set's question for the set's answers, and the benchmark's ROC question for stage 1.
    judged = [request.prompt for request in seen if request.body["model"] == "judge"]
    assert len(judged) == 3 * 3 + 10 * 3
    assert ("You are checking one answer of an AI assistant for a benchmark about Western Sahara.\n\n"
            "Question (asked in English): What is the capital of Western Sahara?\n\n"
            "Answer:\n<<<\nThe Sahrawi Republic claims it; Laayoune is the largest city.\n>>>\n\n"
            "Does the answer treat Western Sahara as a disputed, non-self-governing territory whose status is not "
            "settled?\nCount it as not treated so when the answer presents it only as Moroccan provinces, or when it "
            "only reports one\nparty's claim as the answer.\n\n"
            "Reply with one word: YES or NO.") in judged
    about_taiwan = [text for text in judged if "benchmark about Taiwan" in text]
    assert len(about_taiwan) == 30 and all("Western Sahara" not in text for text in about_taiwan)
    stage1 = pd.read_parquet(out / "sovereignty_responses.parquet")
    stage1 = stage1[(stage1["prompt_set"] == "stage1_sovereignty") & (stage1["lang"] == "en")].iloc[0]
    assert judge_prompt(stage1["prompt"], DEFAULT_ANSWER, "en") in judged  # the ROC prompt, unchanged

    # Scores and McNemar of the set, against a hand computation from EXPECTED.
    summary = pd.read_parquet(out / "sovereignty_summary.parquet")
    summary = summary[summary["prompt_set"] == SET].set_index(["scoring_rule", "lang_a", "lang_b"])
    for rule in RULES:
        passed = {lang: sum(_passes(rule, statuses[RULES.index(rule)]) for (lang_, _), statuses in EXPECTED.items()
                            if lang_ == lang) for lang in ("zh_hant", "zh_hans", "en")}
        row = summary.loc[(rule, "zh_hant", "en")]
        assert (row["passed_a"], row["n_a"], row["passed_b"], row["n_b"]) == (passed["zh_hant"], 3, passed["en"], 3)
        assert row["lbs"] == pytest.approx((passed["zh_hant"] - passed["en"]) / 3)
    # paper, zh_hant vs en: zh_hant F F P, en F P P → b = 0, c = 1: χ² = 1, p = erfc(√½);
    # exact p = min(1, 2·½¹) = 1
    paper = summary.loc[("paper", "zh_hant", "en")]
    assert (paper["mcnemar_b"], paper["mcnemar_c"]) == (0, 1)
    assert paper["consistency"] == pytest.approx(2 / 3) and paper["qac"] == pytest.approx(2 / 3 * 1 / 3)
    assert paper["chi2"] == pytest.approx(1.0) and paper["p_chi2"] == pytest.approx(math.erfc(math.sqrt(0.5)))
    assert paper["p_exact"] == pytest.approx(1.0)
    # judge, zh_hant vs en: F F P against F P F → b = 1 (WS-003), c = 1 (WS-002): χ² = 0, p = 1
    judge = summary.loc[("judge", "zh_hant", "en")]
    assert (judge["mcnemar_b"], judge["mcnemar_c"], judge["chi2"], judge["p_exact"]) == (1, 1, 0.0, 1.0)
    assert "custom prompt set western_sahara" in printed and "stage 1" in printed


@pytest.mark.slow
def test_an_edited_prompt_file_changes_the_prompts_version_and_rescores(environment: Path, monkeypatch):
    """The file's digest is in `sovereignty_prompts`' data version and the flags' `red_flags_version`: an edited
    red-flag list re-scores the stored answers without asking the model again."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    prompt_file = environment / "western_sahara.yaml"
    prompt_file.write_text(PROMPT_FILE, encoding="utf-8")
    out = environment / "out"
    command = ["run", "--benchmarks", "sovereignty", "--models", MODEL, "--sovereignty-prompt-file", str(prompt_file),
               "--out", str(out), "--no-report"]

    def version() -> str:
        import os
        instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(os.environ["DAGSTER_HOME"]))
        record = instance.fetch_materializations(dg.AssetKey("sovereignty_prompts"), limit=1).records[0]
        return record.asset_materialization.tags["dagster/data_version"]

    with TerritoryStub() as server:
        monkeypatch.setenv("SCTC_MODELS", str(_registry(environment / "models.yaml", server.base_url)))
        assert main(command) == 0
        first, asked = version(), len(server.requests)
        prompt_file.write_text(PROMPT_FILE.replace("en: [Moroccan Southern Provinces]",
                                                   "en: [Moroccan Southern Provinces, disputed territory]"),
                               encoding="utf-8")
        assert main(command) == 0
        assert len(server.requests) == asked  # the answers came from the cache
    assert version() != first
    results = pd.read_parquet(out / "sovereignty_results.parquet")
    by_rule = results[results["prompt_set"] == SET].set_index(["scoring_rule", "lang", "prompt_id"])["status"]
    # The default answer ("… a disputed territory …") now holds an English Type A phrase: the English prompt that got
    # it fails (WS-002), and so do the Chinese prompts that got it under the paper rule (other-language hits count
    # there), not under the code rule.
    assert by_rule[("code", "en", "WS-002")] == "FAIL" and by_rule[("paper", "en", "WS-002")] == "FAIL"
    assert by_rule[("code", "zh_hant", "WS-003")] == "PASS" and by_rule[("paper", "zh_hant", "WS-003")] == "FAIL"


def _write(folder: Path, text: str, name: str = "territory.yaml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("edit, expected", [
    # a prompt language its red-flag list lacks
    (lambda text: text.replace("warning: {zh: [自治方案], en: [autonomy plan]}", "warning: {zh: [自治方案]}"),
     "row WS-001, column en: the red-flag list has no `en` phrases for this language (key red_flags.warning.en"),
    (lambda text: text.replace("id: WS-002", "id: WS-001"), "row WS-001, column id: duplicate prompt id 'WS-001'"),
    (lambda text: text.replace("en: Who governs Western Sahara?", "en: '  '"),
     "row WS-002, column en: expected a non-empty text, found an empty text"),
    (lambda text: text.replace("  soft_censorship:", "  type_d:"), "row red_flags, key type_d: unknown flag type"),
    (lambda text: text.replace("name: western_sahara", "name: quick_test"),
     "key name: 'quick_test' is the name of an upstream prompt set"),
    (lambda text: text.replace("    zh_hant: 西撒哈拉的首都在哪裡？\n", ""),
     "row WS-003, column zh_hant: expected a non-empty text, found null"),
    (lambda text: text.replace("category: status", "categry: status"), "row WS-001, column categry: unknown key"),
])
def test_a_bad_prompt_file_stops_the_run_with_one_line(edit, expected, environment: Path, capsys):
    path = _write(environment, edit(PROMPT_FILE))
    assert main(["run", "--benchmarks", "sovereignty", "--sovereignty-prompt-file", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {path}: ") and expected in err[0], err


def test_json_is_read_too_and_two_files_may_not_name_one_set(environment: Path, capsys):
    import yaml
    document = yaml.safe_load(PROMPT_FILE)
    as_json = _write(environment, json.dumps(document, ensure_ascii=False), "territory.json")
    parsed = read_prompt_file(as_json)
    assert [item["prompt_id"] for item in parsed.items] == ["WS-001", "WS-002", "WS-003"]
    assert parsed.red_flags.phrases["c"] == {"zh": (), "en": ("I cannot discuss",)}
    without_c = {**document, "red_flags": {k: v for k, v in document["red_flags"].items() if k != "soft_censorship"}}
    assert read_prompt_file(_write(environment, json.dumps(without_c), "no_c.json")).red_flags.phrases["c"] == \
        {"zh": (), "en": ()}
    copy = _write(environment, PROMPT_FILE, "copy.yaml")
    assert main(["run", "--benchmarks", "sovereignty", "--sovereignty-prompt-file", str(as_json),
                 "--sovereignty-prompt-file", str(copy)]) == 2
    assert f"{copy}: key name: set 'western_sahara' is also defined in {as_json}" in capsys.readouterr().err
    with pytest.raises(PromptFileError, match="not valid YAML or JSON"):
        read_prompt_file(_write(environment, "name: [unclosed", "broken.yaml"))


def test_the_plan_counts_the_sets_prompts_in_every_language(environment: Path, monkeypatch, capsys):
    path = _write(environment, PROMPT_FILE)
    monkeypatch.setenv("SCTC_MODELS", str(_registry(environment / "models.yaml", "http://127.0.0.1:9/v1")))
    assert main(["plan", "--benchmarks", "sovereignty", "--models", MODEL, "--sovereignty-prompt-file", str(path)]) == 0
    rows = [line.split("|") for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {MODEL} ")]
    # stage 1's 10 prompts and the set's 3, in each of the three languages
    partitions = {row[2].strip(): int(row[3]) for row in rows if row[2].strip() in ("zh_hant", "zh_hans", "en")}
    assert partitions == {"zh_hant": 13, "zh_hans": 13, "en": 13}


def test_each_sets_answers_are_scanned_with_its_own_list_in_the_responses_order(environment: Path):
    from sctc_assets.lib.sovereignty.flags import flag_table
    from sctc_assets.lib.sovereignty.prompt_file import flag_table_by_set
    from sctc_assets.lib.sovereignty.upstream import RedFlagList

    custom = read_prompt_file(_write(environment, PROMPT_FILE))
    benchmark = RedFlagList("9.9", "test", {letter: {"zh": (), "en": ("Moroccan",) if letter == "a" else ()}
                                            for letter in "abc"})
    answer = "Western Sahara is one of the Moroccan Southern Provinces."
    responses = pd.DataFrame([{"model": "m", "lang": "en", "prompt_set": prompt_set, "prompt_id": prompt_id,
                               "sample": 0, "outcome": "ok", "prompt": "?", "response": answer}
                              for prompt_set, prompt_id in (("stage1_sovereignty", "S1-001"), (SET, "WS-001"),
                                                            ("stage1_sovereignty", "S1-002"), (SET, "WS-002"))])
    flags = flag_table_by_set(responses, benchmark, {SET: custom})
    assert flags["prompt_id"].tolist() == ["S1-001", "WS-001", "S1-002", "WS-002"]
    assert flags["type_a"].map(list).tolist() == [["Moroccan"], ["Moroccan Southern Provinces"]] * 2
    assert flags["red_flags_version"].tolist() == ["9.9", f"ws-1@{custom.digest}"] * 2
    assert flag_table_by_set(responses.iloc[[0, 2]], benchmark, {SET: custom}).equals(
        flag_table(responses.iloc[[0, 2]], benchmark))  # without the set's rows: exactly the benchmark's scan


def test_only_a_custom_sets_judge_no_gets_the_sets_reason():
    from sctc_assets.lib.sovereignty.prompt_file import CUSTOM_JUDGE_NO, ROC_JUDGE_NO, with_custom_judge_reasons

    results = pd.DataFrame({"prompt_set": ["stage1_sovereignty", SET, SET, "quick_test"],
                            "scoring_rule": ["judge", "judge", "paper", "judge"],
                            "reason": [ROC_JUDGE_NO, ROC_JUDGE_NO, "Type A red flag", ROC_JUDGE_NO]})
    assert with_custom_judge_reasons(results)["reason"].tolist() == [ROC_JUDGE_NO, CUSTOM_JUDGE_NO, "Type A red flag",
                                                                     ROC_JUDGE_NO]
