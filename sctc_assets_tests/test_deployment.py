"""The deployment files agree with each other and with the project: the Helm values (sctc_assets/deploy/k8s/)
configure PostgreSQL, the table store, the secrets, the run coordinator and the pools; the user-code image
(sctc_assets/deploy/docker/Dockerfile) pins torch as CI does and serves the code location the values name; and,
where the Dagster chart's values schema is at hand, the values pass it."""

import copy
import os
import re
from pathlib import Path

import pytest
import yaml

from sctc_assets.lib.table_store import is_url, missing_filesystem

REPO = Path(__file__).resolve().parents[1]
VALUES = REPO / "sctc_assets" / "deploy" / "k8s" / "values.yaml"
DOCKERFILE = REPO / "sctc_assets" / "deploy" / "docker" / "Dockerfile"
# The chart's values.schema.json (`helm pull dagster/dagster --untar` → dagster/values.schema.json). Not on PyPI and
# not copied here (it is the chart's), so without it the schema test is skipped, saying so.
SCHEMA_ENV = "SCTC_DAGSTER_HELM_SCHEMA"


def _values() -> dict:
    return yaml.safe_load(VALUES.read_text(encoding="utf-8"))


def _deployment(values: dict) -> dict:
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    return deployment


def _env(deployment: dict) -> dict[str, str]:
    return {entry["name"]: entry["value"] for entry in deployment["env"]}


def _torch_pin(text: str) -> str:
    pins = set(re.findall(r"torch==([0-9][0-9A-Za-z.+]*)", text))
    assert len(pins) == 1, pins
    return pins.pop()


def test_the_image_pins_the_torch_of_ci():
    assert _torch_pin(DOCKERFILE.read_text()) == _torch_pin((REPO / ".ci" / "run").read_text())


def test_the_image_serves_the_code_location_the_values_and_pyproject_name():
    pyproject = (REPO / "pyproject.toml").read_text()  # tomllib is Python 3.11+, the project supports 3.10
    module = re.search(r'^\[tool\.dagster\]\nmodule_name = "([^"]+)"', pyproject, re.M).group(1)
    docker = DOCKERFILE.read_text()
    assert 'ENTRYPOINT ["dagster", "api", "grpc"]' in docker and f'"--module-name", "{module}"' in docker
    assert _deployment(_values())["dagsterApiGrpcArgs"] == ["--module-name", module]
    extra = re.search(r'pip install -e "\.\[(\w+)\]"', docker).group(1)
    wanted = re.findall(r'"([^"]+)"', re.search(rf"^{extra} = \[(.*?)^\]", pyproject, re.M | re.S).group(1))
    assert any(spec.startswith("dagster-postgres") for spec in wanted)  # the instance's storage in the run pods
    assert any(spec.startswith("dagster-k8s") for spec in wanted)  # the launcher the run pods report to
    assert "sctc-assets[postgres]" in wanted  # psycopg: the response cache in PostgreSQL


def test_the_values_put_shared_state_in_postgresql_and_the_table_store_never_on_a_shared_writable_volume():
    values = _values()
    postgres = values["postgresql"]
    if postgres["enabled"]:  # the chart's own server
        assert values["generatePostgresqlPasswordSecret"] is True
    else:  # an external one: host set, password only in the secret
        assert postgres["postgresqlHost"] and values["generatePostgresqlPasswordSecret"] is False
        assert values["global"]["postgresqlSecretName"] and postgres["postgresqlPassword"] == ""
    deployment = _deployment(values)
    env = _env(deployment)
    store = env["SCTC_TABLE_STORE"]
    assert is_url(store) and "@" not in store  # credentials come from a secret, not the URL
    assert missing_filesystem(store) in (None, "the s3:// filesystem needs the package s3fs (pip install s3fs)")
    assert "SCTC_DATABASE_URL" not in env  # a secret, never a value in this file
    secrets = [entry["name"] for entry in deployment["envSecrets"]]
    assert "sctc-database" in secrets
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    assert values["runLauncher"]["type"] == "K8sRunLauncher" and deployment["includeConfigInLaunchedRuns"]["enabled"]
    assert f"SCTC_TABLE_STORE={store}" in launcher["envVars"]
    assert {"sctc-database"} <= {entry["name"] for entry in launcher["envSecrets"]}
    # Whatever is mounted in several pods is read-only: no SQLite or Parquet file shared over NFS.
    mounts = {mount["name"]: mount for mount in deployment["volumeMounts"]}
    for volume in deployment["volumes"]:
        if "persistentVolumeClaim" in volume:
            assert volume["persistentVolumeClaim"].get("readOnly") and mounts[volume["name"]].get("readOnly")
    assert env["SCTC_DATA_DIR"] in {mount["mountPath"] for volume in deployment["volumes"] if "emptyDir" in volume
                                    for mount in [mounts[volume["name"]]]}
    coordinator = values["dagsterDaemon"]["runCoordinator"]
    assert coordinator["enabled"] and coordinator["type"] == "QueuedRunCoordinator"
    assert coordinator["config"]["queuedRunCoordinator"]["maxConcurrentRuns"] > 0
    pools = values["additionalInstanceConfig"]["concurrency"]
    assert set(pools) == {"pools"}  # `concurrency.runs` would clash with the run coordinator the chart configures
    assert pools["pools"]["default_limit"] > 0


def _overrides_schema(node):
    """The chart's schema for a file of overrides: the chart's own values.yaml supplies every required key, so
    `required` lists go; `$ref`s to kubernetesjsonschema.dev (unreachable offline) go, keeping the constraints
    written beside them (an array of tolerations, string annotations)."""
    if isinstance(node, dict):
        return {key: _overrides_schema(value) for key, value in node.items()
                if not (key == "required" and isinstance(value, list))
                and not (key == "$ref" and isinstance(value, str) and value.startswith("http"))}
    if isinstance(node, list):
        return [_overrides_schema(value) for value in node]
    return node


def test_the_values_pass_the_dagster_chart_s_values_schema():
    configured = os.environ.get(SCHEMA_ENV)
    if not configured:
        pytest.skip(f"${SCHEMA_ENV} is not set: the Dagster chart's values.schema.json is not available offline "
                    "(helm pull dagster/dagster --untar gives dagster/values.schema.json)")
    import json

    import jsonschema

    schema = _overrides_schema(json.loads(Path(configured).read_text(encoding="utf-8")))
    validator = jsonschema.Draft7Validator(schema)
    values = _values()
    errors = [f"{'.'.join(map(str, error.absolute_path))}: {error.message}" for error in validator.iter_errors(values)]
    assert errors == []
    # The check has teeth: a secret named as a string, a misspelt key, a wrong type are each refused.
    for path, bad in ((("runLauncher", "config", "k8sRunLauncher", "envSecrets"), "sctc-database"),
                      (("dagsterDaemon", "runCoordinator", "config", "queuedRunCoordinator", "maxConcurentRuns"), 8),
                      (("postgresql", "service", "port"), "5432")):
        broken = copy.deepcopy(values)
        node = broken
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = bad
        assert list(validator.iter_errors(broken)), path
