"""`sctc run` of a batch model against stubs of the three providers' batch APIs, end to end.

The sovereignty benchmark (30 prompts: 10 per prompting language, one batch per partition) runs through the real
assets, the real response cache and the real batch clients against stub servers that move each batch through its
provider's real states (`batch_stubs.py`, `anthropic_batch_stub.py`, `gemini_batch_stub.py`), with failing lines and
a batch that expires with part of its lines answered. The assertions count from the stubs' logs: every prompt ends
answered, refused or an error row; failed lines are asked again; no line is answered twice (paid twice); a rerun
asks only the error row, and the run after it sends nothing at all. A second test kills `sctc run` with SIGKILL while
its batches are open and checks that the same command collects them: no batch submitted again, no answer lost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pytest

from sctc_assets.cli import main
from sctc_assets.lib.batch_usage import through_batch
from sctc_assets.lib.cache import open_cache
from sctc_assets.lib.sovereignty.prompts import upstream_prompt_table
from sctc_assets.lib.sovereignty.upstream import shared_roots
from sctc_assets_tests.anthropic_batch_stub import StubAnthropicBatches
from sctc_assets_tests.batch_stubs import OpenAIBatchStub
from sctc_assets_tests.gemini_batch_stub import StubGeminiBatches
from sctc_assets_tests.openai_stub_server import api_error
from sctc_assets_tests.provider_batch_stub import BatchPlan

REPO = Path(__file__).resolve().parents[1]
KEY_ENV = "SCTC_TEST_BATCH_KEY"
KEY = "sk-batch-test-key-0123456789"
MODEL = "batch-model"
PROMPTS = 30


class Provider:
    """One provider's stub, its registry entry and how its stub is scripted and counted."""

    def __init__(self, name: str):
        self.name = name
        if name == "openai":
            self.stub: Any = OpenAIBatchStub(api_key=KEY)
        elif name == "anthropic":
            self.stub = StubAnthropicBatches(api_key=KEY)
        else:
            self.stub = StubGeminiBatches(api_key=KEY)

    def __enter__(self) -> "Provider":
        self.stub.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stub.__exit__(*exc_info)

    def entry(self, **settings: Any) -> dict[str, Any]:
        base = {"openai": f"{self.stub.base_url}", "anthropic": self.stub.base_url, "gemini": self.stub.base_url}
        model = {"openai": "stub-model", "anthropic": "claude-stub", "gemini": "gemini-stub"}[self.name]
        return {"backend": self.name, "model": model, "base_url": base[self.name], "api_key_env": KEY_ENV,
                "batch": True, "batch_poll_seconds": 1, "max_retries": 2, "backoff_initial_s": 0.01,
                "backoff_max_s": 0.05, "timeout_s": 10,
                # The Anthropic and Gemini stubs have no synchronous endpoint: their failed lines go in a new batch.
                "batch_retry_sync_max": 20 if self.name == "openai" else 0, **settings}

    def fail_line(self, prompt: str, fate: str) -> None:
        """The next line carrying `prompt` gets `fate`: `server_error` (worth asking again), `invalid` (a final
        error of the request itself) or `refusal`."""
        if self.name != "openai":
            self.stub.script_line(prompt, fate)
            return
        reply = {"server_error": api_error(500, "The server had an error while processing your request."),
                 "invalid": api_error(400, "Invalid 'messages[0].content': string too long.",
                                      code="string_above_max_length"),
                 "refusal": api_error(400, "The response was filtered due to the prompt triggering Azure OpenAI's "
                                           "content management policy.", code="content_filter")}[fate]
        self.stub.script_line(prompt, reply)

    def expire_next(self, answered: int) -> None:
        """The next batch expires with only its first `answered` lines done."""
        if self.name == "openai":
            self.stub.script_batch(end="expired", answered=answered)
        else:
            self.stub.plan(BatchPlan(end="expired", answered=answered))

    def hold_next(self, polls: int, batches: int) -> None:
        """The next `batches` batches stay running for `polls` polls."""
        for _ in range(batches):
            if self.name == "openai":
                self.stub.script_batch(hold=polls)
            else:
                self.stub.plan(BatchPlan(running_polls=polls))

    def batches_created(self) -> int:
        return len(self.stub.batches) if self.name == "openai" else len(self.stub.created)

    def lines_per_id(self) -> Counter:
        """custom id → how many batches carried it."""
        if self.name == "openai":
            return Counter(line["custom_id"] for batch in self.stub.batches.values() for line in batch.lines)
        return Counter(custom_id for batch in self.stub.created for custom_id, _ in batch.lines)

    def answered_twice(self) -> int:
        answers = self.stub.batch_answers() if self.name == "openai" else self.stub.answered
        return sum(count > 1 for count in answers.values())

    def sync_requests(self) -> int:
        """Synchronous calls answered (the failed lines retried one by one)."""
        return len(self.stub.requests) if self.name == "openai" else 0

    def calls(self) -> int:
        """Every call the stub has seen (batch routes and synchronous answers)."""
        if self.name == "openai":
            return len(self.stub.calls) + len(self.stub.requests)
        return sum(self.stub.calls.values())


def _registry(path: Path, entry: dict[str, Any]) -> Path:
    rendered = ", ".join(f"{name}: {value!r}" if isinstance(value, str) else f"{name}: {str(value).lower()}"
                         if isinstance(value, bool) else f"{name}: {value}" for name, value in entry.items())
    path.write_text(f"models:\n  {MODEL}: {{{rendered}, benchmarks: {{sovereignty: {{samples: 1}}}}}}\n",
                    encoding="utf-8")
    return path


def _prompts(tsb_location: str) -> list[str]:
    table = upstream_prompt_table(shared_roots(tsb_location))
    return table["prompt"].tolist()


def _responses(out: Path) -> pd.DataFrame:
    frame = pd.read_parquet(out / "sovereignty_responses.parquet")
    return frame[frame["model"] == MODEL].reset_index(drop=True)


@pytest.fixture
def batch_environment(isolated_data_dir, tsb_location, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    monkeypatch.delenv("SCTC_MAX_CALLS", raising=False)
    monkeypatch.delenv("SCTC_MAX_COST_USD", raising=False)
    monkeypatch.delenv("SCTC_BATCH_WAIT", raising=False)
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_a_batch_model_through_sctc_run_ends_every_prompt_and_pays_once(batch_environment, tsb_location, provider,
                                                                       monkeypatch, capsys):
    prompts = _prompts(tsb_location)
    assert len(prompts) == PROMPTS
    out = batch_environment / "out"
    command = ["run", "--benchmarks", "sovereignty", "--models", MODEL, "--out", str(out)]
    with Provider(provider) as stub:
        monkeypatch.setenv("SCTC_MODELS", str(_registry(batch_environment / "models.yaml", stub.entry())))
        transient, refused, invalid = prompts[0], prompts[1], prompts[2]
        stub.fail_line(transient, "server_error")
        stub.fail_line(refused, "refusal")
        stub.fail_line(invalid, "invalid")
        stub.expire_next(answered=4)  # the first batch expires with 4 of its 10 lines done

        assert main(command) == 0
        printed = capsys.readouterr().out
        responses = _responses(out)
        assert len(responses) == PROMPTS  # every prompt has its row
        outcomes = dict(zip(responses["prompt"], responses["outcome"]))
        assert outcomes[refused] == "refusal"
        assert outcomes[invalid] == "error" and responses.loc[responses["prompt"] == invalid, "response"].isna().all()
        assert outcomes[transient] == "ok"  # asked again after its line failed
        assert {prompt for prompt, outcome in outcomes.items() if outcome == "ok"} == set(prompts) - {refused, invalid}
        # every answer came through a batch but the lines retried synchronously (OpenAI: the expired ones and the
        # failed one; the other stubs have no synchronous endpoint)
        batched = through_batch(responses)
        assert batched.sum() >= PROMPTS - 1 - stub.sync_requests() and batched.sum() >= 20
        assert not batched[responses["prompt"] == invalid].any()  # an error row is no answer through a batch
        assert f"{batched.sum()} answer(s) came through a provider batch" in printed
        assert stub.answered_twice() == 0  # no line answered (paid) twice
        assert stub.batches_created() >= 3  # one per prompting language, plus the retries
        if provider != "openai":
            assert max(stub.lines_per_id().values()) >= 2  # failed and expired lines went in a new batch
        assert "batch" in printed
        cache = open_cache()
        assert not cache.batches(open_only=True)  # every batch collected

        # The rerun asks only the error row (the request the API refused), answered this time.
        before = stub.batches_created()
        assert main(command) == 0
        rerun = _responses(out)
        assert (rerun["outcome"] == "ok").sum() == PROMPTS - 1 and (rerun["outcome"] == "refusal").sum() == 1
        assert stub.answered_twice() == 0
        if provider != "openai":  # one new batch, of that one line
            assert stub.batches_created() == before + 1

        # An unchanged rerun submits nothing and sends nothing.
        calls = stub.calls()
        assert main(command) == 0
        assert stub.calls() == calls
        assert _responses(out)["cached"].all()


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_kill_9_after_the_submission_then_the_same_command_collects_without_resubmitting(
        batch_environment, provider, monkeypatch):
    out = batch_environment / "out"
    with Provider(provider) as stub:
        monkeypatch.setenv("SCTC_MODELS", str(_registry(batch_environment / "models.yaml", stub.entry())))
        stub.hold_next(polls=8, batches=1)  # the first batch stays open long enough to be killed while waiting
        command = [sys.executable, "-m", "sctc_assets.cli", "run", "--benchmarks", "sovereignty", "--models", MODEL,
                   "--out", str(out)]
        process = subprocess.Popen(command, cwd=REPO, env=dict(os.environ), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while stub.batches_created() < 1:
                assert process.poll() is None, "sctc run ended before it was killed"
                assert time.monotonic() < deadline, "sctc run never submitted a batch"
                time.sleep(0.05)
            time.sleep(0.3)  # right after the submission
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
        assert process.returncode == -signal.SIGKILL
        submitted = stub.batches_created()
        recorded = open_cache().batches(open_only=True)
        assert len(recorded) >= submitted

        assert main(["run", "--benchmarks", "sovereignty", "--models", MODEL, "--out", str(out)]) == 0

    per_id = stub.lines_per_id()
    assert len(per_id) == PROMPTS and set(per_id.values()) == {1}  # 0 batches submitted again for any line
    assert stub.answered_twice() == 0
    responses = _responses(out)
    assert len(responses) == PROMPTS and (responses["outcome"] == "ok").all()  # 0 answers lost


@pytest.mark.slow
def test_no_wait_then_sctc_batches_lists_and_cancels_and_the_same_command_collects(batch_environment, monkeypatch,
                                                                                   capsys):
    """`sctc run --no-wait` submits and stops; `sctc batches` lists the open batches; `--cancel` cancels one at the
    provider; the same command then collects every batch, the cancelled one's unanswered lines asked again."""
    out = batch_environment / "out"
    command = ["run", "--benchmarks", "sovereignty", "--models", MODEL, "--out", str(out)]
    with Provider("openai") as stub:
        prices = {"price_input_per_mtok": 2.0, "price_output_per_mtok": 8.0}
        monkeypatch.setenv("SCTC_MODELS", str(_registry(batch_environment / "models.yaml", stub.entry(**prices))))
        stub.hold_next(polls=1000, batches=3)  # running until cancelled or finished

        assert main([*command, "--no-wait"]) == 3  # the stages wait for their batches (nothing failed)
        capsys.readouterr()
        assert stub.batches_created() == 3 and not stub.stub.lines_answered
        open_batches = open_cache().batches(open_only=True)
        assert len(open_batches) == 3 and all(record.provider_id for record in open_batches)
        # an open batch's cost is a ceiling: every answer at max_tokens (512), at half the output price
        assert all(record.estimated_cost_usd >= 10 * 512 * 8.0 * 0.5 / 1e6 for record in open_batches)

        assert main(["batches", "--json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert sorted(row["provider_id"] for row in listed) == sorted(record.provider_id for record in open_batches)
        assert all(row["registry_key"] == MODEL and row["partitions"] for row in listed), listed

        cancelled = open_batches[0]
        assert main(["batches", "--cancel", cancelled.local_id]) == 0
        assert stub.stub.call_counts()["cancel"] == 1
        stub.stub.finish()  # the provider ends every batch: the cancelled one with no line answered

        assert main(command) == 0
        capsys.readouterr()
    responses = _responses(out)
    assert len(responses) == PROMPTS and (responses["outcome"] == "ok").all()  # nothing lost
    assert stub.answered_twice() == 0
    assert stub.stub.call_counts()["create"] == 3  # collected, not submitted again
    # the cancelled batch's 10 lines were asked again (synchronously: 10 ≤ batch_retry_sync_max)
    assert stub.sync_requests() == 10
    assert not open_cache().batches(open_only=True)
    # once collected, a batch's cost is what its stored answers cost at the batch price
    collected = {record.provider_id: record for record in open_cache().batches()}
    for provider_id, rows in responses[responses["batch_id"].notna()].groupby("batch_id"):
        spent = (rows["input_tokens"].sum() * 2.0 + rows["output_tokens"].sum() * 8.0) * 0.5 / 1e6
        assert collected[provider_id].estimated_cost_usd == pytest.approx(spent)
