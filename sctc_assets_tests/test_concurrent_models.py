"""Many API models at once in `sctc run`: partitions of models behind different endpoints overlap, one endpoint
serves one partition stage at a time, the budget is shared, and one model failing loses nothing of another's.

Real HTTP stub servers (one per endpoint), the real term assets, Parquet storage and response cache; the
assertions are on what the servers saw (request times, in-flight peaks, counts), never on wall time.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sctc_assets.benchmarks import TERM
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.lib.cache import ResponseCache
from sctc_assets.lib.paths import default_cache_path
from sctc_assets.lib.model_registry import ModelEntry
from sctc_assets.lib.sctc_upstream import SCTC_ENV_VAR
from sctc_assets.running.runner import Runner
from sctc_assets.running.instance import cli_instance
from sctc_assets.running.concurrent import (CONCURRENT_ENV, STAGES_PER_ENDPOINT_ENV, ConcurrencyError, Lane,
                                            endpoint_of, plan_lanes, stages_per_endpoint)
from sctc_assets_tests.openai_stub_server import StubOpenAIServer

KEY_ENV = "SCTC_TEST_CONCURRENT_KEY"
PROMPTS_PER_LANG = 110  # term prompts of one language, one prompt variant, one trial
CONCURRENCY = 16
# The asking asset and the inputs it needs; the scoring stages only add CPU time here.
PLAN = TERM.with_stages(inputs=("regional_terms", "term_prompts"), per_model_lang=("term_responses",),
                        per_model=(), cross_model=())


def _registry(path: Path, models: dict[str, tuple[str, str]], **extra: dict) -> Path:
    """`models`: key → (base URL, model name the endpoint sees); `extra`: key → more settings."""
    lines = ["models:"]
    for key, (base_url, name) in models.items():
        settings = {"max_retries": 0, "timeout_s": 10, "concurrency": CONCURRENCY, "api_key_env": KEY_ENV,
                    **extra.get(key, {})}
        rendered = ", ".join(f"{option}: {value}" for option, value in settings.items())
        lines.append(f"  {key}: {{backend: openai, model: {name}, base_url: '{base_url}', {rendered},"
                     " benchmarks: {term: {trials: 1, prompt_variants: [1]}}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _stored(asset: str, model: str) -> pd.DataFrame:
    storage = shared_resources()["io_manager"]
    frames = [pd.read_parquet(file) for file in sorted(Path(storage._root(), asset).rglob("*.parquet"))]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["model"])
    return frame[frame["model"] == model].reset_index(drop=True)


def _window(server: StubOpenAIServer, name: str) -> tuple[float, float]:
    times = [request.at for request in server.requests if request.body.get("model") == name]
    return min(times), max(times)


@pytest.fixture(scope="module")
def shared_instance(tmp_path_factory, sctc_source):
    """One data folder and one file-backed instance (as `sctc run`'s) for the module: the inputs are materialized
    once, and each test asks models of its own."""
    root = tmp_path_factory.mktemp("concurrent-models")
    (root / "data").mkdir()
    (root / "home").mkdir()
    (root / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCTC_DATA_DIR", str(root / "data"))
        patch.setenv("DAGSTER_HOME", str(root / "home"))
        patch.setenv(SCTC_ENV_VAR, str(sctc_source.root))
        yield cli_instance(root / "home")


@pytest.fixture
def environment(shared_instance, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-concurrent")
    for name in ("SCTC_MAX_CALLS", "SCTC_MAX_COST_USD", "SCTC_BUDGET_SCOPE", CONCURRENT_ENV,
                 STAGES_PER_ENDPOINT_ENV):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _run(models: list[str], plan=PLAN):
    instance = cli_instance()
    return Runner(defs, instance, shared_resources(), log=lambda message: None).run(plan, models, {})


def test_lanes_endpoints_and_the_setting():
    openai = ModelEntry("a", "openai", {"model": "m", "base_url": "http://h:1/v1/"})
    default = ModelEntry("b", "openai", {"model": "m"})
    local = ModelEntry("c", "transformers", {"model": "x"})
    assert endpoint_of(openai) == "http://h:1/v1" and endpoint_of(default) == "https://api.openai.com/v1"
    assert endpoint_of(local) is None
    lanes = plan_lanes(["c", "a", "r", "b"], {"a": "http://h:1/v1", "b": "https://api.openai.com/v1", "c": None})
    # local models and replays share one lane, in order: one local model in memory at a time
    assert lanes == [Lane(("c", "r"), None), Lane(("a",), "http://h:1/v1"), Lane(("b",), "https://api.openai.com/v1")]


def test_the_stages_per_endpoint_setting_is_checked(monkeypatch):
    monkeypatch.delenv(STAGES_PER_ENDPOINT_ENV, raising=False)
    assert stages_per_endpoint() == 1
    monkeypatch.setenv(STAGES_PER_ENDPOINT_ENV, "3")
    assert stages_per_endpoint() == 3
    monkeypatch.setenv(STAGES_PER_ENDPOINT_ENV, "0")
    with pytest.raises(ConcurrencyError, match=STAGES_PER_ENDPOINT_ENV):
        stages_per_endpoint()


@pytest.mark.slow
def test_two_models_behind_two_endpoints_ask_at_the_same_time(environment, monkeypatch):
    # 0.5 s per answer: each model asks for ~7 s, long next to a stage's start (its staleness check, the run's
    # creation), which a loaded machine can stretch to a second or two and which the models take in turn.
    with StubOpenAIServer(latency_s=0.5) as first, StubOpenAIServer(latency_s=0.5) as second:
        monkeypatch.setenv("SCTC_MODELS", str(_registry(environment / "models.yaml", {
            "apart-a": (first.base_url, "stub-apart-a"), "apart-b": (second.base_url, "stub-apart-b")})))
        report = _run(["apart-a", "apart-b"])
        assert report.ok, report.failures
        (a_start, a_end), (b_start, b_end) = _window(first, "stub-apart-a"), _window(second, "stub-apart-b")
        # both servers were being asked at once, for most of each model's run
        overlap = min(a_end, b_end) - max(a_start, b_start)
        assert overlap > 0.5 * min(a_end - a_start, b_end - b_start), (a_start, a_end, b_start, b_end)
        for server, model in ((first, "apart-a"), (second, "apart-b")):
            assert len(server.requests) == 2 * PROMPTS_PER_LANG and set(server.answered_per_body().values()) == {1}
            responses = _stored("term_responses", model)
            assert len(responses) == 2 * PROMPTS_PER_LANG and (responses["outcome"] == "ok").all()


@pytest.mark.parametrize("per_endpoint", [1, 2])
def test_two_models_behind_one_endpoint_keep_its_bound(environment, monkeypatch, per_endpoint):
    monkeypatch.setenv(STAGES_PER_ENDPOINT_ENV, str(per_endpoint))
    with StubOpenAIServer(latency_s=0.1) as server:
        monkeypatch.setenv("SCTC_MODELS", str(_registry(environment / "models.yaml", {
            "shared-a": (server.base_url, "stub-shared-a"), "shared-b": (server.base_url, "stub-shared-b")})))
        report = _run(["shared-a", "shared-b"])
        assert report.ok, report.failures
        assert len(server.requests) == 4 * PROMPTS_PER_LANG
        # the order in which the server saw the two models: one stage at a time means a few long blocks
        names = [request.body["model"] for request in sorted(server.requests, key=lambda request: request.at)]
        switches = sum(1 for before, after in zip(names, names[1:]) if before != after)
        if per_endpoint == 1:
            assert server.max_in_flight <= CONCURRENCY and switches <= 3, (server.max_in_flight, switches)
        else:  # the bound is what limits it: raised, both models' stages share the server
            assert server.max_in_flight > CONCURRENCY and switches > 3, (server.max_in_flight, switches)


def test_one_budget_across_models_asked_at_once(environment, monkeypatch):
    monkeypatch.setenv("SCTC_MAX_CALLS", "150")
    monkeypatch.setenv("SCTC_BUDGET_SCOPE", "one sctc run")
    with StubOpenAIServer(latency_s=0.05) as first, StubOpenAIServer(latency_s=0.05) as second:
        monkeypatch.setenv("SCTC_MODELS", str(_registry(environment / "models.yaml", {
            "budget-a": (first.base_url, "stub-budget-a"), "budget-b": (second.base_url, "stub-budget-b")})))
        report = _run(["budget-a", "budget-b"])
        sent = len(first.requests) + len(second.requests)
        assert sent == 150  # counted once across both threads: not 150 each, not one more
        assert len(first.requests) > 0 and len(second.requests) > 0
        assert sum(ResponseCache(default_cache_path()).count(model=name)
                   for name in ("stub-budget-a", "stub-budget-b")) == 150
        assert report.failures and all(failure.halted for failure in report.failures), report.failures


def test_one_model_failing_keeps_the_others_answers(environment, monkeypatch):
    with StubOpenAIServer(latency_s=0.05) as first, StubOpenAIServer(latency_s=0.05) as second:
        monkeypatch.setenv("SCTC_MODELS", str(_registry(environment / "models.yaml", {
            "fails-a": (first.base_url, "stub-fails-a"), "fails-b": (second.base_url, "stub-fails-b")},
            **{"fails-b": {"api_key_env": "SCTC_TEST_CONCURRENT_UNSET_KEY"}})))
        monkeypatch.delenv("SCTC_TEST_CONCURRENT_UNSET_KEY", raising=False)
        report = _run(["fails-a", "fails-b"])
        assert report.failed_models == ["fails-b"] and report.stale_models == ["fails-b"]
        assert {failure.stage for failure in report.failures} == {"term: fails-b/zh_hans", "term: fails-b/zh_hant"}
        assert all("SCTC_TEST_CONCURRENT_UNSET_KEY" in failure.message for failure in report.failures)
        assert len(second.requests) == 0 and len(first.requests) == 2 * PROMPTS_PER_LANG
        responses = _stored("term_responses", "fails-a")
        assert len(responses) == 2 * PROMPTS_PER_LANG and (responses["outcome"] == "ok").all()
        assert {("term_responses", "fails-a", lang) for lang in ("zh_hans", "zh_hant")} <= report.materialized
        assert _stored("term_responses", "fails-b").empty


@pytest.mark.slow
def test_ctrl_c_stops_every_model_asked_at_once_and_keeps_what_arrived(tmp_path):
    """The real `sctc run` over two API models: one SIGINT, both stop starting requests, every answer that arrived
    is stored, exit 130."""
    import os
    import re
    import signal
    import subprocess
    import sys
    import time

    from sctc_assets_tests.conftest import REPO, upstream_location

    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with StubOpenAIServer(latency_s=0.5) as first, StubOpenAIServer(latency_s=0.5) as second:
        registry = _registry(tmp_path / "models.yaml", {"stop-a": (first.base_url, "stub-stop-a"),
                                                        "stop-b": (second.base_url, "stub-stop-b")})
        registry.write_text(registry.read_text().replace(f"api_key_env: {KEY_ENV}", "api_key_env: ''"
                                                         ).replace(f"concurrency: {CONCURRENCY}", "concurrency: 4"))
        env = {**os.environ, "SCTC_DATA_DIR": str(tmp_path / "data"), "DAGSTER_HOME": str(home),
               SCTC_ENV_VAR: str(upstream_location()), "SCTC_NO_REPORT": "1"}
        process = subprocess.Popen([sys.executable, "-m", "sctc_assets.cli", "run", "--benchmarks", "term",
                                    "--models", "stop-a", "stop-b", "--registry", str(registry),
                                    "--out", str(tmp_path / "out")],
                                   cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 180
            while len(first.requests) < 8 or len(second.requests) < 8:
                assert process.poll() is None and time.monotonic() < deadline, process.communicate()
                time.sleep(0.05)
            process.send_signal(signal.SIGINT)
            signalled = time.monotonic()
            out, err = process.communicate(timeout=120)
        finally:
            process.kill()
        late = [request for server in (first, second) for request in server.requests if request.at > signalled + 1.0]
        sent = len(first.requests) + len(second.requests)

    assert process.returncode == 130, (out, err)
    stored = re.search(r"^interrupted; (\d+) answers stored, rerun to continue$", err, re.MULTILINE)
    assert stored is not None and "Traceback" not in err, err
    # the halted partitions of both models are listed, with what is left to ask
    assert re.search(r"term stop-a/zh_hans: \d+", err) and re.search(r"term stop-b/zh_hans: \d+", err), err
    assert not late  # no request started once the stop had reached both models' threads
    cache = ResponseCache(tmp_path / "data" / "cache" / "responses.sqlite")
    counted = cache.count(model="stub-stop-a") + cache.count(model="stub-stop-b")
    assert counted == int(stored.group(1)) == sent  # every request that was sent was answered and stored
    assert sent < 4 * PROMPTS_PER_LANG
