"""The native `anthropic` and `gemini` backends against stub servers that misbehave as the real APIs do.

Unit tests check each request's shape (where the key and the system prompt go), refusals, retries honouring
`retry-after`, cut bodies and the key kept out of errors; pipeline tests run `sctc run` on the sovereignty benchmark
(10 prompts × 3 languages) through each stub and count what was sent, stored, refused, failed and paid twice.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pydantic
import pytest

from sctc_assets.backends import BackendUnavailable, backend_class
from sctc_assets.backends.anthropic_backend import AnthropicBackend
from sctc_assets.backends.gemini_backend import GeminiBackend
from sctc_assets.backends.openai_backend import OpenAIBackend
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets_tests import anthropic_stub_server as anthropic_stub
from sctc_assets_tests import gemini_stub_server as gemini_stub

KEY_ENV = "SCTC_TEST_PROVIDER_KEY"
KEY = "sk-provider-secret-123"
FAST = {"api_key_env": KEY_ENV, "backoff_initial_s": 0.01, "backoff_max_s": 5.0, "timeout_s": 10.0}


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


# --- unit: request shapes -----------------------------------------------------------------------------------------

def test_the_catalog_knows_both_backends():
    assert backend_class("anthropic") is AnthropicBackend
    assert backend_class("gemini") is GeminiBackend
    assert AnthropicBackend(model="m").base_url == "https://api.anthropic.com"
    assert GeminiBackend(model="m").base_url == "https://generativelanguage.googleapis.com"


def test_both_get_an_endpoint_lane_of_their_own_in_sctc_run():
    from sctc_assets.lib.backend_catalog import traits
    from sctc_assets.lib.model_registry import parse_registry
    from sctc_assets.running.concurrent import endpoint_of, plan_lanes

    entries = parse_registry({"models": {
        "claude": {"backend": "anthropic", "model": "claude-haiku-4-5"},
        "gemini": {"backend": "gemini", "model": "gemini-2.5-flash"},
        "gemini-proxy": {"backend": "gemini", "model": "gemini-2.5-flash", "base_url": "http://127.0.0.1:9/"},
    }}, source="test")
    endpoints = {key: endpoint_of(entry) for key, entry in entries.items()}
    assert endpoints == {"claude": "https://api.anthropic.com", "gemini": "https://generativelanguage.googleapis.com",
                         "gemini-proxy": "http://127.0.0.1:9"}
    assert [lane.models for lane in plan_lanes(list(entries), endpoints)] == [("claude",), ("gemini",),
                                                                               ("gemini-proxy",)]
    for name in ("anthropic", "gemini"):
        assert traits(name).uses_cache and traits(name).replays is None and not traits(name).forkable


def test_the_anthropic_stub_refuses_a_system_role_inside_messages(key):
    with anthropic_stub.StubAnthropicServer() as server:
        body = json.dumps({"model": "m", "max_tokens": 8, "messages": [{"role": "system", "content": "be brief"},
                                                                     {"role": "user", "content": "hi"}]}).encode()
        request = urllib.request.Request(server.base_url + anthropic_stub.MESSAGES_PATH, body, method="POST",
                                         headers={"x-api-key": key, "anthropic-version": "2023-06-01",
                                                  "Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400
    assert json.loads(refused.value.read())["error"]["type"] == "invalid_request_error"


def test_anthropic_sends_the_system_prompt_top_level_with_its_headers(key):
    with anthropic_stub.StubAnthropicServer() as server:
        backend = AnthropicBackend(model="claude-test", base_url=server.base_url, system_prompt="entry system",
                                   max_tokens=64, temperature=0.3, **FAST)
        results = backend.generate([GenerationRequest.user("甲"), GenerationRequest.user("乙", system="own system")])
    assert [result.outcome for result in results] == ["ok", "ok"]
    assert [result.text for result in results] == ["echo: 甲", "echo: 乙"]
    assert results[0].input_tokens == 1 and results[0].served_model == "claude-stub"
    assert server.counts() == {"ok": 2}  # nothing rejected: no system role inside messages
    bodies = {request.prompt: request.body for request in server.requests}
    assert bodies["甲"]["system"] == "entry system" and bodies["乙"]["system"] == "own system"
    assert all(message["role"] == "user" for body in bodies.values() for message in body["messages"])
    assert bodies["甲"]["max_tokens"] == 64 and bodies["甲"]["temperature"] == 0.3
    headers = server.requests[0].headers
    assert headers["x-api-key"] == key and headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers


def test_anthropic_sends_no_temperature_unless_set_as_newer_models_refuse_it(key):
    with anthropic_stub.StubAnthropicServer() as server:
        backend = AnthropicBackend(model="claude-opus-4-7", base_url=server.base_url, **FAST)
        assert [result.outcome for result in backend.generate([GenerationRequest.user("甲")])] == ["ok"]
        assert "temperature" not in server.requests[0].body
        told = AnthropicBackend(model="claude-opus-4-7", base_url=server.base_url, temperature=0.0, **FAST)
        refused = told.generate([GenerationRequest.user("乙")])[0]
    assert refused.outcome == "error" and "`temperature` is deprecated for this model" in refused.message


def test_gemini_sends_the_key_in_a_header_and_the_system_prompt_as_system_instruction(key):
    with gemini_stub.StubGeminiServer() as server:
        backend = GeminiBackend(model="gemini-test", base_url=server.base_url, system_prompt="entry system",
                                max_tokens=64, seed=7, **FAST)
        results = backend.generate([GenerationRequest.user("甲", trial=2)])
    assert [(result.outcome, result.text) for result in results] == [("ok", "echo: 甲")]
    assert results[0].seed == 9 and results[0].served_model == "gemini-stub"
    body = server.requests[0].body
    assert body["systemInstruction"] == {"parts": [{"text": "entry system"}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "甲"}]}]
    assert body["generationConfig"] == {"temperature": 0.0, "maxOutputTokens": 64, "seed": 9}
    assert server.requests[0].headers["x-goog-api-key"] == key
    assert server.queries == []  # never ?key=: URLs end up in proxy logs


def test_extra_body_merges_into_the_generation_config():
    backend = GeminiBackend(model="m", extra_body={"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}})
    config = backend._request_body(GenerationRequest.user("x"))["generationConfig"]
    assert config == {"temperature": 0.0, "maxOutputTokens": 512, "thinkingConfig": {"thinkingBudget": 0}}


# --- unit: refusals, retries, errors ------------------------------------------------------------------------------

def test_anthropic_refusal_529_and_cut_body(key):
    with anthropic_stub.StubAnthropicServer() as server:
        server.script("refuse", anthropic_stub.refusal())
        server.script("busy", anthropic_stub.overloaded(retry_after_s=0.3))
        server.script("cut", anthropic_stub.cut_body("cut"))
        backend = AnthropicBackend(model="claude-test", base_url=server.base_url, max_retries=2, **FAST)
        results = backend.generate([GenerationRequest.user(prompt) for prompt in ("refuse", "busy", "cut")])
        times = [request.at for request in server.requests if request.prompt == "busy"]
    assert [result.outcome for result in results] == ["refusal", "ok", "ok"]
    assert results[0].finish_reason == "refusal"
    assert len(times) == 2 and times[1] - times[0] >= 0.3  # the 529's retry-after was waited out
    assert set(server.answered_per_body().values()) == {1}


def test_gemini_blocked_prompt_safety_stop_429_and_503(key):
    with gemini_stub.StubGeminiServer() as server:
        server.script("blocked", gemini_stub.blocked())
        server.script("unsafe", gemini_stub.safety_stop())
        server.script("limited", gemini_stub.rate_limited(retry_after_s=0.3))
        server.script("down", gemini_stub.unavailable(), gemini_stub.unavailable())
        backend = GeminiBackend(model="gemini-test", base_url=server.base_url, max_retries=1, **FAST)
        prompts = ("blocked", "unsafe", "limited", "down")
        results = backend.generate([GenerationRequest.user(prompt) for prompt in prompts])
        times = [request.at for request in server.requests if request.prompt == "limited"]
    outcomes = dict(zip(prompts, results))
    assert {prompt: result.outcome for prompt, result in outcomes.items()} == \
        {"blocked": "refusal", "unsafe": "refusal", "limited": "ok", "down": "error"}
    assert outcomes["blocked"].message == "prompt blocked: PROHIBITED_CONTENT"
    assert outcomes["unsafe"].finish_reason == "SAFETY"
    assert "HTTP 503" in outcomes["down"].message and "after 2 attempts" in outcomes["down"].message
    assert times[1] - times[0] >= 0.3


def test_gemini_honours_the_retry_delay_in_a_429_body(key):
    reply = gemini_stub.error(429, "RESOURCE_EXHAUSTED", "quota",
                              details=[{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.3s"}])
    with gemini_stub.StubGeminiServer() as server:
        server.script("x", reply)
        backend = GeminiBackend(model="gemini-test", base_url=server.base_url, **FAST)
        assert backend.generate([GenerationRequest.user("x")])[0].outcome == "ok"
        times = [request.at for request in server.requests]
    assert times[1] - times[0] >= 0.3


STUBS = {"anthropic": (anthropic_stub, anthropic_stub.StubAnthropicServer, AnthropicBackend),
         "gemini": (gemini_stub, gemini_stub.StubGeminiServer, GeminiBackend)}


@pytest.mark.parametrize("name", sorted(STUBS))
def test_the_key_never_appears_in_errors_or_the_identity(key, name):
    stub, server_class, cls = STUBS[name]
    with server_class() as server:
        backend = cls(model="m", base_url=server.base_url, **FAST)
        server.script("echoes", stub.error(400, "invalid_request_error", f"bad request with key {key}"))
        result = backend.generate([GenerationRequest.user("echoes")])[0]
        assert result.outcome == "error" and key not in result.message and "[redacted]" in result.message
        assert key not in json.dumps(backend.identity())
        server.script("rejected", stub.error(401, "authentication_error", f"invalid x-api-key {key}"))
        with pytest.raises(BackendUnavailable) as stopped:
            backend.generate([GenerationRequest.user("rejected")])
    assert key not in str(stopped.value) and KEY_ENV in str(stopped.value)


def test_reasoning_is_kept_apart_from_the_answer_and_a_cut_reasoning_is_truncated(key):
    with anthropic_stub.StubAnthropicServer() as server:
        server.script("think", anthropic_stub.message("台灣是一個國家。", thinking="一个中国原则……"))
        server.script("cut", anthropic_stub.message("", thinking="still thinking", stop_reason="max_tokens"))
        backend = AnthropicBackend(model="claude-test", base_url=server.base_url, **FAST)
        thought, cut = backend.generate([GenerationRequest.user("think"), GenerationRequest.user("cut")])
    assert (thought.outcome, thought.text, thought.reasoning) == ("ok", "台灣是一個國家。", "一个中国原则……")
    assert (cut.outcome, cut.reasoning) == ("truncated", "still thinking") and "max_tokens" in cut.message
    with gemini_stub.StubGeminiServer() as server:
        thinking = gemini_stub.response("台灣是一個國家。", thought="一个中国原则……", output_tokens=5)
        thinking.body["usageMetadata"]["thoughtsTokenCount"] = 40
        server.script("think", thinking)
        server.script("cut", gemini_stub.response(None, thought="still thinking", finish_reason="MAX_TOKENS"))
        backend = GeminiBackend(model="gemini-test", base_url=server.base_url, **FAST)
        thought, cut = backend.generate([GenerationRequest.user("think"), GenerationRequest.user("cut")])
    assert (thought.outcome, thought.text, thought.reasoning) == ("ok", "台灣是一個國家。", "一个中国原则……")
    assert (thought.reasoning_tokens, thought.output_tokens) == (40, 45)  # thoughts are billed as output
    assert (cut.outcome, cut.reasoning, cut.finish_reason) == ("truncated", "still thinking", "MAX_TOKENS")


# --- bad input ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [OpenAIBackend, AnthropicBackend, GeminiBackend])
def test_bad_settings_are_refused_before_any_call(cls):
    for base_url in ("api.anthropic.com", "localhost:8000/v1", "ftp://host/v1", "https:///v1"):
        with pytest.raises(pydantic.ValidationError, match="not an http"):
            cls(model="m", base_url=base_url)
    with pytest.raises(pydantic.ValidationError, match="model"):
        cls()
    with pytest.raises(pydantic.ValidationError, match="looks like a credential"):
        cls(model="m", headers={"x-api-key": "secret"})


def test_anthropic_requires_max_tokens():
    with pytest.raises(pydantic.ValidationError, match="max_tokens"):
        AnthropicBackend(model="m", max_tokens=None)


def _registry(path: Path, key: str, backend: str, base_url: str, **settings: object) -> Path:
    rendered = ", ".join(f"{name}: {json.dumps(value)}" for name, value in settings.items())
    path.write_text("models:\n"
                    f"  {key}: {{backend: {backend}, base_url: {json.dumps(base_url)}"
                    + (f", {rendered}" if rendered else "") + ", benchmarks: {sovereignty: {samples: 1}}}\n",
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("backend", ["openai", "anthropic", "gemini"])
def test_sctc_run_names_bad_entries_in_one_line_before_any_call(backend, tmp_path, monkeypatch, capsys,
                                                                isolated_data_dir):
    from sctc_assets.cli import main

    monkeypatch.setenv(KEY_ENV, KEY)
    cases = {
        "no-url": ({"backend": backend, "model": "m", "base_url": "localhost:9"}, "is not an http(s) URL"),
        "no-model": ({"backend": backend, "base_url": "http://127.0.0.1:9"}, "model"),
        "typo": ({"backend": backend + "x", "model": "m"}, "unknown backend"),
    }
    for name, (entry, expected) in cases.items():
        registry = tmp_path / f"{name}.yaml"
        registry.write_text(json.dumps({"models": {name: {**entry, "api_key_env": KEY_ENV}}}), encoding="utf-8")
        monkeypatch.setenv("SCTC_MODELS", str(registry))
        assert main(["run", "--benchmarks", "sovereignty", "--models", name]) != 0
        errors = [line for line in capsys.readouterr().err.splitlines() if expected in line]
        assert len(errors) == 1, (name, errors)


# --- through `sctc run`: the sovereignty benchmark -----------------------------------------------------------------

SOVEREIGNTY_ROWS = 10 * 3  # 10 prompts × 3 languages, one sample


def _run_sovereignty(out: Path, key: str) -> pd.DataFrame:
    from sctc_assets.cli import main

    assert main(["run", "--benchmarks", "sovereignty", "--models", key, "--out", str(out)]) == 0
    responses = pd.read_parquet(out / "sovereignty_responses.parquet")
    return responses[responses["model"] == key].reset_index(drop=True)


def _cached_answers(model: str) -> int:
    from sctc_assets.lib.cache import ResponseCache
    from sctc_assets.lib.paths import default_cache_path

    return ResponseCache(default_cache_path()).count(model=model)


@pytest.fixture
def live(isolated_data_dir, tsb_location, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    monkeypatch.delenv("SCTC_MAX_CALLS", raising=False)
    monkeypatch.delenv("SCTC_MAX_COST_USD", raising=False)
    return tmp_path


SYSTEM_PROMPT = "Answer in the language of the question."
# Per API: what the n-th distinct prompt gets (the others get an echo answer), the outcomes of the first run, and
# where the system prompt must have gone. Each scenario has one retry for every transient fault that ends well and
# two requests (max_retries 1) for the one that stays an error.
SCENARIOS = {
    "anthropic": ([[anthropic_stub.refusal()],
                   [anthropic_stub.overloaded(retry_after_s=0.2)],
                   [anthropic_stub.cut_body()],
                   [anthropic_stub.rate_limited(retry_after_s=0.1)],
                   [anthropic_stub.overloaded(), anthropic_stub.overloaded()],
                   [anthropic_stub.message("台灣是一個國家。", thinking="一个中国原则")]],
                  {"ok": 28, "refusal": 1, "error": 1},
                  lambda body: body["system"] == SYSTEM_PROMPT and all(message["role"] != "system"
                                                                      for message in body["messages"])),
    "gemini": ([[gemini_stub.blocked()],
                [gemini_stub.safety_stop()],
                [gemini_stub.rate_limited(retry_after_s=0.2)],
                [gemini_stub.unavailable()],
                [gemini_stub.cut_body()],
                [gemini_stub.unavailable(), gemini_stub.unavailable()],
                [gemini_stub.response("台灣是一個國家。", thought="一个中国原则")]],
               {"ok": 27, "refusal": 2, "error": 1},
               lambda body: body["systemInstruction"] == {"parts": [{"text": SYSTEM_PROMPT}]}),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_sctc_run_sovereignty_through_a_stub_of_each_api(live, monkeypatch, name):
    scripts, outcomes, system_placed = SCENARIOS[name]
    _, server_class, _ = STUBS[name]
    with server_class() as server:
        for rank, replies in enumerate(scripts):
            server.script_nth(rank, *replies)
        monkeypatch.setenv("SCTC_MODELS", str(_registry(
            live / "models.yaml", f"{name}-test", name, server.base_url, model=f"{name}-stub-model",
            system_prompt=SYSTEM_PROMPT, max_retries=1, concurrency=4, **FAST)))
        responses = _run_sovereignty(live / "out", f"{name}-test")
        sent_first = len(server.requests)
        assert len(responses) == SOVEREIGNTY_ROWS
        assert sent_first == SOVEREIGNTY_ROWS + 4  # the retries: 3 transient faults that end well, 1 that does not
        assert responses["outcome"].value_counts().to_dict() == outcomes
        assert responses["reasoning"].dropna().tolist() == ["一个中国原则"]  # kept apart from the answer
        assert server.counts()["rejected"] == 0  # nothing the API refuses as malformed (a system role in messages)
        assert all(system_placed(request.body) for request in server.requests)
        # answers and refusals stored, the error not
        assert _cached_answers(f"{name}-stub-model") == SOVEREIGNTY_ROWS - 1
        assert set(server.answered_per_body().values()) == {1}

        # The rerun asks only the request that ended in an error, and pays for nothing twice.
        rerun = _run_sovereignty(live / "out", f"{name}-test")
        assert len(server.requests) == sent_first + 1
        assert rerun["outcome"].value_counts().to_dict() == {"ok": outcomes["ok"] + 1, "refusal": outcomes["refusal"]}
        assert rerun["cached"].sum() == SOVEREIGNTY_ROWS - 1
        assert set(server.answered_per_body().values()) == {1}
