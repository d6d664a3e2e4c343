"""Observing the served model through the provider's model listing (`observe: {probe: models}`): OpenAI's
*retrieve model*, `GET /models/{model}` (no tokens), read as the served version; a model the listing does not know
is an observation error, never a change. Against the stub OpenAI server's listing."""

from __future__ import annotations

from pathlib import Path

import pytest

from sctc_assets.assets.served_models import observe_due
from sctc_assets.lib.model_registry import RegistryError, load_registry
from sctc_assets.lib.served_model import ObserveError, ServedVersion, observe_endpoint, observe_listing
from sctc_assets_tests.openai_stub_server import StubOpenAIServer

KEY_ENV = "SCTC_TEST_LISTING_KEY"


def _registry(folder: Path, base_url: str) -> Path:
    path = folder / "models.yaml"
    path.write_text("models:\n"
                    f"  listed: {{backend: openai, model: m-a, base_url: '{base_url}', api_key_env: {KEY_ENV}, "
                    "observe: {probe: models}}\n"
                    f"  unknown: {{backend: openai, model: m-gone, base_url: '{base_url}', api_key_env: {KEY_ENV}, "
                    "observe: {every_hours: 48, probe: models}}\n"
                    f"  chatted: {{backend: openai, model: m-a, base_url: '{base_url}', observe: daily}}\n",
                    encoding="utf-8")
    return path


def test_the_listing_probe_reads_id_created_and_owner_without_a_chat_call(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    with StubOpenAIServer() as stub:
        stub.listed["m-a"] = {"created": 1754006400, "owned_by": "org-1"}
        settings = {"base_url": stub.base_url, "model": "m-a", "api_key_env": KEY_ENV}
        version = observe_listing(settings)
        assert observe_endpoint(settings, "models") == version
    assert version == ServedVersion("m-a", "created=1754006400 owned_by=org-1")
    assert [(request.kind, request.body, request.authorization) for request in stub.requests] == \
        [("models", {"model": "m-a"}, "Bearer k")] * 2  # two GETs, not one chat completion


def test_an_unknown_model_is_an_observe_error_not_a_change(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    with StubOpenAIServer() as stub:
        with pytest.raises(ObserveError, match=r"observing 'm-gone': the model listing does not know it \(404\)"):
            observe_listing({"base_url": stub.base_url, "model": "m-gone", "api_key_env": KEY_ENV})


def test_each_entry_is_observed_with_its_probe_and_a_relisted_model_is_a_change(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    with StubOpenAIServer() as stub:
        entries = load_registry(_registry(tmp_path, stub.base_url))
        assert {key: (entry.observe_hours, entry.observe_probe) for key, entry in entries.items()} == {
            "listed": (24.0, "models"), "unknown": (48.0, "models"), "chatted": (24.0, "chat")}
        stub.listed["m-a"] = {"created": 1754006400, "owned_by": "org-1"}
        events, times, errors = observe_due({key: entries[key] for key in ("listed", "unknown")}, {}, 0.0)
        assert [event.partition for event in events] == ["listed"]
        first = ServedVersion("m-a", "created=1754006400 owned_by=org-1")
        assert events[0].metadata["served_model"].value == "m-a"
        assert events[0].tags["dagster/data_version"] == first.data_version
        # the model the listing does not know: an error, tried again at the next interval, never an observation
        assert len(errors) == 1 and errors[0].startswith("unknown: ") and "(404)" in errors[0]
        assert times == {"listed": 0.0, "unknown": 0.0}

        known = {"listed": first.data_version}
        events, _, _ = observe_due({"listed": entries["listed"]}, {}, 86400.0, known.get)
        assert events == []  # the same listing: nothing recorded
        stub.listed["m-a"] = {"created": 1757030400, "owned_by": "org-1"}  # the name now points at a newer model
        events, _, _ = observe_due({"listed": entries["listed"]}, {}, 2 * 86400.0, known.get)
        assert [event.tags["dagster/data_version"] for event in events] == [
            ServedVersion("m-a", "created=1757030400 owned_by=org-1").data_version]
    assert {request.kind for request in stub.requests} == {"models"}  # no chat completion was asked


def test_an_unknown_probe_is_refused_naming_file_and_model(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  odd: {backend: openai, model: x, observe: {probe: listing}}\n", encoding="utf-8")
    with pytest.raises(RegistryError, match=f"{path}: model 'odd': observe.probe: expected one of chat, models, "
                                            "found 'listing'"):
        load_registry(path)
