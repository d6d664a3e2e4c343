"""Every asset of the code location carries its catalog entry: code version, owners, tags, a description whose
first line is a sentence, a column schema with a description per column, and the stage's automation condition."""

from __future__ import annotations

import dagster as dg
import pytest

from sctc_assets.assets import catalog
from sctc_assets.assets.automation import (AUTOMATION_SENSOR_NAME, SERVED_MODEL_CHANGED, SERVED_MODEL_KEY,
                                           automation_sensor)
from sctc_assets.benchmarks import SPECS
from sctc_assets.definitions import defs
from sctc_assets.assets.partitions import CORPUS_SHARDS_PARTITION_NAME, MODELS_PARTITION_NAME

GRAPH = defs.resolve_asset_graph()
# The materializable assets; the one source asset (observed, never materialized) is the served models'.
ASSET_NAMES = sorted(key.to_user_string() for key in GRAPH.get_all_asset_keys() if GRAPH.get(key).is_materializable)


def test_every_asset_has_a_catalog_entry_and_every_entry_an_asset():
    assert sorted(catalog.CATALOG) == ASSET_NAMES
    assert {key.to_user_string() for key in GRAPH.get_all_asset_keys()} - set(ASSET_NAMES) == {"served_model"}


@pytest.mark.parametrize("name", ASSET_NAMES)
def test_each_asset_carries_its_entry(name):
    node = GRAPH.get(dg.AssetKey(name))
    entry = catalog.CATALOG[name]
    assert node.code_version == entry.code_version
    assert list(node.owners) == list(catalog.OWNERS)
    assert {key: node.tags.get(key) for key in catalog.asset_tags(entry)} == catalog.asset_tags(entry)
    assert node.tags["sctc/calls_models"] == ("true" if entry.calls else "false")
    first_line = node.description.split("\n")[0]
    assert first_line == entry.headline
    assert first_line[0].isupper() and first_line.endswith(".") and len(first_line) <= 110, first_line
    if entry.table:
        schema = node.metadata["dagster/column_schema"]
        assert schema.columns and all(column.description for column in schema.columns)


@pytest.mark.parametrize("name", ASSET_NAMES)
def test_partitioning_and_automation_follow_the_stage(name):
    node = GRAPH.get(dg.AssetKey(name))
    entry = catalog.CATALOG[name]
    partitions = node.partitions_def
    expected = {
        catalog.INPUTS: lambda: partitions is None or getattr(partitions, "name", None) == CORPUS_SHARDS_PARTITION_NAME,
        catalog.MODEL_LANG: lambda: isinstance(partitions, dg.MultiPartitionsDefinition),
        catalog.PER_MODEL: lambda: getattr(partitions, "name", None) == MODELS_PARTITION_NAME,
        catalog.CROSS_MODEL: lambda: partitions is None,
    }[entry.stage]
    assert expected(), f"{name}: stage {entry.stage} but partitions {partitions}"
    automated = node.automation_condition is not None
    # Model answers only when the served model changes (an entry with `observe:`), never model-independent inputs.
    answers = entry.calls == catalog.GENERATION and entry.stage == catalog.MODEL_LANG
    assert automated == (entry.stage != catalog.INPUTS and (entry.calls != catalog.GENERATION or answers))
    if entry.calls == catalog.GENERATION:
        assert (node.automation_condition == SERVED_MODEL_CHANGED) == answers
        assert (SERVED_MODEL_KEY in node.parent_keys) == answers


def test_each_stage_job_selects_its_specs_assets():
    """The named jobs are derived from the stages the catalog entries state; none is written by hand."""
    jobs = {job.name: job for job in defs.jobs}
    for spec in SPECS.values():
        for stage, (job_name, selection) in spec.job_selections().items():
            resolved = defs.resolve_job_def(job_name)
            assert {key.to_user_string() for key in resolved.asset_layer.selected_asset_keys} == set(selection), job_name
            assert job_name in jobs
    assert len(jobs) == sum(len(spec.job_selections()) for spec in SPECS.values())


def test_an_asset_without_an_entry_fails_naming_the_catalog():
    @dg.asset
    def not_catalogued_yet() -> None:
        return None

    with pytest.raises(catalog.CatalogError, match="not_catalogued_yet.*sctc_assets/benchmarks/<benchmark>.py"):
        catalog.catalogued(not_catalogued_yet)


def test_a_table_without_a_schema_fails_naming_the_schemas(monkeypatch):
    @dg.asset(name="term_labels")
    def schemaless() -> None:
        return None

    # a copy without the entry: deleting from the shared dict would reorder it for the other tests
    monkeypatch.setattr(catalog, "TABLE_SCHEMAS",
                        {name: spec for name, spec in catalog.TABLE_SCHEMAS.items() if name != "term_labels"})
    with pytest.raises(catalog.CatalogError, match="'term_labels' is a table without a column schema.*lib/schemas"):
        catalog.catalogued(schemaless)


def test_every_sensor_has_a_description_and_automation_is_off_by_default(monkeypatch):
    sensors = {sensor.name: sensor for sensor in defs.sensors}
    assert {"model_registry_sensor", "corpus_registry_sensor", AUTOMATION_SENSOR_NAME} <= set(sensors)
    assert all(sensor.description for sensor in sensors.values())
    monkeypatch.delenv("SCTC_AUTOMATION", raising=False)
    assert automation_sensor().default_status == dg.DefaultSensorStatus.STOPPED
    monkeypatch.setenv("SCTC_AUTOMATION", "1")
    assert automation_sensor().default_status == dg.DefaultSensorStatus.RUNNING


def test_the_code_location_loads_as_the_ui_loads_it():
    """`dagster dev -m sctc_assets.definitions` (and workspace.yaml) find exactly one Definitions object."""
    from dagster._core.workspace.autodiscovery import loadable_targets_from_python_module

    targets = loadable_targets_from_python_module("sctc_assets.definitions", working_directory=None)
    assert [target.attribute for target in targets] == ["defs"]
