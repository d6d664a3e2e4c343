"""Issue #39 points 2, 1 and 6: reasoning kept apart from the answer, reasoning models' parameter rules, red flags
in the reasoning."""

from __future__ import annotations

import pandas as pd
import pytest

from sctc_assets.lib.cache import open_cache
from sctc_assets.lib.cache_common import cache_key
from sctc_assets.lib.generation import (CACHEABLE_OUTCOMES, OUTCOMES, GenerationRequest, GenerationResult,
                                        is_truncated, result_columns, strip_reasoning, think_blocks)
from sctc_assets.lib.schemas import TABLE_SCHEMAS


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
