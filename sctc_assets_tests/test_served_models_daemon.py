"""The must-show of re-auditing with the Dagster daemon: a stub endpoint changes the model it serves behind one
registry key between two observations of the `sctc_served_models` sensor, and the daemon's automation starts exactly
that model's answered partitions again (and nothing of the other observed model), under the new served version."""

from __future__ import annotations

import time

import dagster as dg
import pytest
from dagster._core.scheduler.instigation import TickStatus

from sctc_assets.assets.served_models import INTERVAL_ENV_VAR, SENSOR_NAME, observe_due
from sctc_assets.assets.automation import AUTOMATION_SENSOR_NAME
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.lib.dagster_home import write_instance_settings
from sctc_assets.lib.model_registry import load_registry
from sctc_assets.lib.served_model import PROBE_PROMPT, ServedVersion
from sctc_assets.resources.served_epoch import latest_version
from sctc_assets.running.instance import cli_instance
from sctc_assets_tests.daemon_backfill import LOCATION, Servers, prepare_inputs
from sctc_assets.definitions import every_asset
from sctc_assets_tests.test_served_models import KEY_ENV, ServingStub, write_registry

SET_CURSOR = """mutation ($selector: SensorSelector!) { setSensorCursor(sensorSelector: $selector, cursor: null) {
  __typename ... on PythonError { message } } }"""
ENDED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


def _ticks(instance, name: str) -> list:
    states = [state for state in instance.all_instigator_state() if state.instigator_name == name]
    return [tick for state in states for tick in instance.get_ticks(state.instigator_origin_id, state.selector_id)
            if tick.status in (TickStatus.SUCCESS, TickStatus.SKIPPED)]


def _wait(what: str, ready, servers: Servers, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = ready()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"{what} not within {timeout:.0f} s\n{servers.tail()}")


def _answer_runs(instance, earlier: set[str]) -> list:
    """The runs the daemon started (automation launches them as a backfill) that materialize answers."""
    return [run for run in instance.get_runs() if run.run_id not in earlier
            and dg.AssetKey("term_responses") in (run.asset_selection or ())]


@pytest.mark.slow
def test_the_daemon_reaudits_exactly_the_model_whose_served_version_changed(
        isolated_data_dir, extracted_upstream, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    home = isolated_data_dir / "dagster_home"
    home.mkdir()
    assert write_instance_settings(home)
    served = {"m-a": "m-a-0801", "m-b": "m-b-0801"}
    with ServingStub(served) as stub:
        registry = write_registry(tmp_path, stub.base_url)
        monkeypatch.setenv("SCTC_MODELS", str(registry))
        prepare_inputs(home, models=("watched-a", "watched-b"))
        with cli_instance(home) as instance:
            entries = load_registry(registry)
            for model, lang in (("watched-a", "zh_hans"), ("watched-a", "zh_hant"), ("watched-b", "zh_hans")):
                assert dg.materialize(every_asset(defs), selection=["term_responses"], instance=instance,
                                      partition_key=dg.MultiPartitionKey({"model": model, "lang": lang}),
                                      resources=shared_resources()).success
            # the first observation, before the daemon: the automation's first tick takes it as its starting point
            for event in observe_due(entries, {}, 0.0, lambda key: latest_version(instance, key))[0]:
                instance.report_runless_asset_event(event)
            earlier = {run.run_id for run in instance.get_runs()}
        first = ServedVersion("m-a-0801", "fp-m-a-0801").data_version

        env = {"SCTC_AUTOMATION": "1", INTERVAL_ENV_VAR: "5", "SCTC_MODELS": str(registry), KEY_ENV: "k"}
        with Servers(home, tmp_path / "logs", env=env) as servers, cli_instance(home) as instance:
            assert latest_version(instance, "watched-a") == first
            # the sensor's first probe finds the same versions (nothing recorded); two automation ticks see no change
            _wait("the sensor's first probe", lambda: _ticks(instance, SENSOR_NAME), servers, 180)
            _wait("two automation ticks", lambda: len(_ticks(instance, AUTOMATION_SENSOR_NAME)) >= 2, servers, 180)
            assert _answer_runs(instance, earlier) == []
            assert latest_version(instance, "watched-a") == first

            served["m-a"] = "m-a-0915"  # the provider swaps watched-a's model behind the same name
            changed = ServedVersion("m-a-0915", "fp-m-a-0915").data_version
            asked = len(stub.requests)
            def observed_again() -> bool:
                """Observe now rather than in a day: clear the cursor, which holds each entry's last probe, as
                *Reset cursor* in the UI does (again until it holds: a tick in flight writes back the one it read)."""
                if latest_version(instance, "watched-a") == changed:
                    return True
                reset = servers.graphql(SET_CURSOR, {"selector": {**LOCATION, "sensorName": SENSOR_NAME}})
                assert reset["setSensorCursor"]["__typename"] == "Sensor", reset
                return False

            _wait("the changed observation", observed_again, servers, 120)
            _wait("the re-audit runs", lambda: len([run for run in _answer_runs(instance, earlier)
                                                    if run.status in ENDED]) >= 2, servers, 480)
            runs = _answer_runs(instance, earlier)

        assert all(run.status == dg.DagsterRunStatus.SUCCESS for run in runs), [run.status for run in runs]
        assert sorted(run.tags["dagster/partition"] for run in runs) == ["zh_hans|watched-a", "zh_hant|watched-a"]
        with cli_instance(home) as instance:
            assert latest_version(instance, "watched-b") == ServedVersion("m-b-0801", "fp-m-b-0801").data_version
        answers = [request for request in stub.requests[asked:] if request.prompt != PROBE_PROMPT]
        # watched-a's prompts asked again (a new epoch: no cache hit), none of watched-b's
        assert answers and {request.body["model"] for request in answers} == {"m-a"}
