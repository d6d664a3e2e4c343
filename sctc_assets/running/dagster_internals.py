"""Every private Dagster name the project uses, in one place.

The project pins `dagster>=1.13,<1.14` because it reaches past Dagster's public API: it subclasses the SQLite event
log and run storages, builds its instance from Dagster's config and instance ref, asks the stale-status resolver
which inputs are unchanged, rebuilds prefixed asset checks and config defaults for the audit Component
(`components/`), reads the metadata Dagster attaches to log records, names Dagster's storage classes in
instance config, and runs `execute_in_process`'s own steps (`execute_in_process_reusing`, below). None of these is
promised to stay put between minor versions; with all of them imported here, moving past the pin means checking and
changing this one file (`sctc_assets_tests/test_import_structure.py` fails if another module imports `dagster._…`).

The SQLite storage names load lazily: their modules import SQLAlchemy (about half a second), which only a process
whose instance keeps SQLite storage needs, while the rest of this module is already loaded by `import dagster`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, MutableMapping, Sequence

from dagster._config import Shape
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.asset_checks.asset_checks_definition import AssetChecksDefinition
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.definitions.events import AssetKeyPartitionKey
from dagster._core.definitions.job_base import InMemoryJob
from dagster._core.definitions.job_definition import default_job_io_manager
from dagster._core.definitions.observe import observe
from dagster._core.definitions.partitions.context import partition_loading_context
from dagster._core.event_api import PartitionKeyFilter
from dagster._core.events import DagsterEventType
from dagster._core.execution.execute_in_process import (core_execute_in_process, merge_run_tags,
                                                          type_check_and_normalize_args)
from dagster._core.instance.config import dagster_instance_config
from dagster._core.instance.ref import InstanceRef
from dagster._core.log_manager import LOG_RECORD_METADATA_ATTR
from dagster._time import get_current_datetime

if TYPE_CHECKING:
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
    from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
    from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS

# Instance config names Dagster's classes by module and class; these are its defaults for a SQLite instance.
NOOP_COMPUTE_LOG_MANAGER = {"module": "dagster._core.storage.noop_compute_log_manager",
                            "class": "NoOpComputeLogManager"}
SQLITE_SCHEDULE_STORAGE = {"module": "dagster._core.storage.schedules", "class": "SqliteScheduleStorage"}

_LAZY = {"INDEX_SHARD_NAME": "dagster._core.storage.event_log.sqlite.sqlite_event_log",
         "SqliteEventLogStorage": "dagster._core.storage.event_log.sqlite.sqlite_event_log",
         "SQLITE_BUSY_TIMEOUT_SECONDS": "dagster._core.storage.sqlite",
         "SqliteRunStorage": "dagster._core.storage.runs.sqlite.sqlite_run_storage"}

__all__ = ["AssetChecksDefinition", "AssetGraphView", "AssetKeyPartitionKey", "CachingStaleStatusResolver", "DagsterEventType",
           "INDEX_SHARD_NAME", "InstanceRef", "LOG_RECORD_METADATA_ATTR", "NOOP_COMPUTE_LOG_MANAGER",
           "PartitionKeyFilter", "SQLITE_BUSY_TIMEOUT_SECONDS", "SQLITE_SCHEDULE_STORAGE",
           "Shape", "SqliteEventLogStorage", "SqliteRunStorage", "StaleStatus", "TemporalContext", "dagster_instance_config",
           "default_job_io_manager", "execute_in_process_reusing", "get_current_datetime", "observe"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def execute_in_process_reusing(job: Any, ephemeral_jobs: MutableMapping[Any, Any], *, asset_selection: Sequence[Any],
                               resources: dict, run_config: dict, instance: Any, partition_key: Any,
                               tags: dict) -> Any:
    """`job.execute_in_process(...)` as Dagster 1.13 runs it (`JobDefinition.execute_in_process`), except that the
    ephemeral job it builds for an asset selection is kept in `ephemeral_jobs` and used again by the next run of
    the same job and selection (the caller passes the same resource objects every time). Dagster builds a new one
    per run, and with it the job snapshot and its id (an eighth of a small run's cost)."""
    run_config, _, asset_selection, resource_defs, partition_key, input_values = type_check_and_normalize_args(
        run_config=run_config, partition_key=partition_key, asset_selection=asset_selection, resources=resources)
    key = (id(job), frozenset(asset_selection), tuple(sorted(resource_defs)))
    kept = ephemeral_jobs.get(key)
    if kept is None:  # the job is kept with it: while it lives, no other object takes its id in the key
        kept = ephemeral_jobs[key] = (job, job.as_ephemeral_job(resource_defs=resource_defs, input_values=input_values,
                                                                 asset_selection=asset_selection))
    ephemeral_job = kept[1]
    if partition_key and ephemeral_job.partitions_def:
        with partition_loading_context(dynamic_partitions_store=instance) as context:
            ephemeral_job.validate_partition_key(partition_key=partition_key,
                                                 selected_asset_keys=set(asset_selection), context=context)
    if not run_config and ephemeral_job.partitioned_config and partition_key:
        run_config = ephemeral_job.partitioned_config.get_run_config_for_partition_key(partition_key)
    return core_execute_in_process(
        job=InMemoryJob(job_def=ephemeral_job), run_config=run_config, instance=instance,
        output_capturing_enabled=True, raise_on_error=False,
        run_tags=merge_run_tags(job_def=job, partition_key=partition_key, tags=tags, asset_selection=asset_selection,
                                instance=instance, run_config=run_config),
        run_id=None, asset_selection=frozenset(asset_selection))
