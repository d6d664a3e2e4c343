"""Partition hygiene: registry examples are listed but are not partitions, the registry sensor removes partitions
of keys that left the registry unless results are stored under them, and a key typed into "Add a partition" that
is not in the registry fails its run naming the key and the registry, then goes away."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from sctc_assets.cli import main
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.lib.model_registry import RegistryError, load_registry, parse_registry
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.assets.sensors import GRACE_SECONDS, model_registry_sensor

REPO = Path(__file__).resolve().parents[1]
FAKE = "{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: %s, benchmarks: {term: {trials: 1, prompt_variants: [1]}}}"


def _write(path: Path, **entries: str) -> Path:
    path.write_text("models:\n" + "".join(f"  {key}: {value}\n" for key, value in entries.items()), encoding="utf-8")
    return path


@pytest.fixture
def registry(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch) -> Path:
    path = _write(tmp_path / "models.yaml", **{"fake-a": FAKE % "a", "fake-b": FAKE % "b",
                                              "example": "{backend: openai, model: m, enabled: false}"})
    monkeypatch.setenv("SCTC_MODELS", str(path))
    return path


def _tick(instance: dg.DagsterInstance, cursor: str | None = None) -> dg.SensorResult:
    context = dg.build_sensor_context(instance=instance, resources={"models": ModelRegistryResource()},
                                      definitions=defs, cursor=cursor)
    result = model_registry_sensor(context)
    for request in result.dynamic_partitions_requests or []:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)
    return result


def _term_inputs(instance: dg.DagsterInstance) -> None:
    assets = [defs.get_assets_def(name) for name in ("regional_terms", "term_prompts")]
    assert dg.materialize(assets, instance=instance, resources=shared_resources()).success


def _later(result: dg.SensorResult) -> str:
    """The cursor of `result` as the sensor reads it once the grace period has passed."""
    since = json.loads(result.cursor)["unregistered_since"]
    return json.dumps({"unregistered_since": {key: when - GRACE_SECONDS for key, when in since.items()}})


def _partitions(instance: dg.DagsterInstance) -> list[str]:
    return sorted(instance.get_dynamic_partitions(MODELS_PARTITION_NAME))


def test_the_shipped_examples_are_listed_but_not_enabled():
    entries = load_registry(REPO / "data" / "models.yaml")
    assert {key for key, entry in entries.items() if not entry.enabled} == {"gpt-4o-mini", "local-vllm",
                                                                            "qwen2.5-7b-instruct-hf"}
    assert all(entry.enabled for entry in entries.values() if entry.default)


def test_enabled_is_a_boolean_and_an_example_cannot_be_a_default():
    with pytest.raises(RegistryError, match="'x'.*`enabled` must be true or false"):
        parse_registry({"models": {"x": {"backend": "openai", "enabled": "no"}}}, source="r.yaml")
    with pytest.raises(RegistryError, match="'x'.*cannot be `default: true`"):
        parse_registry({"models": {"x": {"backend": "openai", "enabled": False, "default": True}}}, source="r.yaml")
    entry = parse_registry({"models": {"x": {"backend": "openai", "enabled": False, "model": "m"}}},
                           source="r.yaml")["x"]
    assert not entry.enabled and "enabled" not in entry.settings  # not passed to the backend as a setting


def test_sctc_models_lists_examples_and_sctc_run_refuses_them(registry, capsys):
    assert main(["models"]) == 0
    listing = capsys.readouterr().out
    assert "example" in listing and "no (example)" in listing
    assert main(["run", "--models", "example"]) == 2
    assert "registry examples, not enabled: example" in capsys.readouterr().err
    with pytest.raises(RegistryError, match="'example' is an example"):
        ModelRegistryResource().entry("example")


def test_the_sensor_follows_the_registry_and_keeps_keys_with_results(registry, tmp_path):
    with dg.instance_for_test() as instance:
        result = _tick(instance)
        assert [list(r.partition_keys) for r in result.dynamic_partitions_requests] == [["fake-a", "fake-b"]]
        assert _tick(instance).skip_reason.skip_message == "2 models, all registered"

        # fake-b gets a result; then both leave the registry, and a key was added by hand in the UI.
        _term_inputs(instance)
        job = defs.resolve_job_def("term_model_lang")
        assert job.execute_in_process(partition_key=dg.MultiPartitionKey({"model": "fake-b", "lang": "zh_hans"}),
                                      instance=instance, resources=shared_resources()).success
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, ["typed-by-hand"])
        _write(registry, **{"fake-c": FAKE % "c"})

        result = _tick(instance)
        requests = {type(r).__name__: sorted(r.partition_keys) for r in result.dynamic_partitions_requests}
        assert requests == {"AddDynamicPartitionsRequest": ["fake-c"]}  # the others wait out the grace period
        result = _tick(instance, _later(result))
        requests = {type(r).__name__: sorted(r.partition_keys) for r in result.dynamic_partitions_requests}
        assert requests == {"DeleteDynamicPartitionsRequest": ["fake-a", "typed-by-hand"]}
        assert _partitions(instance) == ["fake-b", "fake-c"]
        # fake-b stays, with its results, and the tick says why
        assert _tick(instance, result.cursor).skip_reason.skip_message == (
            "1 models, all registered; kept without a registry entry (results stored): fake-b")


def test_a_partition_key_not_in_the_registry_fails_naming_it_and_is_then_removed(registry):
    with dg.instance_for_test() as instance:
        _tick(instance)
        _term_inputs(instance)
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, ["fake-typo"])  # "Add a partition" in the UI
        job = defs.resolve_job_def("term_model_lang")
        result = job.execute_in_process(partition_key=dg.MultiPartitionKey({"model": "fake-typo", "lang": "zh_hans"}),
                                        instance=instance, resources=shared_resources(), raise_on_error=False)
        assert not result.success
        failure = next(event for event in result.all_events if event.is_step_failure)
        message = str(failure.step_failure_data.error.to_string())
        assert "no model 'fake-typo'" in message and str(registry) in message
        waiting = _tick(instance)
        assert "removed after 300 s without results: fake-typo" in waiting.skip_reason.skip_message
        _tick(instance, _later(waiting))
        assert _partitions(instance) == ["fake-a", "fake-b"]


def test_the_sensor_refuses_to_remove_partitions_without_its_definitions(registry):
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, ["fake-a", "fake-b", "left-the-registry"])
        context = dg.build_sensor_context(instance=instance, resources={"models": ModelRegistryResource()})
        with pytest.raises(dg.DagsterInvariantViolationError, match="definitions=defs"):
            model_registry_sensor(context)
        assert _tick(instance).skip_reason.skip_message.startswith("2 models, all registered")
