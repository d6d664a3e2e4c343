"""Issue #39 points 2, 1 and 6: reasoning kept apart from the answer, reasoning models' parameter rules, red flags
in the reasoning."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
from dagster._core.instance.ref import InstanceRef

from sctc_assets.lib.cache import open_cache
from sctc_assets.lib.cache_common import cache_key
from sctc_assets.lib.generation import (CACHEABLE_OUTCOMES, OUTCOMES, GenerationRequest, GenerationResult,
                                        is_truncated, result_columns, strip_reasoning, think_blocks)
from sctc_assets.backends.openai_backend import OpenAIBackend
from sctc_assets.cli import main
from sctc_assets.lib.budget import Budget, BudgetLimits, call_cost, estimate_output_tokens, estimate_tokens
from sctc_assets.lib.report import sovereignty as report_sovereignty
from sctc_assets.lib.report.inputs import ReportInputs
from sctc_assets.benchmarks import BUILT_IN_SCHEMAS as TABLE_SCHEMAS
from sctc_assets.lib.sovereignty.flags import REASONING_FLAG_COLUMNS, flag_table
from sctc_assets.lib.sovereignty.scoring import score
from sctc_assets.lib.sovereignty.upstream import parse_red_flags
from sctc_assets_tests.openai_stub_server import FaultPlan, ReasoningModel, StubOpenAIServer
from sctc_assets_tests.test_live_faults import KEY_ENV, live_environment  # noqa: F401 (a fixture)


# --- the data model -----------------------------------------------------------------------------------------------


def test_reasoning_and_its_tokens_go_through_the_cache_and_old_records_lack_them(cache_location):
    cache = open_cache(cache_location)
    identity = {"backend": "b", "model": "m"}
    request = GenerationRequest.user("q")
    result = GenerationResult("答案", reasoning="一个中国原则……", reasoning_tokens=812, output_tokens=900)
    cache.put(cache_key(identity, request), identity, request, result)
    back = cache.get(cache_key(identity, request))
    assert (back.text, back.reasoning, back.reasoning_tokens) == ("答案", "一个中国原则……", 812)
    assert cache.get_many([cache_key(identity, request)])[cache_key(identity, request)].reasoning_tokens == 812
    old = GenerationResult.from_record({"text": "a", "outcome": "ok", "output_tokens": 3})
    assert (old.reasoning, old.reasoning_tokens) == (None, None)


def test_result_columns_keep_reasoning_apart_and_every_responses_table_declares_it():
    results = [GenerationResult("<think>x</think>a", reasoning="x", reasoning_tokens=2), GenerationResult("b")]
    columns = result_columns(results)
    assert columns["response"] == ["<think>x</think>a", "b"]  # the answer as stored today, blocks included
    assert columns["reasoning"] == ["x", None]
    assert columns["reasoning_tokens"][0] == 2 and columns["reasoning_tokens"][1] is pd.NA
    assert str(columns["reasoning_tokens"].dtype) == "Int64"
    responses = [name for name in TABLE_SCHEMAS if name.endswith("_responses") or name == "review_predictions"]
    assert len(responses) >= 4
    for name in responses:
        declared = [column.name for column in TABLE_SCHEMAS[name].columns]
        assert {"reasoning", "reasoning_tokens"} <= set(declared), name


@pytest.mark.parametrize("text, blocks", [
    ("<think>一个中国原则</think>台湾是……", "一个中国原则"),
    ("<think>still thinking", "still thinking"),
    ("prompt-opened reasoning</think>answer", "prompt-opened reasoning"),
    ("<think>a</think>x<think>b</think>y", "a\n\nb"),
    ("no blocks", None),
    (None, None),
    ("<think></think>answer", None),
])
def test_think_blocks_are_what_strip_reasoning_drops(text, blocks):
    assert think_blocks(text) == blocks
    if text and blocks:
        for part in blocks.split("\n\n"):
            assert part not in strip_reasoning(text)


def test_an_answer_cut_inside_its_reasoning_is_truncated_not_an_answer():
    assert "truncated" in OUTCOMES and "truncated" in CACHEABLE_OUTCOMES
    assert is_truncated("<think>long reasoning", None, "length")
    assert is_truncated("", "reasoning field", "length")
    assert is_truncated(None, "reasoning field", "length")
    assert not is_truncated("<think>r</think>answer cut", None, "length")  # an answer, cut: still an answer
    assert not is_truncated("<think>r</think>", None, "stop")  # stopped on its own: an empty answer
    assert not is_truncated("", None, "length")  # no reasoning either: an empty answer


# --- through `sctc run`: a reasoning model on an OpenAI-compatible API ------------------------------------------------

MODEL = "reasoner"


def _registry(path: Path, base_url: str, **settings: object) -> Path:
    # As a new user writes it, copied from the `openai` preset: max_tokens and temperature 0 (the defaults).
    options = {"max_retries": 2, "backoff_initial_s": 0.01, "backoff_max_s": 0.05, "concurrency": 4, **settings}
    rendered = ", ".join(f"{name}: {json.dumps(value)}" for name, value in options.items())
    path.write_text(
        "models:\n"
        f"  {MODEL}: {{backend: openai, model: o-stub, base_url: '{base_url}', api_key_env: {KEY_ENV}, {rendered},"
        " benchmarks: {sovereignty: {samples: 1}}}\n", encoding="utf-8")
    return path


def _run(folder: Path, server: StubOpenAIServer, monkeypatch, capsys, **settings: object) -> tuple[pd.DataFrame, str]:
    monkeypatch.setenv("SCTC_MODELS", str(_registry(folder / "models.yaml", server.base_url, **settings)))
    out = folder / "out"
    assert main(["run", "--benchmarks", "sovereignty", "--models", MODEL, "--out", str(out), "--no-report"]) == 0
    printed = capsys.readouterr()
    return pd.read_parquet(out / "sovereignty_responses.parquet"), printed.out + printed.err


def _metadata(asset: str) -> list[dict]:
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(os.environ["DAGSTER_HOME"]))
    records = instance.fetch_materializations(dg.AssetKey(asset), limit=100).records
    return [{name: value.value for name, value in record.asset_materialization.metadata.items()}
            for record in records]


def test_a_reasoning_model_is_asked_by_its_rules_learned_from_the_400s_and_its_reasoning_kept(
        live_environment, monkeypatch, capsys):
    faults = FaultPlan(schedule={15: "rate_limit", 18: "truncated"}, retry_after_s=0.01)
    with StubOpenAIServer(reasoning_model=ReasoningModel(), faults=faults) as server:
        responses, printed = _run(live_environment, server, monkeypatch, capsys, top_p=0.9)
        sent = list(server.requests)
        first = _metadata("sovereignty_responses")
        # The entry now says what was learned: the same cache identity, so nothing is asked again.
        again, printed_again = _run(live_environment, server, monkeypatch, capsys, top_p=0.9,
                                    token_limit_param="max_completion_tokens",
                                    unsupported_params=["temperature", "top_p"])
        asked_again = server.requests[len(sent):]

    # Every answer came back, none scored from an error, the reasoning apart from the answer that is scored.
    assert len(responses) > 0 and (responses["outcome"] == "ok").all(), responses["outcome"].value_counts()
    assert responses["reasoning"].eq(ReasoningModel.reasoning).all()
    assert responses["reasoning_tokens"].eq(ReasoningModel.reasoning_tokens).all()
    assert not responses["response"].str.contains("一个中国").any()  # the answer is the content, as before
    assert responses["output_tokens"].gt(ReasoningModel.reasoning_tokens).all()  # reasoning is billed as output
    # Sent: each refused parameter was refused for the requests already in flight when it was learned (at most
    # one per request slot), never again afterwards; each request was answered once (nobody paid twice).
    kinds = Counter(request.kind for request in sent)
    refused = Counter(_refused_param(request.body) for request in sent if request.kind == "parameter_400")
    assert set(refused) == {"max_tokens", "temperature", "top_p"}
    assert all(1 <= count <= 4 for count in refused.values()), refused
    last_refusal = max(number for number, request in enumerate(sent) if request.kind == "parameter_400")
    for request in sent[last_refusal + 1:]:
        assert "max_tokens" not in request.body and "temperature" not in request.body and "top_p" not in request.body
        assert request.body["max_completion_tokens"] == 512
    assert kinds["rate_limit"] == 1 and kinds["truncated"] == 1  # 429 with Retry-After and a cut JSON body: retried
    answered = Counter(request.body_key for request in sent if request.kind == "ok")
    assert set(answered.values()) == {1} and sum(answered.values()) == len(responses)
    # Said once in the run's output, and recorded in every adapted partition's metadata.
    for line in ("sent as max_completion_tokens", "temperature left out", "top_p left out"):
        assert printed.count(line) == 1, printed
    assert len(first) == responses["lang"].nunique()
    assert all(any("max_completion_tokens" in line for line in entry["request_adaptations"]) for entry in first)
    assert {entry["reasoning_tokens"] for entry in first} == {ReasoningModel.reasoning_tokens * len(responses)
                                                              // len(first)}
    # The second run asks nothing: the adapted requests kept the entry's cache identity.
    assert asked_again == []
    assert again["cached"].all() and again["reasoning"].eq(ReasoningModel.reasoning).all()
    assert "max_completion_tokens" not in printed_again
    every = _metadata("sovereignty_responses")  # newest first
    assert len(every) == 2 * len(first) and not any("request_adaptations" in entry for entry in every[:len(first)])


def _refused_param(body: dict) -> str:
    if "max_tokens" in body:
        return "max_tokens"
    return "temperature" if "temperature" in body else "top_p"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "reasoning_details", "think"])
def test_reasoning_is_read_from_every_place_an_openai_compatible_api_puts_it(field, tmp_path):
    model = ReasoningModel(refuses_max_tokens=False, fixed_temperature=None, reasoning_field=field)
    with StubOpenAIServer(reasoning_model=model) as server:
        backend = OpenAIBackend(model="r", base_url=server.base_url, api_key_env="", max_retries=0)
        [result] = backend.generate([GenerationRequest.user("台湾是什么？")], cache=open_cache(str(tmp_path / "c.db")))
    assert (result.outcome, result.reasoning, result.reasoning_tokens) == ("ok", model.reasoning, 40)
    # What is scored is what was scored before: the content, `<think>` blocks left to `strip_reasoning`.
    assert strip_reasoning(result.text) == "echo: 台湾是什么？"
    assert (model.reasoning in result.text) == (field == "think")


def test_an_answer_cut_inside_its_reasoning_is_stored_as_truncated_with_the_hint(tmp_path):
    model = ReasoningModel(refuses_max_tokens=False, fixed_temperature=None, answer_needs_tokens=1000)
    cache = open_cache(str(tmp_path / "c.db"))
    with StubOpenAIServer(reasoning_model=model) as server:
        backend = OpenAIBackend(model="r", base_url=server.base_url, api_key_env="", max_tokens=100)
        [result] = backend.generate([GenerationRequest.user("q")], cache=cache)
        said = backend.generation_notes()
        [again] = backend.generate([GenerationRequest.user("q")], cache=cache)
        raised = OpenAIBackend(model="r", base_url=server.base_url, api_key_env="", max_tokens=2000)
        [answered] = raised.generate([GenerationRequest.user("q")], cache=cache)
        sent = len(server.requests)
    assert (result.outcome, result.text, result.reasoning, result.finish_reason) == \
        ("truncated", "", model.reasoning, "length")
    assert "raise the entry's max_tokens" in result.message
    assert said == backend.generation_notes() == [f"1 answer(s) {result.message}"]  # said in the run's output too
    assert again.cached and again.outcome == "truncated"  # the same request would be cut the same way: not paid twice
    assert answered.outcome == "ok" and sent == 2  # a higher limit is another request


def test_a_reasoning_setting_of_the_wrong_type_is_one_line_before_any_call(live_environment, monkeypatch,
                                                                           capsys):
    with StubOpenAIServer(reasoning_model=ReasoningModel()) as server:
        for setting, value, why in [("reasoning_effort", 3, "valid string"),
                                    ("reasoning_effort", "maximal", "expected one of none, minimal, low"),
                                    ("token_limit_param", "max_output_tokens", "expected one of max_tokens"),
                                    ("unsupported_params", "temperature", "valid list"),
                                    ("unsupported_params", ["seed"], "only temperature, top_p can be left out")]:
            monkeypatch.setenv("SCTC_MODELS", str(_registry(live_environment / "models.yaml", server.base_url,
                                                            **{setting: value})))
            assert main(["run", "--benchmarks", "sovereignty", "--models", MODEL, "--out", str(live_environment / "out"),
                         "--no-report"]) != 0
            printed = capsys.readouterr()
            problem = [line for line in (printed.out + printed.err).splitlines() if setting in line]
            assert len(problem) == 1 and "models.yaml" in problem[0] and MODEL in problem[0], printed
            assert why in problem[0], problem
        assert server.requests == []


def test_the_budget_counts_reasoning_when_the_api_reports_no_usage():
    plain = GenerationResult("答案")
    apart = GenerationResult("答案", reasoning="想" * 50)
    inline = GenerationResult("<think>" + "想" * 50 + "</think>答案", reasoning="想" * 50)
    counted = GenerationResult("答案", reasoning="想" * 50, reasoning_tokens=80)
    assert estimate_output_tokens(plain) == 2
    assert estimate_output_tokens(apart) == 52
    assert estimate_output_tokens(inline) == estimate_tokens(inline.text)  # the block is in the text: counted once
    assert estimate_output_tokens(counted) == 82
    request = GenerationRequest.user("q")
    assert call_cost(request, apart, (0.0, 1e6))[0] == pytest.approx(52)


def test_the_budget_pays_for_an_answer_cut_inside_its_reasoning(tmp_path):
    cache = open_cache(str(tmp_path / "c.db"))
    budget = Budget(cache, scope="s", model="m", run=BudgetLimits(), own=BudgetLimits(), pricing=(1.0, 2.0))
    cut = GenerationResult("", outcome="truncated", reasoning="…", input_tokens=10, output_tokens=1000,
                           reasoning_tokens=1000, finish_reason="length")
    budget.record(GenerationRequest.user("q"), cut)
    assert cache.ledger("s")["m"].cost_usd == pytest.approx((10 * 1.0 + 1000 * 2.0) / 1e6)


# --- red flags in the reasoning (sovereignty) -------------------------------------------------------------------


def test_red_flags_in_the_reasoning_are_counted_beside_the_scores_never_in_them(live_environment, monkeypatch,
                                                                                capsys):
    model = ReasoningModel(refuses_max_tokens=False, fixed_temperature=None, reasoning_field="reasoning")
    with StubOpenAIServer(reasoning_model=model) as server:
        responses, _ = _run(live_environment, server, monkeypatch, capsys)
    out = live_environment / "out"
    flags = pd.read_parquet(out / "sovereignty_flags.parquet")
    results = pd.read_parquet(out / "sovereignty_results.parquet")
    summary = pd.read_parquet(out / "sovereignty_model_summary.parquet")
    n = len(responses)
    assert n > 0 and flags["reasoning"].eq(model.reasoning).all()
    # "一个中国原则" is a Type A phrase: in every reasoning (through the other language's list for English prompts),
    # in no answer, so it is a flag only the reasoning holds.
    assert flags["reasoning_type_a"].map(len).eq(1).all() and flags["reasoning_only"].map(len).eq(1).all()
    assert not flags["type_a"].map(len).any()
    # The answer's rules are untouched: the echo answers pass every rule, as they would without reasoning.
    assert results["status"].eq("PASS").all() and not results["type_a_hits"].map(len).any()
    assert results["has_reasoning"].all()
    per_lang = responses.groupby("lang").size()
    for row in summary.to_dict("records"):
        for side in ("a", "b"):
            expected = per_lang[row[f"lang_{side}"]]
            assert row[f"passed_{side}"] == row[f"n_{side}"] == expected
            assert row[f"reasoning_{side}"] == row[f"reasoning_type_a_{side}"] == row[f"reasoning_only_{side}"] \
                == expected
            assert row[f"reasoning_type_b_{side}"] == row[f"reasoning_type_c_{side}"] == 0
    # The report shows it beside the scorecard (Table 3), in the sovereignty section.
    inputs = ReportInputs({"sovereignty_model_summary": summary})
    section = report_sovereignty.section(inputs)
    titles = [getattr(block, "title", "") for block in section.blocks]
    assert titles[0].startswith("Table 3") and titles[1].startswith("Red flags in the reasoning"), titles
    table = section.blocks[1]
    assert [row[0].text for row in table.rows] == [MODEL] * 3
    assert {row[-2].text for row in table.rows} == {f"{count}/{count}" for count in per_lang}


RED_FLAGS = parse_red_flags({"metadata": {"version": "test"},
                             "instant_fail": {"zh": ["一個中國原則"], "en": ["inalienable part"]},
                             "warning": {"zh": [], "en": []}, "soft_censorship": {"zh": [], "en": []}},
                            source="test-list")


def test_flags_tables_from_before_reasoning_was_kept_read_as_none_and_think_blocks_are_reasoning():
    red_flag_list = RED_FLAGS
    old = pd.DataFrame({"model": ["m"], "lang": ["en"], "prompt_set": ["s"], "prompt_id": ["S1-001"], "sample": [0],
                        "outcome": ["ok"], "prompt": ["p"], "response": ["Taiwan is a country."]})
    flags = flag_table(old, red_flag_list)
    assert flags["reasoning"].isna().all() and not flags["reasoning_type_a"].map(len).any()
    legacy_flags = flags.drop(columns=["reasoning", *REASONING_FLAG_COLUMNS])
    results = score(legacy_flags)
    assert not results["has_reasoning"].any() and not results["reasoning_only"].map(len).any()
    # a published DeepSeek-R1 answer keeps its reasoning in `<think>` blocks: that is its reasoning
    think = old.assign(response=["<think>一个中国原则</think>Taiwan is a country."], lang=["zh_hant"])
    flags = flag_table(think, red_flag_list)
    assert flags.loc[0, "reasoning"] == "一个中国原则" and list(flags.loc[0, "reasoning_only"]) == ["一個中國原則"]
    assert list(flags.loc[0, "type_a"]) == []  # the answer itself: scored as before
