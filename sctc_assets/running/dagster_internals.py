"""Every private Dagster name the project uses, in one place.

The project pins `dagster>=1.13,<1.14` because it reaches past Dagster's public API: it subclasses the SQLite event
log storage, builds its instance from Dagster's config and instance ref, asks the stale-status resolver which
inputs are unchanged, reads the metadata Dagster attaches to log records, and names Dagster's storage classes in
instance config. None of these is promised to stay put between minor versions; with all of them imported here,
moving past the pin means checking and changing this one file (`sctc_assets_tests/test_import_structure.py` fails
if another module imports `dagster._…`).

The SQLite storage names load lazily: their modules import SQLAlchemy (about half a second), which only a process
whose instance keeps SQLite storage needs, while the rest of this module is already loaded by `import dagster`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.definitions.events import AssetKeyPartitionKey
from dagster._core.definitions.job_definition import default_job_io_manager
from dagster._core.definitions.observe import observe
from dagster._core.event_api import PartitionKeyFilter
from dagster._core.events import DagsterEventType
from dagster._core.instance.config import dagster_instance_config
from dagster._core.instance.ref import InstanceRef
from dagster._core.log_manager import LOG_RECORD_METADATA_ATTR
from dagster._time import get_current_datetime

if TYPE_CHECKING:
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
    from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS

# Instance config names Dagster's classes by module and class; these are its defaults for a SQLite instance.
NOOP_COMPUTE_LOG_MANAGER = {"module": "dagster._core.storage.noop_compute_log_manager",
                            "class": "NoOpComputeLogManager"}
SQLITE_RUN_STORAGE = {"module": "dagster._core.storage.runs", "class": "SqliteRunStorage"}
SQLITE_SCHEDULE_STORAGE = {"module": "dagster._core.storage.schedules", "class": "SqliteScheduleStorage"}

_LAZY = {"INDEX_SHARD_NAME": "dagster._core.storage.event_log.sqlite.sqlite_event_log",
         "SqliteEventLogStorage": "dagster._core.storage.event_log.sqlite.sqlite_event_log",
         "SQLITE_BUSY_TIMEOUT_SECONDS": "dagster._core.storage.sqlite"}

__all__ = ["AssetGraphView", "AssetKeyPartitionKey", "CachingStaleStatusResolver", "DagsterEventType",
           "INDEX_SHARD_NAME", "InstanceRef", "LOG_RECORD_METADATA_ATTR", "NOOP_COMPUTE_LOG_MANAGER",
           "PartitionKeyFilter", "SQLITE_BUSY_TIMEOUT_SECONDS", "SQLITE_RUN_STORAGE", "SQLITE_SCHEDULE_STORAGE",
           "SqliteEventLogStorage", "StaleStatus", "TemporalContext", "dagster_instance_config",
           "default_job_io_manager", "get_current_datetime", "observe"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
