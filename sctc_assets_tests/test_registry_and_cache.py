"""The model registry, the response cache and the shared generate() logic."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sctc_assets.backends.base import GenerationHalted
from sctc_assets.lib import interrupt
from sctc_assets.lib.budget import Budget, BudgetLimits
from sctc_assets.lib.cache import cache_key, new_claim_owner, open_cache
from sctc_assets.lib.generation import GenerationRequest, GenerationResult, strip_reasoning
from sctc_assets.lib.model_registry import RegistryError, load_registry, parse_registry
from sctc_assets.resources.model_registry import ModelRegistryResource
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


def test_cache_stores_answers_and_refusals_but_never_errors(cache_location):
    cache = open_cache(cache_location)
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


def test_the_cache_closes_connections_other_threads_opened(cache_location):
    """`close()` closes every thread's connection from the thread that calls it: a `generate()` that outlives a
    claim's renewal has a connection in the claim-renewal thread (`sctc terms define` failed there at `close()`)."""
    cache = open_cache(cache_location)
    identity, request = {"backend": "b", "model": "m"}, GenerationRequest.user("q")
    worker = threading.Thread(target=lambda: cache.put(cache_key(identity, request), identity, request,
                                                       GenerationResult("A")))
    worker.start()
    worker.join()
    cache.close()
    assert open_cache(cache_location).get(cache_key(identity, request)).text == "A"


def test_a_generate_that_outlives_a_claim_renewal_closes_its_cache(tmp_path, cache_location, monkeypatch):
    monkeypatch.setenv("SCTC_CLAIM_LEASE_S", "0.15")  # renewed every 0.05 s, from the claim-renewal thread
    renewals = threading.Event()
    cache = open_cache(cache_location)
    renew = cache.renew_claims
    monkeypatch.setattr(cache, "renew_claims", lambda *args, **kwargs: (renewals.set(), renew(*args, **kwargs))[1])
    requests = [GenerationRequest.user(f"q{i}") for i in range(3)]
    results = ScriptedBackend(delay_s=0.2).generate(requests, cache=cache)
    assert renewals.is_set() and [result.text for result in results] == ["不知道"] * 3
    cache.close()
    again = ScriptedBackend().generate(requests, cache=open_cache(cache_location))
    assert all(result.cached for result in again)  # every answer was stored as it arrived


def _writer(path: str, worker: int, count: int) -> None:  # a SQLite path or a PostgreSQL URL
    cache = open_cache(path)
    identity = {"backend": "b", "model": "m"}
    for index in range(count):
        request = GenerationRequest.user(f"{worker}-{index}")
        cache.put(cache_key(identity, request), identity, request, GenerationResult(f"answer {worker}-{index}"))
        # every worker also writes one shared key: duplicates must be ignored, not raise
        shared = GenerationRequest.user("shared")
        cache.put(cache_key(identity, shared), identity, shared, GenerationResult("same"))


def test_cache_is_safe_with_several_processes(cache_location):
    path = cache_location
    open_cache(path)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, worker, 150)) for worker in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
    assert [process.exitcode for process in workers] == [0, 0, 0, 0]
    assert open_cache(path).count() == 4 * 150 + 1


def test_generate_serves_the_cache_and_asks_duplicates_once(tmp_path, cache_location):
    calls = tmp_path / "calls.log"
    backend = ScriptedBackend(answers={"q1": "a1"}, calls_file=str(calls))
    cache = open_cache(cache_location)
    requests = [GenerationRequest.user("q1"), GenerationRequest.user("q1"), GenerationRequest.user("q2")]
    progress: list[tuple[int, int]] = []
    first = backend.generate(requests, cache=cache, progress=lambda done, total: progress.append((done, total)))
    assert [r.text for r in first] == ["a1", "a1", "不知道"]
    assert [r.cached for r in first] == [False, True, False]  # the repeat was not paid for
    assert count_calls(calls) == 2 and progress[-1] == (3, 3)
    second = backend.generate(requests, cache=cache)
    assert [r.text for r in second] == ["a1", "a1", "不知道"] and all(r.cached for r in second)
    assert count_calls(calls) == 2


def test_interrupted_run_pays_for_nothing_twice(tmp_path, cache_location):
    calls = tmp_path / "calls.log"
    cache = open_cache(cache_location)
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
    # a refusal's text read back from Parquet
    assert strip_reasoning(float("nan")) == "" and strip_reasoning(pd.NA) == ""


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


# --- seeds in the cache key ---------------------------------------------------------------------------------------


def test_cache_key_holds_the_seed_only_when_one_is_sent():
    identity = {"backend": "openai", "endpoint": "http://x", "model": "m", "params": {"temperature": 0.7}}
    unseeded = GenerationRequest.user("你好", trial=2)
    # the key of a request without a seed is what it was before seeds existed: old caches keep serving it
    legacy = hashlib.sha256(json.dumps({**identity, "messages": [dict(m) for m in unseeded.messages], "trial": 2},
                                       sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    assert cache_key(identity, unseeded) == legacy
    seeded = [dataclasses.replace(unseeded, seed=seed) for seed in (7, 8)]
    assert len({cache_key(identity, request) for request in [unseeded, *seeded]}) == 3


def test_results_keep_seed_and_provenance_through_the_cache_and_old_records_lack_them(cache_location):
    cache = open_cache(cache_location)
    identity = {"backend": "b", "model": "m"}
    request = GenerationRequest.user("q", seed=12)
    result = GenerationResult("a", seed=12, served_model="m-2024-07-18", system_fingerprint="fp_1")
    cache.put(cache_key(identity, request), identity, request, result)
    back = cache.get(cache_key(identity, request))
    assert (back.seed, back.served_model, back.system_fingerprint) == (12, "m-2024-07-18", "fp_1")
    old = GenerationResult.from_record({"text": "a", "outcome": "ok"})
    assert (old.seed, old.served_model, old.system_fingerprint) == (None, None, None)


# --- claims -------------------------------------------------------------------------------------------------------


def test_claims_hold_keys_until_answered_released_expired_or_their_owner_is_gone(cache_location):
    cache = open_cache(cache_location)
    me, other = new_claim_owner(), new_claim_owner()
    assert cache.claim(["a", "b"], me, lease_s=60).claimed == ["a", "b"]
    seen = cache.claim(["a", "b", "c"], other, lease_s=60)
    assert (seen.claimed, seen.held) == (["c"], ["a", "b"])
    identity, request = {"backend": "b", "model": "m"}, GenerationRequest.user("q")
    cache.store("a", identity, request, GenerationResult("answer"))  # storing drops the claim
    cache.release_claims(me, ["b"])  # an error: released for others to take over
    seen = cache.claim(["a", "b"], other, lease_s=60)
    assert seen.claimed == ["b"] and seen.answered["a"].text == "answer" and seen.answered["a"].cached

    cache.claim(["d"], "another-host:1:x", lease_s=0.2)
    assert cache.claim(["d"], me, lease_s=60).held == ["d"]
    time.sleep(0.3)
    assert cache.claim(["d"], me, lease_s=60).claimed == ["d"]  # the lease expired

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    cache.claim(["e"], f"{socket.gethostname()}:{int(dead.stdout)}:x", lease_s=600)
    if cache.backend == "sqlite":
        assert cache.claim(["e"], me, lease_s=60).claimed == ["e"]  # its owner on this host is gone
    else:  # PostgreSQL: hosts cannot see each other's processes, only the lease decides
        assert cache.claim(["e"], me, lease_s=60).held == ["e"]
    cache.claim(["f"], "third", lease_s=0.3)
    cache.renew_claims("third", lease_s=600)  # renewed while it works: it keeps the key past the first lease
    time.sleep(0.4)
    assert cache.claim(["f"], me, lease_s=60).held == ["f"]


def test_store_keeps_the_first_answer_and_returns_what_the_cache_holds(cache_location):
    cache = open_cache(cache_location)
    identity, request = {"backend": "b", "model": "m"}, GenerationRequest.user("q")
    first = cache.store("k", identity, request, GenerationResult("first"))
    second = cache.store("k", identity, request, GenerationResult("second"))
    assert (first.text, first.cached) == ("first", False)
    assert (second.text, second.cached) == ("first", True)
    assert cache.store("e", identity, request, GenerationResult(None, "error", "500")) is None


class RacedBackend(ScriptedBackend):
    """Another process stores its own answer for every key just before this one's answer arrives."""

    def _generate_uncached(self, requests, on_result):
        cache = open_cache(self.calls_file)
        for index, request in enumerate(requests):
            key = cache_key(self.identity(), request)
            cache.store(key, self.identity(), request, GenerationResult(f"theirs {request.prompt}"))
            on_result(index, GenerationResult(f"mine {request.prompt}"))


def test_the_table_gets_the_answer_the_cache_holds(tmp_path):
    path = tmp_path / "cache.sqlite"
    backend = RacedBackend(calls_file=str(path))
    results = backend.generate([GenerationRequest.user(f"q{i}") for i in range(3)], cache=open_cache(path))
    assert [result.text for result in results] == ["theirs q0", "theirs q1", "theirs q2"]


def _claim_keys(cache, backend: ScriptedBackend, requests, owner: str, lease_s: float) -> list[str]:
    keys = [cache_key(backend.identity(), request) for request in requests]
    assert cache.claim(keys, owner, lease_s=lease_s).claimed == keys
    return keys


def test_generate_waits_for_keys_another_process_claimed_and_reads_its_answers(tmp_path, cache_location):
    calls = tmp_path / "calls.log"
    cache = open_cache(cache_location)
    backend = ScriptedBackend(calls_file=str(calls))
    requests = [GenerationRequest.user(f"q{i}") for i in range(6)]
    other = new_claim_owner()  # alive: it is this process
    keys = _claim_keys(cache, backend, requests[:3], other, lease_s=60)
    outcome: dict = {}
    worker = threading.Thread(target=lambda: outcome.update(results=backend.generate(requests, cache=cache)))
    worker.start()
    deadline = time.monotonic() + 30
    while count_calls(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert count_calls(calls) == 3 and worker.is_alive()  # asked its own three, waits for the claimed ones
    for key, request in zip(keys, requests[:3]):
        cache.store(key, backend.identity(), request, GenerationResult(f"from the other process: {request.prompt}"))
    worker.join(30)
    results = outcome["results"]
    assert [result.text for result in results[:3]] == [f"from the other process: q{i}" for i in range(3)]
    assert all(result.cached for result in results[:3]) and count_calls(calls) == 3


def test_generate_takes_over_keys_whose_claim_lapses(tmp_path, cache_location):
    calls = tmp_path / "calls.log"
    cache = open_cache(cache_location)
    backend = ScriptedBackend(calls_file=str(calls))
    requests = [GenerationRequest.user(f"q{i}") for i in range(4)]
    _claim_keys(cache, backend, requests[:2], "some-other-host:1:x", lease_s=0.5)
    started = time.monotonic()
    results = backend.generate(requests, cache=cache)
    assert time.monotonic() - started >= 0.4
    assert [result.text for result in results] == ["不知道"] * 4 and not any(result.cached for result in results)
    assert count_calls(calls) == 4


# --- budget and halting -------------------------------------------------------------------------------------------


def _budgeted(tmp_path, scope: str, location=None, **limits) -> tuple[ScriptedBackend, object]:
    cache = open_cache(location or tmp_path / "cache.sqlite")
    backend = ScriptedBackend(calls_file=str(tmp_path / "calls.log"))
    backend.attach_budget(Budget(cache, scope=scope, model="fake", run=BudgetLimits(**limits), own=BudgetLimits()))
    return backend, cache


def test_max_calls_stops_asking_keeps_the_answers_and_a_rerun_continues(tmp_path, cache_location):
    requests = [GenerationRequest.user(f"q{i}") for i in range(12)]
    backend, cache = _budgeted(tmp_path, "run-1", cache_location, max_calls=5)
    with pytest.raises(GenerationHalted) as halted:
        backend.generate(requests, cache=cache)
    assert (halted.value.answered, halted.value.remaining) == (5, 7)
    assert "max_calls 5" in str(halted.value) and "7 not yet asked" in str(halted.value)
    assert count_calls(tmp_path / "calls.log") == 5 and cache.count() == 5
    assert cache.ledger("run-1")["fake"].calls == 5

    rerun, cache = _budgeted(tmp_path, "run-2", cache_location, max_calls=100)
    results = rerun.generate(requests, cache=cache)
    assert sum(result.cached for result in results) == 5 and count_calls(tmp_path / "calls.log") == 12


def test_cost_budget_counts_usage_and_prices_and_estimates_missing_usage(cache_location):
    cache = open_cache(cache_location)
    budget = Budget(cache, scope="s", model="m", run=BudgetLimits(max_cost_usd=0.01), own=BudgetLimits(),
                    pricing=(1.0, 2.0))
    request = GenerationRequest.user("滑鼠是什么")  # 5 Han characters
    budget.record(request, GenerationResult("a", input_tokens=1000, output_tokens=1000))
    assert cache.ledger("s")["m"].cost_usd == pytest.approx(0.003) and budget.exhausted() is None
    budget.record(request, GenerationResult("鼠标"))  # no usage returned: estimated
    totals = cache.ledger("s")["m"]
    assert totals.estimated_calls == 1 and totals.cost_usd == pytest.approx(0.003 + (5 + 4) * 1e-6 + 2 * 2e-6)
    budget.record(request, GenerationResult("b", input_tokens=8000, output_tokens=0))
    assert "max_cost_usd $0.01" in budget.exhausted() and "1 of them estimated" in budget.exhausted()
    assert any("estimated" in note for note in budget.notes())
    assert budget.reserve(3) == 0


def test_processes_sharing_a_scope_never_overdraw_max_calls(cache_location):
    path = cache_location
    open_cache(path)
    context = multiprocessing.get_context("spawn")
    with context.Pool(3) as pool:
        granted = pool.starmap(_reserve_many, [(path, 40)] * 3)
    assert sum(granted) == 50 and open_cache(path).ledger("shared")["m"].calls == 50


def _reserve_many(path: str, attempts: int) -> int:
    budget = Budget(open_cache(path), scope="shared", model="m", run=BudgetLimits(max_calls=50), own=BudgetLimits())
    return sum(budget.reserve(1) for _ in range(attempts))


def test_a_stop_request_halts_before_any_call(tmp_path):
    calls = tmp_path / "calls.log"
    backend = ScriptedBackend(calls_file=str(calls))
    interrupt.request_stop("interrupted (Ctrl-C)")
    try:
        with pytest.raises(GenerationHalted, match=r"interrupted \(Ctrl-C\).*0 answers stored, 3 not yet asked"):
            backend.generate([GenerationRequest.user(f"q{i}") for i in range(3)], cache=open_cache(tmp_path / "c"))
        assert interrupt.stop_reason() == "interrupted (Ctrl-C)" and count_calls(calls) == 0
    finally:
        interrupt.clear_stop()
    assert interrupt.stop_reason() is None


def test_registry_budget_settings_and_the_resource_defaults(tmp_path, monkeypatch):
    registry = tmp_path / "models.yaml"
    registry.write_text(
        "models:\n"
        "  capped: {backend: 'sctc_assets_tests.fakes:ScriptedBackend', budget: {max_calls: 2}}\n"
        "  free: {backend: 'sctc_assets_tests.fakes:ScriptedBackend'}\n", encoding="utf-8")
    for bad, message in [("budget: 3", "`budget` must be a mapping"), ("budget: {max_call: 3}", "unknown budget key"),
                         ("budget: {max_cost_usd: -1}", "budget.max_cost_usd: expected an amount")]:
        with pytest.raises(RegistryError, match=message):
            parse_registry(yaml.safe_load(f"models:\n  x: {{backend: openai, {bad}}}\n"), source="r.yaml")
    monkeypatch.delenv("SCTC_BUDGET_SCOPE", raising=False)
    monkeypatch.delenv("SCTC_MAX_CALLS", raising=False)
    resource = ModelRegistryResource(registry_path=str(registry), cache_path=str(tmp_path / "c.sqlite"))
    assert resource.backend("free")._budget is None  # nothing limits or counts it
    capped = resource.backend("capped")
    with pytest.raises(GenerationHalted, match="registry budget of .*model 'capped'.*max_calls 2"):
        capped.generate([GenerationRequest.user(f"q{i}") for i in range(4)], cache=resource.cache())

    monkeypatch.setenv("SCTC_MAX_CALLS", "3")
    monkeypatch.setenv("SCTC_BUDGET_SCOPE", "sctc-run-1")
    free = resource.backend("free")
    with pytest.raises(GenerationHalted, match="scope 'sctc-run-1'.*max_calls 3"):
        free.generate([GenerationRequest.user(f"r{i}") for i in range(4)], cache=resource.cache())
    assert resource.cache().ledger("sctc-run-1")["free"].calls == 3
    monkeypatch.setenv("SCTC_MAX_CALLS", "many")
    with pytest.raises(RegistryError, match=r"\$SCTC_MAX_CALLS: expected a whole number"):
        resource.backend("free")


def test_temperature_zero_trials_are_flagged_as_repeats():
    class Sampler(ScriptedBackend):
        temperature: float = 0.0

    requests = [GenerationRequest.user("q", trial=trial) for trial in range(3)]
    greedy = Sampler()
    greedy.generate(requests)
    assert greedy.generation_notes() == [
        "temperature 0: the 3 trials per prompt repeat one request, they are not independent samples (their spread "
        "shows only the endpoint's nondeterminism); set a temperature above 0 to sample"]
    sampling = Sampler(temperature=0.7)
    sampling.generate(requests)
    assert sampling.generation_notes() == []
    greedy.generate(requests[:1])
    assert greedy.generation_notes() == []  # one trial: nothing to say


def test_a_registry_file_rewritten_in_place_is_read_again(tmp_path):
    import os

    path = tmp_path / "models.yaml"
    path.write_text("models:\n  a: {backend: replay, model: one}\n", encoding="utf-8")
    assert load_registry(path)["a"].settings["model"] == "one"
    first = path.stat()
    # The same size, the same modification time: the parse kept from the first read.
    path.write_text("models:\n  a: {backend: replay, model: two}\n", encoding="utf-8")
    os.utime(path, ns=(first.st_atime_ns, first.st_mtime_ns))
    assert load_registry(path)["a"].settings["model"] == "one"
    # A new modification time (any edit gets one), or a new size: read again.
    os.utime(path, ns=(first.st_atime_ns, first.st_mtime_ns + 1_000_000))
    assert load_registry(path)["a"].settings["model"] == "two"
    path.write_text("models:\n  a: {backend: replay, model: three}\n", encoding="utf-8")
    os.utime(path, ns=(first.st_atime_ns, first.st_mtime_ns))
    assert load_registry(path)["a"].settings["model"] == "three"
    # A caller that adds to what it got changes no later read.
    load_registry(path)["b"] = None
    assert set(load_registry(path)) == {"a"}
