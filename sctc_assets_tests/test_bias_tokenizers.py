"""The tokenizer the bias-factor tables count with: a Hugging Face hub entry that is not cached fails at once,
naming the entry, where the hub is off; a registry tokenizer is loaded once per process (#41 point 5)."""

from __future__ import annotations

import sys
import time

import pytest

from sctc_assets.lib import cost_estimate
from sctc_assets.lib.name import tokenization as tk


@pytest.fixture
def empty_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(cost_estimate, "_LOADED", {})
    monkeypatch.setattr(cost_estimate, "_UNAVAILABLE", {})
    return tmp_path / "hub"


def test_an_uncached_hub_entry_fails_fast_naming_the_entry_without_importing_transformers(empty_hub, monkeypatch):
    entry = tk.TokenizerEntry(key="some-hub-model", kind="transformers",
                              settings={"file": {"hub": "example-org/not-cached-model"}})
    monkeypatch.delitem(sys.modules, "transformers", raising=False)
    started = time.perf_counter()
    counter, why = cost_estimate.registry_counter(entry)
    assert counter is None
    assert time.perf_counter() - started < 1.0
    assert "tokenizer some-hub-model" in why and "example-org/not-cached-model" in why and "HF_HUB_OFFLINE" in why
    assert "transformers" not in sys.modules


def test_a_cached_hub_entry_is_not_refused(empty_hub):
    (empty_hub / "models--example-org--cached-model" / "snapshots" / "abc").mkdir(parents=True)
    assert tk.hub_cached("example-org/cached-model")
    assert tk.resolve_source({"hub": "example-org/cached-model"}, empty_hub, where="x") == "example-org/cached-model"


def test_with_the_hub_on_the_id_is_passed_through(empty_hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    assert not tk.hub_offline()
    assert tk.resolve_source({"hub": "example-org/not-cached"}, empty_hub, where="x") == "example-org/not-cached"


def test_a_registry_tokenizer_is_loaded_once_per_process_and_a_failure_is_remembered(empty_hub, monkeypatch):
    calls = []

    def fake_load(entry, files_dir, download_dir=None):
        calls.append(entry.key)
        if entry.key == "broken":
            raise tk.TokenizerUnavailable(f"tokenizer {entry.key}: no file")
        return lambda text: list(range(len(text)))

    monkeypatch.setattr(tk, "load_tokenizer", fake_load)
    good = tk.TokenizerEntry(key="good", kind="quicktok", settings={"encoding": "x"})
    broken = tk.TokenizerEntry(key="broken", kind="quicktok", settings={"encoding": "x"})
    for _ in range(3):
        counter, why = cost_estimate.registry_counter(good)
        assert counter is not None and why == "" and list(counter.encode("ab")) == [0, 1]
        counter, why = cost_estimate.registry_counter(broken)
        assert counter is None and why == "tokenizer broken: no file"
    assert calls == ["good", "broken"]
