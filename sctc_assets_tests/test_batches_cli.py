"""The command line of provider batches (#40): bad batch settings are one line each before anything is sent,
`--batch` turns batches on for the chosen models that have a batch API (and says which it skipped), the plan prices
batch models at the batch price, and `sctc batches` lists and cancels the batches the response cache records."""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path
from typing import Any, ClassVar, Iterator, Sequence

import pytest

from sctc_assets.backends.openai_backend import OpenAIBackend
from sctc_assets.cli import _parser, main
from sctc_assets.cli.batches import age
from sctc_assets.cli.plan import build_estimate
from sctc_assets.lib.batch_settings import BATCH_MODELS_ENV, BATCH_WAIT_ENV
from sctc_assets.lib.batches import COLLECTED, BatchLine, BatchRecord, BatchStatus, LineResult
from sctc_assets.lib.cache import open_cache
from sctc_assets.lib.model_registry import load_registry
from sctc_assets_tests.openai_stub_server import StubOpenAIServer


def _errors(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]


@pytest.fixture
def stub():
    with StubOpenAIServer() as server:
        yield server


def _write_registry(tmp_path: Path, monkeypatch, text: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(path))
    return path


@pytest.fixture
def bad_registry(tmp_path, monkeypatch, isolated_data_dir, stub):
    return _write_registry(tmp_path, monkeypatch, f"""\
        models:
          poll: {{backend: openai, model: m, base_url: '{stub.base_url}', api_key_env: "", batch: true,
                  batch_poll_seconds: 0.5}}
          dearer: {{backend: openai, model: m, base_url: '{stub.base_url}', api_key_env: "", batch_price_factor: 1.5}}
          free: {{backend: anthropic, model: m, base_url: '{stub.base_url}', api_key_env: "", batch_price_factor: 0}}
          local: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: local, batch: true}}
        """)


def test_bad_batch_settings_are_one_line_each_before_anything_is_sent(bad_registry, stub, capsys, isolated_data_dir):
    where = f"error: {bad_registry}: model"
    expected = [
        f"{where} 'poll': batch_poll_seconds: must be in [1, ∞), got 0.5",
        f"{where} 'dearer': batch_price_factor: must be in (0, 1], got 1.5",
        f"{where} 'free': batch_price_factor: must be in (0, 1], got 0",
        f"{where} 'local': batch: true, but the 'sctc_assets_tests.fakes:ScriptedBackend' backend has no batch API "
        "(the openai, anthropic and gemini backends have one); remove `batch` from the entry",
    ]
    assert main(["run", "--models", "poll", "dearer", "free", "local", "--batch"]) == 2
    assert _errors(capsys) == expected  # each once: the backend's own check does not name them again
    assert main(["models"]) == 2
    assert _errors(capsys) == expected
    assert main(["plan", "--models", "poll", "dearer", "free", "local"]) == 2
    assert _errors(capsys) == expected
    assert stub.requests == [] and not (isolated_data_dir / "storage").exists()
    assert BATCH_MODELS_ENV not in os.environ and BATCH_WAIT_ENV not in os.environ


def test_batch_on_a_backend_with_a_batch_api_and_good_settings_is_no_problem(tmp_path, monkeypatch, capsys,
                                                                               isolated_data_dir):
    _write_registry(tmp_path, monkeypatch, """\
        models:
          gpt: {backend: openai, model: m, api_key_env: "", batch: true, batch_poll_seconds: 1, batch_price_factor: 1,
                batch_retry_sync_max: 0, batch_max_rounds: 1}
          claude: {backend: anthropic, model: m, api_key_env: "", batch: false}
          gem: {backend: gemini, model: m, api_key_env: "", batch: true, batch_price_factor: 0.25}
        """)
    assert main(["models"]) == 0
    assert _errors(capsys) == []


@pytest.fixture
def priced(tmp_path, monkeypatch, isolated_data_dir, extracted_upstream):
    return _write_registry(tmp_path, monkeypatch, """\
        models:
          gpt: {backend: openai, model: m, api_key_env: "", base_url: 'http://127.0.0.1:9/v1',
                price_input_per_mtok: 2.0, price_output_per_mtok: 8.0, benchmarks: {term: {trials: 1}}}
          gem: {backend: gemini, model: m, api_key_env: "", base_url: 'http://127.0.0.1:9/v1beta',
                price_input_per_mtok: 2.0, price_output_per_mtok: 8.0, batch_price_factor: 0.25,
                benchmarks: {term: {trials: 1}}}
          local: {backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: local, benchmarks: {term: {trials: 1}}}
        """)


def _costs(monkeypatch, batched: str | None) -> dict[tuple[str, str], Any]:
    if batched is None:
        monkeypatch.delenv(BATCH_MODELS_ENV, raising=False)
    else:
        monkeypatch.setenv(BATCH_MODELS_ENV, batched)
    entries = load_registry(Path(os.environ["SCTC_MODELS"]))
    rows = build_estimate({"term": ["gpt", "gem", "local"]}, entries, {"prompt_variants": [1]}).rows
    return {(row.model, row.partition): (row.cost_usd, row.batch_factor, row.to_ask) for row in rows}


def test_the_plan_prices_batch_models_at_their_batch_price(priced, monkeypatch):
    synchronous, batched = _costs(monkeypatch, None), _costs(monkeypatch, "gpt gem")
    assert synchronous.keys() == batched.keys() and len(synchronous) == 6
    for (model, partition), (cost, factor, to_ask) in batched.items():
        sync_cost, sync_factor, sync_to_ask = synchronous[model, partition]
        assert sync_factor is None and to_ask == sync_to_ask > 0
        if model == "local":
            assert factor is None and cost is None
        else:
            assert factor == {"gpt": 0.5, "gem": 0.25}[model]
            assert cost == pytest.approx(sync_cost * factor) and cost > 0


def test_plan_batch_says_which_models_go_by_batch_and_which_it_skipped(priced, capsys, monkeypatch):
    monkeypatch.delenv(BATCH_MODELS_ENV, raising=False)
    assert main(["plan", "--batch", "--models", "gpt", "gem", "local", "--prompt-variants", "1"]) == 0
    out = capsys.readouterr().out
    assert "--batch: local has no batch API: asked as usual" in out.splitlines()
    assert "gpt goes by batch: its calls are sent as provider batches and priced at 0.5 × its registry prices" in out
    assert "gem goes by batch" in out and "priced at 0.25 ×" in out and "local goes by batch" not in out
    assert "by batch, × 0.5 the price" in out
    assert BATCH_MODELS_ENV not in os.environ  # the flag lasts as long as the command
    assert main(["plan", "--batch", "--models", "local", "--prompt-variants", "1"]) == 2
    assert _errors(capsys) == ["error: --batch: none of the chosen models (local) has a backend with a batch API "
                               "(openai, anthropic, gemini)"]


def test_run_sets_the_batch_wait_mode_of_its_own_process():
    args = _parser().parse_args(["run", "--batch", "--no-wait"])
    assert args.batch and args.no_wait
    assert not _parser().parse_args(["run"]).no_wait
    assert _parser().parse_args(["plan", "--batch"]).batch


# --- sctc batches ----------------------------------------------------------------------------------------------------

class RecordingBatchClient:
    """Stands for a provider's `BatchClient` (the providers' own are tested against their stubs): it records each
    cancel, and a cancelled batch reports the provider's `cancelling` state."""

    provider = "openai"
    max_requests, max_bytes = 50_000, 200_000_000
    cancelled: ClassVar[list[str]] = []

    def line_bytes(self, line: BatchLine) -> int:
        return 100

    def submit(self, lines: Sequence[BatchLine], label: str) -> str:
        raise AssertionError("sctc batches submits nothing")

    def find(self, label: str, *, created_after: float, size: int) -> str | None:
        return None

    def status(self, provider_id: str) -> BatchStatus:
        state = "cancelling" if provider_id in self.cancelled else "in_progress"
        return BatchStatus(state, False, {"total": 3, "completed": 1, "failed": 0})

    def results(self, provider_id: str) -> Iterator[LineResult]:
        return iter(())

    def cancel(self, provider_id: str) -> None:
        self.cancelled.append(provider_id)


class RecordingBatchBackend(OpenAIBackend):
    def batch_client(self) -> RecordingBatchClient:
        return RecordingBatchClient()


def _record(local_id: str, *, provider_id: str | None, state: str, created_ago: float, registry_key: str | None,
            **fields: Any) -> BatchRecord:
    now = time.time()
    return BatchRecord(local_id=local_id, provider="openai", model="m", identity={"backend": "openai", "model": "m"},
                       size=3, state=state, provider_id=provider_id, created_at=now - created_ago,
                       updated_at=now - created_ago, expires_at=now + 86400, registry_key=registry_key, **fields)


@pytest.fixture
def recorded(tmp_path, monkeypatch, isolated_data_dir):
    """A cache with an open batch (waited for by two partitions), one collected an hour ago and one three days
    ago, and one not yet confirmed by its provider."""
    _write_registry(tmp_path, monkeypatch, """\
        models:
          gpt: {backend: 'sctc_assets_tests.test_batches_cli:RecordingBatchBackend', model: m, api_key_env: ""}
        """)
    RecordingBatchClient.cancelled.clear()
    cache = open_cache()
    try:
        cache.record_batch(_record("sctc-000000000001", provider_id="batch_open", state="in_progress",
                                   created_ago=7200, registry_key="gpt", counts={"total": 3, "completed": 1},
                                   estimated_cost_usd=0.0123, stored=0, partitions=["gpt|zh_hans", "gpt|zh_hant"]),
                           [(f"{index:064x}", "{}") for index in range(3)])
        cache.record_batch(_record("sctc-000000000002", provider_id="batch_done", state=COLLECTED, created_ago=3600,
                                   registry_key="gpt", ended=True, stored=3), [])
        cache.record_batch(_record("sctc-000000000003", provider_id="batch_old", state=COLLECTED,
                                   created_ago=3 * 86400, registry_key="gpt", ended=True, stored=3), [])
        cache.update_batch("sctc-000000000003", updated_at=time.time() - 3 * 86400)
        cache.record_batch(_record("sctc-000000000004", provider_id=None, state="submitting", created_ago=30,
                                   registry_key="gpt"), [])
    finally:
        cache.close()


def test_batches_lists_open_and_recent_batches(recorded, capsys):
    assert main(["batches"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| sctc-")]
    assert [row.split("|")[1].strip() for row in rows] == ["sctc-000000000004", "sctc-000000000002",
                                                           "sctc-000000000001"]  # newest first
    open_row = rows[2]
    for shown in ("gpt", "openai", "batch_open", "in_progress", "completed 1, total 3 (stored 0/3)", "2h", "0.0123",
                  "gpt|zh_hans, gpt|zh_hant"):
        assert shown in open_row
    assert "(not confirmed)" in rows[0]
    assert "2 open, 1 collected or abandoned (in the last day; --all lists every one)" in out
    assert main(["batches", "--all", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(batch["local_id"], batch["open"]) for batch in listed] == [
        ("sctc-000000000004", True), ("sctc-000000000002", False), ("sctc-000000000001", True),
        ("sctc-000000000003", False)]
    assert listed[2]["partitions"] == ["gpt|zh_hans", "gpt|zh_hant"] and listed[2]["age_s"] >= 7200


def test_batches_cancel_goes_to_the_provider_once_and_records_its_state(recorded, capsys):
    assert main(["batches", "--cancel", "batch_open"]) == 0  # by provider id
    assert RecordingBatchClient.cancelled == ["batch_open"]
    assert "cancel requested: sctc-000000000001 (openai batch_open) is cancelling" in capsys.readouterr().out
    cache = open_cache()
    try:
        assert cache.get_batch("sctc-000000000001").state == "cancelling"
    finally:
        cache.close()
    for batch_id, error in [
        ("sctc-000000000002", "--cancel: batch sctc-000000000002 has ended (collected): nothing to cancel"),
        ("sctc-000000000004", "--cancel: batch sctc-000000000004 is not confirmed by openai yet (the next run of its "
                              "model resolves it): nothing to cancel"),
        ("nosuchbatch", "--cancel: no recorded batch has the id 'nosuchbatch' (`sctc batches --all` lists them)"),
    ]:
        assert main(["batches", "--cancel", batch_id]) == 2
        assert _errors(capsys) == [f"error: {error}"]
    assert RecordingBatchClient.cancelled == ["batch_open"]  # nothing more reached the provider


def test_batches_without_a_cache_lists_none_and_creates_none(isolated_data_dir, capsys):
    assert main(["batches"]) == 0
    assert "no batches" in capsys.readouterr().out
    assert not (isolated_data_dir / "cache").exists()


def test_ages_are_short():
    assert [age(seconds) for seconds in (5, 90, 7200, 3 * 86400)] == ["5s", "2m", "2h", "3d"]


# --- answers through a batch: the run's summary and the report --------------------------------------------------------

def _answers() -> "Any":
    import pandas as pd

    # gpt: 3 answers through batch b1 (one of them cached from an earlier run), 1 synchronous; local: none.
    return pd.DataFrame({
        "model": ["gpt", "gpt", "gpt", "gpt", "local"],
        "batch_id": ["b1", "b1", "b1", None, None],
        "cached": [False, False, True, False, False],
        "outcome": ["ok"] * 5,
        "input_tokens": [1000, 1000, 1000, 1000, 5],
        "output_tokens": [100, 100, 100, 100, 1],
    })


def test_the_summary_counts_answers_through_a_batch_and_their_cost_at_the_batch_price(tmp_path, monkeypatch):
    from sctc_assets.lib.batch_usage import BatchUsage, batch_summary_lines, batch_usage

    path = _write_registry(tmp_path, monkeypatch, """\
        models:
          gpt: {backend: openai, model: m, price_input_per_mtok: 2.0, price_output_per_mtok: 10.0,
                batch_price_factor: 0.25}
          local: {backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: local}
        """)
    entries = load_registry(path)
    assert batch_usage(_answers()) == {"gpt": BatchUsage(3, 2000, 200)}
    # 2 new batch answers: (2,000 × $2 + 200 × $10) / 1e6 × 0.25
    assert batch_summary_lines(_answers(), ["gpt", "local"], entries) == [
        "gpt: 3 answer(s) came through a provider batch; the new ones cost about $0.0015 at the batch price "
        "(0.25 × the registry's)"]
    assert batch_summary_lines(_answers().drop(columns="batch_id"), ["gpt"], entries) == []  # an older table


def test_the_report_usage_counts_batch_answers_and_prices_them_at_the_batch_price(tmp_path):
    from sctc_assets.lib.model_registry import ModelEntry
    from sctc_assets.lib.report.provenance import cost, response_usage

    folder = tmp_path / "storage" / "term_responses"
    folder.mkdir(parents=True)
    _answers().to_parquet(folder / "gpt.parquet")
    usage = response_usage(tmp_path / "storage", {"term": "term_responses"}).set_index("model")
    assert usage.loc["gpt", "batched"] == 3 and usage.loc["local", "batched"] == 0
    assert (usage.loc["gpt", "input_tokens_batched_new"], usage.loc["gpt", "output_tokens_batched_new"]) == (2000, 200)
    entry = ModelEntry("gpt", "openai", {"price_input_per_mtok": 2.0, "price_output_per_mtok": 10.0})
    # 1 synchronous new answer at the full price, 2 batch answers at half (the default factor)
    assert cost(usage.loc["gpt"].to_dict(), entry) == pytest.approx((1000 * 2 + 100 * 10) / 1e6
                                                                    + (2000 * 2 + 200 * 10) / 1e6 * 0.5)


def test_a_run_left_waiting_for_batches_says_so_and_asks_for_no_estimate(capsys):
    from types import SimpleNamespace

    from sctc_assets.cli.run import halted_stages, report_halt
    from sctc_assets.lib.model_selection import ModelSelection

    waiting = SimpleNamespace(stage="term_responses[gpt|zh_hans]", halted=False,
                              message="term_responses: BatchesPending: 2 batch(es) still running (sctc-0001, sctc-0002)")
    failed = SimpleNamespace(stage="term_scores[gpt|zh_hans]", halted=False, message="ValueError: boom")
    assert halted_stages([waiting, failed]) == [waiting]
    report_halt(SimpleNamespace(), ModelSelection({}), [waiting])  # no estimate is built (it would need the upstream)
    err = capsys.readouterr().err
    assert "1 stage(s) wait for provider batches that are still running; rerun the same command to collect them" in err
    assert "term_responses[gpt|zh_hans]: 2 batch(es) still running (sctc-0001, sctc-0002)" in err
    assert "left to ask" not in err
