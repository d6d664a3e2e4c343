"""The code location's definitions against a stored snapshot of them (`definitions_snapshot.json`): every asset with
its partitioning, code version, group, tags and upstream keys; every check; every job with the assets it selects;
the sensors; the resources. How the folders are loaded (or how the jobs are built) may change, what Dagster ends up
with may not, unless on purpose: then write the snapshot again and review its diff,

    PYTHONPATH=$PWD python -m sctc_assets_tests.test_definitions_snapshot > sctc_assets_tests/definitions_snapshot.json

The same command with PYTHONPATH at another checkout lists that checkout's definitions, to compare two versions.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

SNAPSHOT = Path(__file__).with_name("definitions_snapshot.json")


def _partitions(partitions_def: dg.PartitionsDefinition | None) -> str | None:
    if partitions_def is None:
        return None
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        dimensions = ", ".join(f"{dimension.name}: {_partitions(dimension.partitions_def)}"
                               for dimension in partitions_def.partitions_defs)
        return f"MultiPartitionsDefinition({dimensions})"
    name = getattr(partitions_def, "name", None)
    return f"{type(partitions_def).__name__}({name})" if name else type(partitions_def).__name__


def snapshot(defs: dg.Definitions) -> dict:
    graph = defs.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda key: key.to_user_string()):
        node = graph.get(key)
        assets[key.to_user_string()] = {
            "partitions": _partitions(node.partitions_def),
            "code_version": node.code_version,
            "group": node.group_name,
            "tags": dict(sorted(node.tags.items())),
            "deps": sorted(parent.to_user_string() for parent in node.parent_keys),
        }
    jobs = {}
    for job in sorted(defs.resolve_all_job_defs(), key=lambda job: job.name):
        if not job.name.startswith("__"):  # Dagster's implicit asset job
            jobs[job.name] = sorted(key.to_user_string() for key in job.asset_layer.selected_asset_keys)
    return {
        "assets": assets,
        "asset_checks": sorted(check_key.to_user_string() for check_key in graph.asset_check_keys),
        "jobs": jobs,
        "sensors": sorted({sensor.name for sensor in defs.sensors or []}),
        "resources": {key: type(resource).__name__ for key, resource in sorted((defs.resources or {}).items())},
    }


@pytest.fixture(scope="module")
def current() -> dict:
    from sctc_assets.definitions import defs

    return snapshot(defs)


@pytest.fixture(scope="module")
def stored() -> dict:
    return json.loads(SNAPSHOT.read_text(encoding="utf-8"))


@pytest.mark.parametrize("section", ["assets", "asset_checks", "jobs", "sensors", "resources"])
def test_the_definitions_match_the_snapshot(section, current, stored):
    if section == "assets":
        assert sorted(current["assets"]) == sorted(stored["assets"])
    assert current[section] == stored[section], f"regenerate {SNAPSHOT.name} if this change is meant (see above)"


def test_an_installed_wheel_loads_the_same_definitions(stored):
    """A wheel has no pyproject.toml beside the package: the folder is then named without `[tool.dg]`."""
    from sctc_assets.definitions import load_definitions

    assert snapshot(load_definitions(source_root=None)) == stored


def test_the_folder_keeps_its_warning_filters():
    """Dagster imports the folder's modules inside `warnings.catch_warnings()`; the filters they set at import must
    outlive the load (a fresh interpreter: in this one the modules may have been imported already)."""
    code = "import sctc_assets.definitions as d; d.defs.resolve_all_job_defs()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "varying BackfillPolicies" not in out.stderr


def test_each_object_is_listed_once():
    """Modules of the defs folder re-export each other's objects (a benchmark's `__init__` imports its assets),
    and code that walks `defs.assets` or `defs.asset_checks` should meet each one once."""
    from sctc_assets.definitions import defs

    for kind in ("assets", "asset_checks", "jobs", "sensors", "schedules"):
        objects = list(getattr(defs, kind) or [])
        assert len({id(obj) for obj in objects}) == len(objects), kind


if __name__ == "__main__":
    from sctc_assets.definitions import defs

    json.dump(snapshot(defs), sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")
