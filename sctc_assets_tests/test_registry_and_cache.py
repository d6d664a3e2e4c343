"""The model registry, the response cache and the shared generate() logic."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from sctc_assets.lib.cache import ResponseCache, cache_key
from sctc_assets.lib.generation import GenerationRequest, GenerationResult, strip_reasoning
from sctc_assets.lib.registry import RegistryError, load_registry, parse_registry
from sctc_assets.resources.registry import ModelRegistryResource
from sctc_assets_tests.fakes import ScriptedBackend, count_calls

REPO = Path(__file__).resolve().parents[1]


def test_shipped_registry_has_the_default_and_the_eleven_replay_models():
    entries = load_registry(REPO / "data" / "models.yaml")
    paper = {key for key, entry in entries.items() if entry.backend == "replay"}
    assert paper == {f"paper-{name}" for name in ("qwen", "baichuan2", "chatglm2", "breeze", "taiwan-llm", "ds",
                                                  "gpt4o", "gpt4", "gpt3.5", "llama3-70b", "llama3-8b")}
    assert entries["paper-ds"].settings["no_think"] is True
    default = entries["qwen2.5-coder-0.5b-instruct"]
    assert default.backend == "transformers" and default.default
    assert default.settings.get("trust_remote_code") is not True


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({}, "top-level `models:`"),
        ({"models": {"Bad|Key": {"backend": "openai"}}}, "'Bad|Key'"),
        ({"models": {"ok": {"model": "x"}}}, "model 'ok': missing `backend`"),
        ({"models": {"ok": {"backend": "openai", "benchmarks": {"term": 3}}}}, "model 'ok': `benchmarks`"),
    ],
)
def test_registry_errors_name_the_file_and_key(document, message):
    with pytest.raises(RegistryError, match=message) as info:
        parse_registry(document, source="models.yaml")
    assert "models.yaml" in str(info.value)


def test_registry_resource_builds_backends_and_reports_bad_settings(tmp_path):
    registry = tmp_path / "models.yaml"
    registry.write_text(
        "models:\n"
        "  fake: {backend: 'sctc_assets_tests.fakes:ScriptedBackend', default_answer: '滑鼠'}\n"
        "  broken: {backend: openai, temperature: hot}\n"
        "  unknown: {backend: nonsense}\n"
        "  replayed: {backend: replay, upstream_name: qwen}\n", encoding="utf-8")
    resource = ModelRegistryResource(registry_path=str(registry), cache_path=str(tmp_path / "c.sqlite"))
    backend = resource.backend("fake")
    assert isinstance(backend, ScriptedBackend) and backend.default_answer == "滑鼠"
    with pytest.raises(RegistryError, match=r"model 'broken' \(openai\): (model|temperature)"):
        resource.backend("broken")
    with pytest.raises(RegistryError, match="model 'unknown': unknown backend 'nonsense'"):
        resource.backend("unknown")
    with pytest.raises(RegistryError, match="model 'replayed' replays published data"):
        resource.backend("replayed")
    with pytest.raises(RegistryError, match="no model 'missing'"):
        resource.entry("missing")


def test_unknown_settings_are_refused_naming_file_model_and_setting(tmp_path):
    registry = tmp_path / "models.yaml"
    registry.write_text(
        "models:\n"
        "  typo: {backend: openai, model: m, max_token: 3}\n"
        "  keyed: {backend: openai, model: m, api_key: sk-DO-NOT-SHOW}\n", encoding="utf-8")
    (tmp_path / "models.d").mkdir()
    (tmp_path / "models.d" / "local.yaml").write_text(
        "models:\n  dropin: {backend: replay, upstream_name: qwen, description: a, b}\n", encoding="utf-8")
    resource = ModelRegistryResource(registry_path=str(registry), cache_path=str(tmp_path / "c.sqlite"))

    with pytest.raises(RegistryError, match=rf"{registry}: model 'typo': unknown setting\(s\) 'max_token' for"):
        resource.backend("typo")
    with pytest.raises(RegistryError, match=r"model 'keyed': unknown setting\(s\) 'api_key'.*`api_key_env`") as info:
        resource.backend("keyed")
    assert "sk-DO-NOT-SHOW" not in str(info.value)
    # an unquoted comma in a flow mapping makes a setting out of the rest of the text; the drop-in file is named
    with pytest.raises(RegistryError, match=r"models\.d/local\.yaml: model 'dropin': unknown setting\(s\) 'b'"):
        resource.backend("dropin", open_upstream=lambda: None)


def test_sctc_models_lists_the_registry_and_names_broken_entries(tmp_path, monkeypatch, capsys):
    from sctc_assets.cli import main

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    registry = tmp_path / "models.yaml"
    registry.write_text("models:\n  good: {backend: replay, upstream_name: qwen}\n"
                        "  odd: {backend: nosuchbackend}\n", encoding="utf-8")
    assert main(["models", "--registry", str(registry)]) == 2
    printed = capsys.readouterr()
    assert "good" in printed.out and "odd" in printed.out
    assert f"{registry}: model 'odd': unknown backend 'nosuchbackend'" in printed.err

    registry.write_text("models:\n  Bad Key: {backend: replay}\n", encoding="utf-8")
    assert main(["models", "--registry", str(registry)]) == 2
    assert f"error: {registry}: model 'Bad Key'" in capsys.readouterr().err


def test_every_shipped_model_builds_its_backend(tmp_path):
    resource = ModelRegistryResource(registry_path=str(REPO / "data" / "models.yaml"))
    upstream = type("Upstream", (), {"root": tmp_path})
    for key in resource.entries():
        assert resource.backend(key, open_upstream=lambda: upstream, allow_example=True).identity()["backend"]
    assert resource.entry("paper-ds").description == "DeepSeek-R1 671B, reasoning removed (paper)"


def test_cache_key_covers_what_changes_an_answer():
    identity = {"backend": "openai", "endpoint": "http://x", "model": "m", "params": {"temperature": 0}}
    base = GenerationRequest.user("你好")
    key = cache_key(identity, base)
    assert key == cache_key(dict(identity), GenerationRequest.user("你好"))
    assert key != cache_key(identity, GenerationRequest.user("你好", trial=1))
    assert key != cache_key(identity, GenerationRequest.user("您好"))
    assert key != cache_key(identity, GenerationRequest.user("你好", system="be brief"))
    assert key != cache_key({**identity, "params": {"temperature": 0.7}}, base)
    assert key != cache_key({**identity, "endpoint": "http://y"}, base)
    # where the item sits in a benchmark does not change the answer, so it is not part of the key
    assert key == cache_key(identity, GenerationRequest.user("你好", lang="zh_hans", row=3))


def test_cache_stores_answers_and_refusals_but_never_errors(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    identity = {"backend": "b", "model": "m"}
    requests = [GenerationRequest.user(text) for text in ("a", "b", "c")]
    outcomes = [GenerationResult("A"), GenerationResult(None, "refusal", "filtered"), GenerationResult(None, "error", "500")]
    stored = [cache.put(cache_key(identity, r), identity, r, o) for r, o in zip(requests, outcomes)]
    assert stored == [True, True, False]
    hits = cache.get_many([cache_key(identity, r) for r in requests])
    assert len(hits) == 2
    refusal = cache.get(cache_key(identity, requests[1]))
    assert refusal.outcome == "refusal" and refusal.message == "filtered" and refusal.cached
    assert cache.get(cache_key(identity, requests[2])) is None


def _writer(path: str, worker: int, count: int) -> None:
    cache = ResponseCache(path)
    identity = {"backend": "b", "model": "m"}
    for index in range(count):
        request = GenerationRequest.user(f"{worker}-{index}")
        cache.put(cache_key(identity, request), identity, request, GenerationResult(f"answer {worker}-{index}"))
        # every worker also writes one shared key: duplicates must be ignored, not raise
        shared = GenerationRequest.user("shared")
        cache.put(cache_key(identity, shared), identity, shared, GenerationResult("same"))


def test_cache_is_safe_with_several_processes(tmp_path):
    path = str(tmp_path / "cache.sqlite")
    ResponseCache(path)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, worker, 150)) for worker in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
    assert [process.exitcode for process in workers] == [0, 0, 0, 0]
    assert ResponseCache(path).count() == 4 * 150 + 1


def test_generate_serves_the_cache_and_asks_duplicates_once(tmp_path):
    calls = tmp_path / "calls.log"
    backend = ScriptedBackend(answers={"q1": "a1"}, calls_file=str(calls))
    cache = ResponseCache(tmp_path / "cache.sqlite")
    requests = [GenerationRequest.user("q1"), GenerationRequest.user("q1"), GenerationRequest.user("q2")]
    progress: list[tuple[int, int]] = []
    first = backend.generate(requests, cache=cache, progress=lambda done, total: progress.append((done, total)))
    assert [r.text for r in first] == ["a1", "a1", "不知道"]
    assert [r.cached for r in first] == [False, True, False]  # the repeat was not paid for
    assert count_calls(calls) == 2 and progress[-1] == (3, 3)
    second = backend.generate(requests, cache=cache)
    assert [r.text for r in second] == ["a1", "a1", "不知道"] and all(r.cached for r in second)
    assert count_calls(calls) == 2


def test_interrupted_run_pays_for_nothing_twice(tmp_path):
    calls = tmp_path / "calls.log"
    cache = ResponseCache(tmp_path / "cache.sqlite")
    requests = [GenerationRequest.user(f"q{i}") for i in range(10)]
    with pytest.raises(RuntimeError, match="simulated crash"):
        ScriptedBackend(calls_file=str(calls), fail_after=4).generate(requests, cache=cache)
    assert count_calls(calls) == 4
    results = ScriptedBackend(calls_file=str(calls)).generate(requests, cache=cache)
    assert len(results) == 10 and sum(r.cached for r in results) == 4
    assert count_calls(calls) == 10  # 4 before the crash + the 6 that were never answered


def test_strip_reasoning():
    assert strip_reasoning("<think>a\nb</think>\n答案") == "答案"
    assert strip_reasoning("推理</think>答案") == "答案"
    assert strip_reasoning("<think>never closed") == ""
    assert strip_reasoning(None) == ""


def test_progress_reports_start_pace_and_completion():
    from sctc_assets.lib.progress import ProgressReporter

    lines: list[str] = []
    report = ProgressReporter("x", lines.append, interval_s=3600)
    report(4, 10)   # cache hits
    report(6, 10)   # first new answers: origin of the pace, throttled
    report(8, 10)   # throttled
    report(10, 10)  # completion is always reported
    assert lines[0] == "x: 4/10 already answered (response cache), 6 to go"
    assert len(lines) == 2 and lines[1].startswith("x: 10/10 (100%)")
