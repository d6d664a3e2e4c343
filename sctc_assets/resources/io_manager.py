"""Parquet storage for every table asset: one file per asset partition.

Layout: `<store>/<asset>/<dim>=<value>/…/<dim>=<value>.parquet` (model first), or `<store>/<asset>.parquet` for
unpartitioned assets. The store is `base_dir`, else `$SCTC_TABLE_STORE`, else `<data folder>/storage`: a folder
(local or a shared mount) or any fsspec URL (`s3://bucket/tables`, `gs://…`, `memory://…`), written whole or not at
all either way (`lib/table_store.py`). A downstream asset that reads many partitions gets them concatenated;
partitions that were never materialized (a corpus shard not counted, a model's language that failed) are skipped
with a warning, also when only one partition exists; a model with no partition at all (a registry entry that cannot
serve this benchmark, such as another benchmark's published answers, or one nobody ran yet) is skipped silently and
named once, in the downstream table's metadata (`models_without_results`). Missing input is an error for an
unpartitioned upstream asset and for a partitioned run that reads exactly its one upstream partition, except that an
unpartitioned input declared with `AssetIn(metadata={OPTIONAL_INPUT: True})` that was never materialized loads as an
empty table. A table of no rows keeps its columns, so a reader across partitions of which all are empty still finds
the columns it needs. A partitioned run writes its one partition (no asset backfills a range in one run, which
would give every partition of the range one data version). A step reads a table its own run wrote as that run wrote
it, even if another run has replaced the file since (two runs of one partition at once), where the run's steps
share a process: the answer checks describe their own run's materialization.

Text, whatever the pandas version: every text column (and every column a partition never filled, which has no
type on disk) reads back as pandas' `string` dtype with `pd.NA` for "no text" (a refusal or error without an
answer, a replay gap); "" stays an empty answer. Readers take answer text through
`sctc_assets.lib.generation.stored_text`. A column that Parquet cannot hold (text mixed with numbers, say) is an
error naming the asset, partition, column and first bad row, before anything is written.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Optional

import dagster as dg
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field, PrivateAttr

from sctc_assets.lib.table_store import (StorePath, arrow_source, change_marker, is_local, location, shown,
                                         table_store, writing)
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.run_tags import tag_run

_DIMENSION_ORDER = {"model": 0}
# (run id, step key) → models a cross-partition read found no partition of, for that step's output metadata
_without_results: dict[tuple[str, str], set[str]] = {}
OPTIONAL_INPUT = "sctc/optional"
_TEXT = pd.StringDtype()
# Arrow types read back as `string`: text, and a column with no value at all (Arrow's null type).
_TEXT_TYPES = {pa.string(): _TEXT, pa.large_string(): _TEXT, pa.null(): _TEXT}


def read_table(path: str | StorePath) -> pd.DataFrame:
    """One stored table as pandas, text columns as `string` with `pd.NA` (the storage rule above).

    Each column is one contiguous array, not one chunk per 131,072 rows: a later take of its rows costs about a
    tenth of one from a chunked Arrow column (`name_prompts`, read by every name partition, has two chunks). The
    copy costs little below a million rows (measured ~+25 % read time on 1.46M rows of answers)."""
    path = location(path)
    if is_local(path):
        table = pq.read_table(path)
    else:
        where, filesystem = arrow_source(path)
        table = pq.read_table(where, filesystem=filesystem)
    return _as_pandas(table)


def _as_pandas(table: pa.Table) -> pd.DataFrame:
    try:
        table = table.combine_chunks()
    except pa.ArrowException:  # a column too large for one array (over 2 GiB of `string`): left chunked
        pass
    return table.to_pandas(types_mapper=_TEXT_TYPES.get)


# The tables one Dagster run has read, by file (path, inode, size, time): the assets of a stage read the same
# partitions several times (six per-model name tables read each language's selections). Kept only where pandas
# copies on write (pandas 3), so an asset that changes its input cannot change another's; cleared after each run,
# except the model-independent tables (`lasting`), which every model's runs read again (33 name runs each read the
# 157,080 prompts) and which a run of model partitions does not write: those go when a run could have written one.
_READ_MEMO: "OrderedDict[tuple, tuple[pd.DataFrame, int, bool]]" = OrderedDict()
_READ_MEMO_BYTES = 256 * 1024 * 1024
_READ_MEMO_LOCK = threading.Lock()  # the stages of API models run on threads of one process
_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3


def _read_stored(path: StorePath, *, lasting: bool = False) -> pd.DataFrame:
    """`read_table(path)`, from the memo when the file is unchanged since it was read (`lasting`: the table of an
    unpartitioned asset, kept by `forget_reads(keep_lasting=True)`)."""
    if not _COPY_ON_WRITE:
        return read_table(path)
    key = change_marker(path)
    if key is None:
        return read_table(path)
    with _READ_MEMO_LOCK:
        if key in _READ_MEMO:
            _READ_MEMO.move_to_end(key)
            return _READ_MEMO[key][0].copy(deep=False)
    frame = read_table(path)
    size = int(frame.memory_usage(index=False).sum())
    if size <= _READ_MEMO_BYTES // 2:
        with _READ_MEMO_LOCK:
            _READ_MEMO[key] = (frame, size, lasting)
            while sum(kept for _, kept, _ in _READ_MEMO.values()) > _READ_MEMO_BYTES:
                _READ_MEMO.popitem(last=False)
    return frame.copy(deep=False)


def forget_reads(*, keep_lasting: bool = False) -> None:
    """Drop the memo of `_read_stored` (at the end of a Dagster run: the next one may read other files);
    `keep_lasting` keeps the unpartitioned tables, after a run that wrote none."""
    with _READ_MEMO_LOCK:
        for key in [key for key, (_, _, lasting) in _READ_MEMO.items() if not (keep_lasting and lasting)]:
            del _READ_MEMO[key]


def _unstorable(frame: pd.DataFrame) -> str | None:
    """The first column Parquet cannot hold, with the first row whose kind of value differs from the first row's."""
    for column in frame.columns:
        try:
            pa.array(frame[column], from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            kinds = [type(value).__name__ for value in frame[column]]
            row = next((index for index, kind in enumerate(kinds) if kind != kinds[0]), 0)
            return (f"column {column!r} mixes {', '.join(sorted(set(kinds)))} values (row {row}: "
                    f"{frame[column].iloc[row]!r}): {exc}")
    return None


def _unfilled(column: pd.Series) -> bool:
    return column.dtype == _TEXT and bool(column.isna().all())


def _missing(dtype: object, index: pd.Index) -> pd.Series:
    """A column of missing values of `dtype`, or of its nullable form where `dtype` has no missing value."""
    kind = getattr(dtype, "kind", "O")
    if kind == "f":
        return pd.Series(float("nan"), index=index, dtype=dtype)
    nullable = {"i": "Int64", "u": "Int64", "b": "boolean"}.get(kind) if isinstance(dtype, np.dtype) else None
    try:
        return pd.Series(pd.NA, index=index, dtype=object).astype(nullable or dtype)
    except (TypeError, ValueError):
        return pd.Series(pd.NA, index=index, dtype=object)


def concat_tables(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Partitions as one table; empty partitions are left out unless all are empty (then their columns stay).

    A column that one partition never filled (read back as text of nothing but `pd.NA`) takes the type the
    other partitions give it, so a replay's empty `latency_s` does not turn a live model's floats into objects."""
    kept = [frame for frame in frames if not frame.empty] or frames[:1]
    if not kept:
        return pd.DataFrame()
    if len(kept) == 1:
        return kept[0]
    typed: dict[str, object] = {}
    for frame in kept:
        for name in frame.columns:
            if name not in typed and not _unfilled(frame[name]):
                typed[name] = frame[name].dtype
    aligned = []
    for frame in kept:
        retype = {name: typed[name] for name in frame.columns
                  if name in typed and typed[name] != _TEXT and _unfilled(frame[name])}
        if retype:
            frame = frame.assign(**{name: _missing(dtype, frame.index) for name, dtype in retype.items()})
        aligned.append(frame)
    return pd.concat(aligned, ignore_index=True)


# The most Parquet bytes one run keeps of the tables it wrote (`ParquetIOManager._written`); past it, its later
# steps read what they need from the store like any other reader.
_WRITTEN_BYTES = 256 * 1024 * 1024


def _write(frame: pd.DataFrame, path: StorePath, where: str) -> bytes | None:
    """`frame` at `path`, whole or not at all: readers never see a half-written file. Returns the bytes written,
    or None past `_WRITTEN_BYTES`."""
    try:
        with writing(path) as target:
            frame.to_parquet(target, index=False)
            if isinstance(target, Path):
                return target.read_bytes() if target.stat().st_size <= _WRITTEN_BYTES else None
            return target.getvalue() if target.tell() <= _WRITTEN_BYTES else None
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise TypeError(f"{where}: cannot store the table: {_unstorable(frame) or exc}") from exc


def partition_path_parts(partitions_def: dg.PartitionsDefinition | None, partition_key: str) -> list[str]:
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        multi_key = partitions_def.get_partition_key_from_str(partition_key)
        dimensions = sorted(multi_key.keys_by_dimension.items(), key=lambda item: (_DIMENSION_ORDER.get(item[0], 1), item[0]))
        return [f"{name}={value}" for name, value in dimensions]
    return [f"partition={partition_key}"]


def _model_of(partitions_def: dg.PartitionsDefinition, partition_key: str) -> str | None:
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        dimensions = partitions_def.get_partition_key_from_str(partition_key).keys_by_dimension
        return dimensions.get("model")
    if isinstance(partitions_def, dg.DynamicPartitionsDefinition) and partitions_def.name == MODELS_PARTITION_NAME:
        return partition_key
    return None


class ParquetIOManager(dg.ConfigurableIOManager):
    """Dagster makes one of these per run: `_written` holds the Parquet bytes of every table the run wrote (up to
    `_WRITTEN_BYTES`), by path, so that its later steps (the answer checks of a partition, the assets downstream of
    it) read the table this run produced, even when another run on the same partition has since replaced the file.
    That holds where a run's steps share a process (`sctc run`, `execute_in_process`, the in-process executor);
    under a multiprocess executor each step has its own, and a step reads the store as before."""

    base_dir: Optional[str] = Field(default=None, description=(
        "Where the tables go: a folder or an fsspec URL (s3://bucket/tables, gs://…, file://…); default "
        "$SCTC_TABLE_STORE, else data/storage."))
    _written: dict = PrivateAttr(default_factory=dict)

    def _wrote(self, path: StorePath, data: bytes | None) -> None:
        self._written.pop(str(path), None)
        if data is not None and sum(map(len, self._written.values())) + len(data) <= _WRITTEN_BYTES:
            self._written[str(path)] = data

    def _read(self, path: StorePath, *, lasting: bool = False) -> pd.DataFrame:
        """The table at `path`: as this run wrote it, else as the store holds it."""
        data = self._written.get(str(path))
        if data is None:
            return _read_stored(path, lasting=lasting)
        return _as_pandas(pq.read_table(pa.BufferReader(data)))

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # Every asset run stores through here: a run `sctc run` did not start gets its `sctc/*` tags as it starts.
        tag_run(context)

    def _root(self) -> StorePath:
        return location(self.base_dir) if self.base_dir else table_store()

    def path_for(self, asset_key: dg.AssetKey, partitions_def: dg.PartitionsDefinition | None = None,
                 partition_key: str | None = None) -> StorePath:
        base = self._root().joinpath(*asset_key.path)
        if partition_key is None:
            return base.with_suffix(".parquet")
        parts = partition_path_parts(partitions_def, partition_key)
        return base.joinpath(*parts[:-1], parts[-1] + ".parquet")

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame | None) -> None:
        if obj is None:
            return
        if not isinstance(obj, pd.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()}: ParquetIOManager stores DataFrames, got {type(obj).__name__}")
        partition_key = context.asset_partition_key if context.has_asset_partitions else None
        path = self.path_for(context.asset_key, context.asset_partitions_def if partition_key else None, partition_key)
        self._wrote(path, _write(obj, path, context.asset_key.to_user_string()
                                 + (f" partition {partition_key}" if partition_key else "")))
        context.add_output_metadata({"path": dg.MetadataValue.path(shown(path))})
        try:
            step = (context.run_id, context.step_key)
        except dg.DagsterInvariantViolationError:  # an output built outside a step (a test's build_output_context)
            step = None
        without = _without_results.pop(step, None) if step else None
        if without:
            context.add_output_metadata({"models_without_results": dg.MetadataValue.json(sorted(without))})

    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        asset_key = context.asset_key
        if not context.has_asset_partitions:
            path = self.path_for(asset_key)
            if str(path) not in self._written and not path.exists():
                if (context.definition_metadata or {}).get(OPTIONAL_INPUT):
                    context.log.info(f"{asset_key.to_user_string()} has not been materialized: optional, empty")
                    return pd.DataFrame()
                raise FileNotFoundError(f"{asset_key.to_user_string()} has not been materialized yet ({shown(path)})")
            return self._read(path, lasting=True)
        partitions_def = context.asset_partitions_def
        keys = list(context.asset_partition_keys)
        paths = {key: self.path_for(asset_key, partitions_def, key) for key in keys}
        present = {key: path for key, path in paths.items() if str(path) in self._written or path.exists()}
        missing = sorted(set(paths) - set(present))
        # A partition computed from its own upstream partition cannot do without it; a table read across the
        # partitions (an unpartitioned run) skips missing ones however many there are, one included.
        if context.has_partition_key and len(keys) == 1 and missing:
            raise FileNotFoundError(
                f"{asset_key.to_user_string()} partition {keys[0]} has not been materialized yet ({shown(paths[keys[0]])})")
        if missing and not context.has_partition_key:
            missing = self._skip_models_without_results(context, partitions_def, keys, missing)
        if missing:
            context.log.warning(
                f"{asset_key.to_user_string()}: skipping {len(missing)} partition(s) never materialized: "
                + ", ".join(missing[:20]) + (" …" if len(missing) > 20 else ""))
        return concat_tables([self._read(path) for path in present.values()])

    def _skip_models_without_results(self, context: dg.InputContext, partitions_def: dg.PartitionsDefinition,
                                     keys: list[str], missing: list[str]) -> list[str]:
        """Drop from `missing` the models none of whose partitions exist; remember them for the output's metadata."""
        by_model: dict[str | None, list[str]] = {}
        for key in keys:
            by_model.setdefault(_model_of(partitions_def, key), []).append(key)
        absent = set(missing)
        without = {model for model, model_keys in by_model.items() if model is not None and absent.issuperset(model_keys)}
        if not without:
            return missing
        context.log.debug(f"{context.asset_key.to_user_string()}: no results of {', '.join(sorted(without))}")
        try:
            step = (context.step_context.run_id, context.step_context.step.key)
        except dg.DagsterInvariantViolationError:  # loaded outside a step (a test's build_input_context)
            step = None
        if step is not None:
            _without_results.setdefault(step, set()).update(without)
        return [key for key in missing if _model_of(partitions_def, key) not in without]
