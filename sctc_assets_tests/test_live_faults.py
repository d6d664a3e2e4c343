"""A live model behind a misbehaving API, through the whole term and sovereignty pipelines in Dagster.

The stub server injects every fault kind real APIs produce (429 with Retry-After, 500/503, hangs past the client's
timeout, truncated JSON, HTML 200s, dropped connections, HTTP 400 content_filter, finish_reason content_filter)
and records each request with the reply it got. The runs use the real assets, the real Parquet IO manager and
the real response cache; the assertions count what was sent, stored, lost and paid twice. A second test kills a
`sctc run` with SIGKILL in the middle of a partition and checks that the next run pays only for what was not stored.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.benchmarks import TERM
from sctc_assets.benchmarks import SOVEREIGNTY
from sctc_assets.cli import main
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.lib.cache import ResponseCache
from sctc_assets.lib.paths import default_cache_path
from sctc_assets.running.runner import Runner
from sctc_assets_tests.openai_stub_server import REFUSAL_FAULTS, TRANSIENT_FAULTS, FaultPlan, \
    StubOpenAIServer

REPO = Path(__file__).resolve().parents[1]
KEY_ENV = "SCTC_TEST_FAULTS_KEY"
MODEL = "live-api"
TERM_ROWS = 110 * 2  # 110 terms × 2 languages, one prompt variant, one trial
# Each fault kind at a rate that makes every kind occur and some requests fail twice (errors after one retry).
RATES = {"rate_limit": 0.08, "server_error": 0.05, "unavailable": 0.05, "hang": 0.03, "truncated": 0.05,
         "html": 0.05, "dropped": 0.03, "content_filter": 0.06, "filtered_completion": 0.04}


def _registry(path: Path, base_url: str, **settings: object) -> Path:
    options = {"max_retries": 1, "backoff_initial_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 0.5,
               "concurrency": 8, **settings}
    rendered = ", ".join(f"{name}: {value}" for name, value in options.items())
    path.write_text(
        "models:\n"
        f"  {MODEL}: {{backend: openai, model: stub-model, base_url: '{base_url}', api_key_env: {KEY_ENV},"
        f" {rendered}, benchmarks: {{term: {{trials: 1, prompt_variants: [1]}}, sovereignty: {{samples: 1}}}}}}\n",
        encoding="utf-8")
    return path


def _partitions(asset: str) -> pd.DataFrame:
    """Every stored partition of `asset` for the model, read back through the real storage."""
    storage = shared_resources()["io_manager"]
    files = sorted(Path(storage._root(), asset).rglob("*.parquet"))
    frames = [pd.read_parquet(file) for file in files]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["model"])
    return frame[frame["model"] == MODEL].reset_index(drop=True)


def _fates(server: StubOpenAIServer, start: int = 0) -> dict[str, list[str]]:
    """Prompt → the kinds of reply its requests got, in order (from request number `start` on)."""
    fates: dict[str, list[str]] = defaultdict(list)
    for request in server.requests[start:]:
        fates[request.prompt].append(request.kind)
    return fates


def _expected_outcome(kinds: list[str]) -> str:
    if kinds[-1] in REFUSAL_FAULTS:
        return "refusal"
    return "ok" if kinds[-1] == "ok" else "error"


@pytest.fixture
def live_environment(isolated_data_dir, extracted_upstream, tsb_location, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-faults")
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    monkeypatch.delenv("SCTC_MAX_CALLS", raising=False)
    monkeypatch.delenv("SCTC_MAX_COST_USD", raising=False)
    return tmp_path


@pytest.mark.slow
def test_faults_and_refusals_through_the_term_and_sovereignty_pipelines(live_environment, monkeypatch):
    with StubOpenAIServer(faults=FaultPlan(rates=RATES, seed=11, hang_s=1.5)) as server, \
            dg.DagsterInstance.ephemeral() as instance:
        monkeypatch.setenv("SCTC_MODELS", str(_registry(live_environment / "models.yaml", server.base_url)))
        runner = Runner(defs, instance, shared_resources(), log=lambda message: None)

        report = runner.run(TERM, [MODEL], {})
        assert report.ok, report.failures
        first = _fates(server)
        responses = _partitions("term_responses")
        assert len(responses) == TERM_ROWS and len(first) == TERM_ROWS  # one row per prompt: no answer lost
        expected = {prompt: _expected_outcome(kinds) for prompt, kinds in first.items()}
        assert dict(zip(responses["prompt"], responses["outcome"])) == expected
        counts = responses["outcome"].value_counts().to_dict()
        assert counts.get("refusal", 0) > 0 and counts.get("error", 0) > 0, counts
        assert sum(report.call_errors.values()) == counts["error"]  # what `sctc run`'s last line counts
        assert set(server.counts()) >= set(TRANSIENT_FAULTS) | set(REFUSAL_FAULTS) | {"ok"}
        # nothing answered twice; every answer and refusal stored, no error stored
        assert set(server.answered_per_body().values()) == {1}
        cache = ResponseCache(default_cache_path())
        assert cache.count(model="stub-model") == counts["ok"] + counts["refusal"]
        assert responses["served_model"].dropna().eq("stub-model").all()

        keys = ["lang", "prompt_variant", "term_id", "trial"]
        labels = _partitions("term_labels")
        assert set(labels["label_source"]) >= {"rules", "lexicon"}
        for source, labelled in labels.groupby("label_source"):
            labelled = labelled.drop(columns="outcome", errors="ignore").merge(
                responses[keys + ["outcome"]], on=keys, validate="one_to_one")
            assert len(labelled) == counts["ok"] + counts["refusal"], source  # refusals labelled, errors left out
            assert (labelled.loc[labelled["outcome"] == "refusal", "label"] == "incorrect").all(), source
        rates = _partitions("term_choice_rates")
        overall = rates[(rates["label_source"] == "rules") & (rates["subset"] == "all")].set_index("lang")
        per_lang = responses[responses["outcome"] != "error"].groupby("lang").size()
        assert overall["n"].to_dict() == per_lang.to_dict()  # the rate's denominator counts the refusals

        # The rerun asks exactly the prompts that ended in an error, and nothing that was answered.
        asked_before = len(server.requests)
        report = runner.run(TERM, [MODEL], {})
        assert report.ok, report.failures
        again = _fates(server, asked_before)
        assert set(again) == {prompt for prompt, outcome in expected.items() if outcome == "error"}
        assert set(server.answered_per_body().values()) == {1}
        rerun = _partitions("term_responses")
        assert len(rerun) == TERM_ROWS
        assert (rerun["outcome"] == "error").sum() < counts["error"]
        assert rerun.loc[rerun["prompt"].isin(set(expected) - set(again)), "cached"].all()

        # The sovereignty benchmark through the same endpoint and faults.
        asked_before = len(server.requests)
        report = runner.run(SOVEREIGNTY, [MODEL], {})
        assert report.ok, report.failures
        sovereignty = _partitions("sovereignty_responses")
        fates = _fates(server, asked_before)
        assert len(sovereignty) == len(fates) > 0
        outcomes = dict(zip(sovereignty["prompt"], sovereignty["outcome"]))
        for prompt, kinds in fates.items():
            wanted = _expected_outcome(kinds)
            # an answered but empty completion is an error by the sovereignty rules (missing answer)
            assert outcomes[prompt] == wanted or (wanted == "ok" and outcomes[prompt] == "error"), (prompt, kinds)
        results = _partitions("sovereignty_results")
        # every answer is scored (refusals and empty answers included); a call that ended in an error is not
        failed = sovereignty["outcome"].eq("error") & sovereignty["response"].isna()
        assert set(results["prompt_id"].astype(str) + results["lang"]) == set(
            sovereignty.loc[~failed, "prompt_id"].astype(str) + sovereignty.loc[~failed, "lang"])
        assert set(server.answered_per_body().values()) == {1}


@pytest.mark.slow
def test_kill_9_mid_partition_then_rerun_pays_only_for_what_was_not_stored(live_environment, monkeypatch):
    out = live_environment / "out"
    with StubOpenAIServer(latency_s=0.25) as server:
        registry = _registry(live_environment / "models.yaml", server.base_url, concurrency=4, timeout_s=30)
        monkeypatch.setenv("SCTC_MODELS", str(registry))
        command = [sys.executable, "-m", "sctc_assets.cli", "run", "--benchmarks", "term", "--models", MODEL,
                   "--out", str(out)]
        process = subprocess.Popen(command, cwd=REPO, env=dict(os.environ), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while len(server.requests) < 30:
                assert process.poll() is None, "sctc run ended before it was killed"
                assert time.monotonic() < deadline, "sctc run never reached the model calls"
                time.sleep(0.05)
        finally:
            os.killpg(process.pid, signal.SIGKILL)  # the run and any helper process it started
            process.wait(30)
        assert process.returncode == -signal.SIGKILL
        time.sleep(0.5)  # requests the dead process left in flight reach the server and end
        killed_at = len(server.requests)
        cache = ResponseCache(default_cache_path())
        stored = cache.count(model="stub-model")
        assert 0 < stored < TERM_ROWS
        stored_prompts = set(server.prompts_seen()[:killed_at])

        started = time.monotonic()
        assert main(["run", "--benchmarks", "term", "--models", MODEL, "--out", str(out)]) == 0
        rerun = server.prompts_seen()[killed_at:]

    assert len(rerun) == TERM_ROWS - stored  # only what was not stored is asked
    # at most the requests in flight when the process died were answered but never stored: paid twice
    assert len(set(rerun) & stored_prompts) <= 4
    assert time.monotonic() - started < 240  # the dead process's claims did not hold the rerun back for a lease
    responses = pd.read_parquet(out / "term_responses.parquet")
    assert len(responses) == TERM_ROWS and (responses["outcome"] == "ok").all()
    assert responses["cached"].sum() == stored


def _ask(runner: Runner, key: dg.MultiPartitionKey) -> dg.ExecuteInProcessResult:
    """One term_responses partition, through the job `sctc run` uses for it."""
    job = runner._job(TERM.job_name("per_model_lang"), ["term_responses"])
    return runner._execute(job, ["term_responses"], partition_key=key, tags={})


def test_a_run_budget_halts_a_partition_through_dagster_and_a_rerun_continues(live_environment, monkeypatch):
    with StubOpenAIServer() as server, dg.DagsterInstance.ephemeral() as instance:
        monkeypatch.setenv("SCTC_MODELS", str(_registry(live_environment / "models.yaml", server.base_url,
                                                        concurrency=4)))
        monkeypatch.setenv("SCTC_MAX_CALLS", "50")
        monkeypatch.setenv("SCTC_BUDGET_SCOPE", "first run")
        runner = Runner(defs, instance, shared_resources(), log=lambda message: None)
        runner.ensure_model_partitions([MODEL])
        runner.run(TERM, [], {})  # the model-independent inputs
        key = dg.MultiPartitionKey({"model": MODEL, "lang": "zh_hans"})
        result = _ask(runner, key)
        failures = [event.step_failure_data.error for event in result.all_events if event.is_step_failure]
        assert not result.success and len(failures) == 1
        error = failures[0]
        while error.cause is not None and (error.cls_name or "").startswith("Dagster"):
            error = error.cause
        assert error.cls_name == "GenerationHalted"  # what the runner and the CLI recognise
        assert "max_calls 50" in error.message and "50 answers stored, 60 not yet asked" in error.message
        assert len(server.requests) == 50 and ResponseCache(default_cache_path()).count(model="stub-model") == 50

        # Each rerun (a new `sctc run`: a new scope) with the same budget continues where the last one stopped.
        monkeypatch.setenv("SCTC_BUDGET_SCOPE", "second run")
        assert not _ask(runner, key).success
        assert len(server.requests) == 100
        monkeypatch.setenv("SCTC_BUDGET_SCOPE", "third run")
        assert _ask(runner, key).success
        assert len(server.requests) == 110 and set(server.answered_per_body().values()) == {1}
        assert len(_partitions("term_responses")) == 110
