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
from sctc_assets.cli import main
from sctc_assets.lib.schemas import TABLE_SCHEMAS
from sctc_assets_tests.openai_stub_server import FaultPlan, ReasoningModel, StubOpenAIServer


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

KEY_ENV = "SCTC_TEST_REASONING_KEY"
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


@pytest.fixture
def live(isolated_data_dir, extracted_upstream, tsb_location, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-reasoning")
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    monkeypatch.delenv("SCTC_MAX_CALLS", raising=False)
    monkeypatch.delenv("SCTC_MAX_COST_USD", raising=False)
    return tmp_path


def _run(live: Path, server: StubOpenAIServer, monkeypatch, capsys, **settings: object) -> tuple[pd.DataFrame, str]:
    monkeypatch.setenv("SCTC_MODELS", str(_registry(live / "models.yaml", server.base_url, **settings)))
    out = live / "out"
    assert main(["run", "--benchmarks", "sovereignty", "--models", MODEL, "--out", str(out), "--no-report"]) == 0
    printed = capsys.readouterr()
    return pd.read_parquet(out / "sovereignty_responses.parquet"), printed.out + printed.err


def _metadata(asset: str) -> list[dict]:
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(os.environ["DAGSTER_HOME"]))
    records = instance.fetch_materializations(dg.AssetKey(asset), limit=100).records
    return [{name: value.value for name, value in record.asset_materialization.metadata.items()}
            for record in records]


def test_a_reasoning_model_is_asked_by_its_rules_learned_from_the_400s_and_its_reasoning_kept(live, monkeypatch,
                                                                                               capsys):
    faults = FaultPlan(schedule={15: "rate_limit", 18: "truncated"}, retry_after_s=0.01)
    with StubOpenAIServer(reasoning_model=ReasoningModel(), faults=faults) as server:
        responses, printed = _run(live, server, monkeypatch, capsys, top_p=0.9)
        sent = list(server.requests)
        first = _metadata("sovereignty_responses")
        # The entry now says what was learned: the same cache identity, so nothing is asked again.
        again, printed_again = _run(live, server, monkeypatch, capsys, top_p=0.9,
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
    for line in ("sent as max_completion_tokens", "temperature and top_p left out"):
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
