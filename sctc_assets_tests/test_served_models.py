"""Observing the served model (`observe:` in the registry): the probe, the registry's checks, at most one observation
per interval, and the automation that starts exactly the changed model's answered partitions, whose new answers
carry the new served version's epoch tag (a new sample in the cache, as `--sovereignty-epoch` makes one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.assets.served_models import observe_due
from sctc_assets.benchmarks import TERM
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.lib.model_registry import RegistryError, load_registry
from sctc_assets.lib.served_model import PROBE_PROMPT, ObserveError, ServedVersion, epoch_of, observe_openai
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.served_epoch import DATA_VERSION_TAG, latest_epoch, latest_version
from sctc_assets.definitions import every_asset
from sctc_assets_tests.openai_stub_server import (DROP_CONNECTION, StubOpenAIServer, StubReply, api_error, completion,
                                                  cut_short, echo_reply, garbled)

KEY_ENV = "SCTC_TEST_SERVED_KEY"
EVERY_ASSET = every_asset(defs)


class ServingStub(StubOpenAIServer):
    """The stub OpenAI server, serving each requested model name as `served[name]` with fingerprint `fp-<that>`."""

    def __init__(self, served: dict[str, str]):
        super().__init__()
        self.served = served

    def echo(self, prompt: str, body: dict[str, Any]):
        reply = echo_reply(prompt, body.get("seed"))
        reply.body["model"] = self.served[body["model"]]
        reply.body["system_fingerprint"] = f"fp-{self.served[body['model']]}"
        return reply


def write_registry(folder: Path, base_url: str, observe: str = "daily") -> Path:
    path = folder / "models.yaml"
    path.write_text("models:\n" + "".join(
        f"  watched-{name}: {{backend: openai, model: m-{name}, base_url: '{base_url}', api_key_env: {KEY_ENV},"
        f" observe: {observe}, benchmarks: {{term: {{trials: 1, prompt_variants: [1]}}}}}}\n" for name in "ab"
    ) + "  unwatched: {backend: openai, model: m-c, base_url: 'http://127.0.0.1:9/v1'}\n", encoding="utf-8")
    return path


def test_the_probe_is_one_token_and_reads_the_served_model_and_fingerprint(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    with ServingStub({"m-a": "m-a-2026-08-01"}) as stub:
        version = observe_openai({"base_url": stub.base_url, "model": "m-a", "api_key_env": KEY_ENV})
    assert version == ServedVersion("m-a-2026-08-01", "fp-m-a-2026-08-01")
    [request] = stub.requests
    assert request.body == {"model": "m-a", "messages": [{"role": "user", "content": PROBE_PROMPT}], "max_tokens": 1}
    assert request.authorization == "Bearer k"
    assert version.epoch == epoch_of(version.data_version) and version.epoch.startswith("served-")
    assert ServedVersion("m-a-2026-08-01", "fp-other").data_version != version.data_version


@pytest.mark.parametrize(("entry", "message"), [
    ("{backend: replay, observe: daily}", "observe: the 'replay' backend's served model cannot be observed"),
    ("{backend: transformers, model: x, observe: daily}", "observe: the .transformers. backend.s served model"),
    ("{backend: openai, model: x, observe: {every_hours: 6}}", "observe.every_hours: .*N >= 24, found 6"),
    ("{backend: openai, model: x, observe: hourly}", "observe: expected `observe: daily`"),
])
def test_the_registry_refuses_observing_what_cannot_be_observed_naming_file_and_model(tmp_path, entry, message):
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  odd: {entry}\n", encoding="utf-8")
    with pytest.raises(RegistryError, match=f"{path}: model 'odd': {message}"):
        load_registry(path)


def test_each_entry_is_observed_at_most_once_per_interval(tmp_path):
    entries = load_registry(write_registry(tmp_path, "http://unused/v1", observe="{every_hours: 48}"))
    asked = []

    def probe(settings):
        asked.append(settings["model"])
        return ServedVersion(settings["model"] + "-v1", "fp")

    events, times, errors = observe_due(entries, {}, 1000.0, observe=probe)
    assert asked == ["m-a", "m-b"] and errors == []  # never the entry without `observe:`
    assert times == {"watched-a": 1000.0, "watched-b": 1000.0}
    assert [event.partition for event in events] == ["watched-a", "watched-b"]
    assert events[0].tags[DATA_VERSION_TAG] == ServedVersion("m-a-v1", "fp").data_version
    events, times, _ = observe_due(entries, times, 1000.0 + 48 * 3600 - 1, observe=probe)
    assert events == [] and len(asked) == 2
    known = {"watched-a": ServedVersion("m-a-v1", "fp").data_version}  # watched-a unchanged: probed, not recorded
    events, times, _ = observe_due(entries, {**times, "watched-b": 0.0}, 1000.0 + 48 * 3600, known.get, probe)
    assert [event.partition for event in events] == ["watched-b"] and len(asked) == 4
    assert times == {"watched-a": 1000.0 + 48 * 3600, "watched-b": 1000.0 + 48 * 3600}


def _requested(tick) -> dict[str, set]:
    graph = defs.resolve_asset_graph()
    found = {key.to_user_string(): tick.get_requested_partitions(key)
             for key in dg.AssetSelection.groups("term").resolve(graph)}
    return {name: keys for name, keys in found.items() if keys}


def _answers(instance, model: str, lang: str) -> pd.DataFrame:
    key = dg.MultiPartitionKey({"model": model, "lang": lang})
    result = dg.materialize(EVERY_ASSET, selection=["term_responses"], partition_key=key, instance=instance,
                            resources=shared_resources())
    assert result.success
    return result.output_for_node("term_responses")


@pytest.mark.slow
def test_a_changed_served_model_starts_exactly_its_answered_partitions_under_a_new_epoch(
        isolated_data_dir, extracted_upstream, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    served = {"m-a": "m-a-0801", "m-b": "m-b-0801"}
    with ServingStub(served) as stub, dg.instance_for_test() as instance:
        monkeypatch.setenv("SCTC_MODELS", str(write_registry(tmp_path, stub.base_url)))
        entries = load_registry(tmp_path / "models.yaml")
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, ["watched-a", "watched-b"])
        assert dg.materialize(EVERY_ASSET, selection=list(TERM.inputs), instance=instance,
                              resources=shared_resources()).success

        def observe() -> None:
            for event in observe_due(entries, {}, 0.0, lambda key: latest_version(instance, key))[0]:
                instance.report_runless_asset_event(event)

        observe()
        first = {model: latest_epoch(instance, model) for model in ("watched-a", "watched-b")}
        assert first["watched-a"] == ServedVersion("m-a-0801", "fp-m-a-0801").epoch
        before = {lang: _answers(instance, "watched-a", lang) for lang in ("zh_hans", "zh_hant")}
        _answers(instance, "watched-b", "zh_hans")  # watched-b answered one language only
        assert set(before["zh_hans"]["served_model"]) == {"m-a-0801"}
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, asset_selection=dg.AssetSelection.all())
        cursor = tick.cursor

        observe()  # the same versions again: nothing starts
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor,
                                                 asset_selection=dg.AssetSelection.all())
        cursor = tick.cursor
        assert "term_responses" not in _requested(tick)

        served["m-a"] = "m-a-0915"  # the provider swaps watched-a's model behind the same name
        calls = len(stub.requests)
        observe()
        assert latest_epoch(instance, "watched-a") == ServedVersion("m-a-0915", "fp-m-a-0915").epoch
        assert latest_epoch(instance, "watched-b") == first["watched-b"]
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor,
                                                 asset_selection=dg.AssetSelection.all())
        model_a = {dg.MultiPartitionKey({"model": "watched-a", "lang": lang}) for lang in ("zh_hans", "zh_hant")}
        # watched-a's answers, and in the same runs what reads them per partition; nothing of watched-b
        assert _requested(tick) == {name: model_a for name in ("term_responses", "term_judgements", "term_labels",
                                                                "term_incorrect_type_judgements")}

        after = _answers(instance, "watched-a", "zh_hans")
        # asked again under the new epoch (a cache miss for every prompt), answered by the new served model
        assert len(stub.requests) - calls == 2 + len(after)  # two probes, then every prompt once
        assert set(after["served_model"]) == {"m-a-0915"} and not after["cached"].any()
        assert len(after) == len(before["zh_hans"])


class FlippingStub(StubOpenAIServer):
    """Serves `m-<version>` behind every name; answers PASSING, FAILING to the prompts in `failing`."""

    def __init__(self) -> None:
        super().__init__()
        self.version, self.failing = "0801", set()

    def echo(self, prompt: str, body: dict[str, Any]):
        from sctc_assets_tests.test_sovereignty_groups_drift import FAILING, PASSING

        reply = completion(FAILING if prompt in self.failing else PASSING, model=f"m-{self.version}")
        reply.body["system_fingerprint"] = f"fp-{self.version}"
        return reply


@pytest.mark.slow
def test_the_drift_table_compares_the_answers_of_two_observed_served_versions(
        isolated_data_dir, tsb_location, tmp_path, monkeypatch):
    """`sctc run` tags an observed entry's answers with the served version's epoch; after the provider swaps the
    model, the new answers are new samples and `--sovereignty-drift` compares the two versions (hand counts)."""
    from sctc_assets.cli import main
    from sctc_assets.lib.dagster_home import write_instance_settings
    from sctc_assets.lib.paths import default_dagster_home
    from sctc_assets.running.instance import cli_instance

    monkeypatch.setenv(KEY_ENV, "k")
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    home = default_dagster_home()
    home.mkdir(parents=True)
    write_instance_settings(home)
    with FlippingStub() as stub:
        registry = tmp_path / "models.yaml"
        registry.write_text(f"models:\n  watched: {{backend: openai, model: m, base_url: '{stub.base_url}', "
                            f"api_key_env: {KEY_ENV}, max_retries: 0, observe: daily, "
                            "benchmarks: {sovereignty: {samples: 1}}}\n", encoding="utf-8")
        monkeypatch.setenv("SCTC_MODELS", str(registry))
        entries = load_registry(registry)

        def observe() -> str:
            with cli_instance(home) as instance:
                for event in observe_due(entries, {}, 0.0, lambda key: latest_version(instance, key))[0]:
                    instance.report_runless_asset_event(event)
                return latest_epoch(instance, "watched")

        old = observe()
        assert old == ServedVersion("m-0801", "fp-0801").epoch
        run = ["run", "--benchmarks", "sovereignty", "--models", "watched"]
        assert main([*run, "--out", str(tmp_path / "first")]) == 0
        first = pd.read_parquet(tmp_path / "first" / "sovereignty_responses.parquet")
        assert set(first["epoch"]) == {old} and set(first["served_model"]) == {"m-0801"}
        asked = len(stub.requests)

        prompts = pd.read_parquet(tmp_path / "first" / "sovereignty_prompts.parquet")
        english = prompts[(prompts["lang"] == "en") & (prompts["prompt_set"] == "stage1_sovereignty")]
        flipped = sorted(english["prompt_id"])[:2]
        stub.failing = set(english.set_index("prompt_id").loc[flipped, "prompt"])
        stub.version = "0915"
        new = observe()
        assert new == ServedVersion("m-0915", "fp-0915").epoch != old
        out = tmp_path / "second"
        assert main([*run, "--sovereignty-drift", old, new, "--out", str(out)]) == 0
        assert len(stub.requests) - asked == 1 + len(first)  # the probe, then every prompt again (a new epoch)

    second = pd.read_parquet(out / "sovereignty_responses.parquet")
    assert set(second["epoch"]) == {new} and set(second["served_model"]) == {"m-0915"}
    drift = pd.read_parquet(out / "sovereignty_drift.parquet").query("lang == 'en' and scoring_rule == 'code'")
    [record] = drift.to_dict("records")
    assert (record["epoch_a"], record["epoch_b"]) == (old, new)
    assert sorted(record["flipped_to_fail"]) == flipped
    n = record["n_pairs"]
    assert (record["passed_a"], record["passed_b"], record["mcnemar_b"], record["mcnemar_c"]) == (n, n - 2, 2, 0)
    # exact McNemar by hand: b = 2, c = 0; two-sided binomial(2, ½) p = min(1, 2 × (½)²) = 0.5
    assert record["p_exact"] == pytest.approx(0.5)


def test_observing_the_asset_by_hand_records_only_changed_versions(tmp_path, monkeypatch):
    from dagster._core.definitions.observe import observe  # what *Observe* in the UI runs

    from sctc_assets.assets.served_models import served_model

    monkeypatch.setenv(KEY_ENV, "k")
    served = {"m-a": "m-a-0801", "m-b": "m-b-0801"}
    with ServingStub(served) as stub, dg.instance_for_test() as instance:
        monkeypatch.setenv("SCTC_MODELS", str(write_registry(tmp_path, stub.base_url)))
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, ["watched-a", "watched-b", "unwatched"])

        def observe_by_hand() -> int:
            before = len(instance.fetch_observations(dg.AssetRecordsFilter(asset_key=served_model.key),
                                                     limit=100).records)
            assert observe([served_model], instance=instance, resources=shared_resources()).success
            return len(instance.fetch_observations(dg.AssetRecordsFilter(asset_key=served_model.key),
                                                   limit=100).records) - before

        assert observe_by_hand() == 2  # both observed entries, never the unwatched one
        assert observe_by_hand() == 0  # probed again, unchanged: nothing recorded (it would start the answers)
        served["m-b"] = "m-b-0915"
        assert observe_by_hand() == 1
        assert latest_version(instance, "watched-b") == ServedVersion("m-b-0915", "fp-m-b-0915").data_version


def test_answers_stored_before_served_model_existed_stay_unchanged_until_the_model_is_observed():
    """An instance made before `served_model` existed: its answers' provenance lacks the dependency, which Dagster
    reports as "has a new dependency on served_model". For a model never observed that is no reason to ask again
    (`sctc run` keeps the answers); once the model's served version is observed, it is."""
    from sctc_assets.assets.served_models import observation
    from sctc_assets.running.dagster_internals import AssetKeyPartitionKey
    from sctc_assets.running.unchanged import Staleness
    from dagster._core.definitions.data_version import StaleCause, StaleCauseCategory

    def cause(model: str | None, reason: str = "has a new dependency on served_model") -> StaleCause:
        return StaleCause(AssetKeyPartitionKey(dg.AssetKey("term_responses"), f"zh_hans|{model}"),
                          StaleCauseCategory.DEPENDENCIES, reason,
                          AssetKeyPartitionKey(dg.AssetKey("served_model"), model))

    with dg.instance_for_test() as instance:
        staleness = Staleness(defs, instance)
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, ["old", "seen"])
        instance.report_runless_asset_event(observation("seen", ServedVersion("m-1", "fp-1")))
        assert staleness._new_unobserved_source(cause("old"))
        assert not staleness._new_unobserved_source(cause("seen"))
        assert not staleness._new_unobserved_source(cause("old", "has a new dependency data version"))
        other = StaleCause(AssetKeyPartitionKey(dg.AssetKey("term_responses"), "zh_hans|old"),
                           StaleCauseCategory.DEPENDENCIES, "has a new dependency on term_prompts",
                           AssetKeyPartitionKey(dg.AssetKey("term_prompts"), None))
        assert not staleness._new_unobserved_source(other)


def test_an_endpoint_that_answers_the_probe_badly_is_an_observation_error_never_a_change(tmp_path, monkeypatch):
    """429 with Retry-After, a 5xx, an HTML page with status 200, JSON cut short, a dropped connection and an answer
    naming no model: each probe is one request, records nothing (no new served version, so no re-audit), and says
    which endpoint and model failed, without the key; the entry is due again at its next interval."""
    monkeypatch.setenv(KEY_ENV, "sk-secret-probe-key")
    with ServingStub({"m-a": "m-a-v1", "m-b": "m-b-v1"}) as stub:
        entries = {key: entry for key, entry in load_registry(write_registry(tmp_path, stub.base_url)).items()
                   if key == "watched-a"}
        nameless = echo_reply(PROBE_PROMPT)
        del nameless.body["model"]
        bad = [api_error(429, "Rate limit reached for requests", code="rate_limit_exceeded",
                         headers={"Retry-After": "7"}),
               api_error(503, "The server is overloaded"),
               garbled(b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
               cut_short(completion("ok", model="m-a-v1")),
               DROP_CONNECTION,
               StubReply(200, nameless.body)]
        stub.script(PROBE_PROMPT, *bad)
        errors_seen = []
        for attempt in range(len(bad)):
            events, times, errors = observe_due(entries, {}, 1000.0 + attempt, lambda key: None)
            assert events == [] and times == {"watched-a": 1000.0 + attempt}
            assert len(errors) == 1 and errors[0].startswith(f"watched-a: {stub.base_url}: observing 'm-a'")
            errors_seen += errors
        assert len(stub.requests) == len(bad)  # one request per probe: the probe does not retry within a call
        assert not any("sk-secret-probe-key" in error for error in errors_seen)
        # the next probe gets an answer: the served version is recorded
        events, _, errors = observe_due(entries, {}, 2000.0, lambda key: None)
    assert errors == [] and [event.partition for event in events] == ["watched-a"]
    assert events[0].tags[DATA_VERSION_TAG] == ServedVersion("m-a-v1", "fp-m-a-v1").data_version


def test_a_hanging_endpoint_is_an_observation_error_after_the_probe_timeout(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    with ServingStub({"m-a": "m-a-v1"}) as stub:
        stub.script(PROBE_PROMPT, StubReply(200, completion("ok", model="m-a-v1").body, delay_s=3.0))
        with pytest.raises(ObserveError, match=f"{stub.base_url}: observing 'm-a' failed: .*timed out"):
            observe_openai({"base_url": stub.base_url, "model": "m-a", "api_key_env": KEY_ENV}, timeout_s=0.5)
