"""Parquet storage for every table asset: one file per asset partition.

Layout: `<base_dir>/<asset>/<dim>=<value>/…/<dim>=<value>.parquet` (model first), or `<base_dir>/<asset>.parquet`
for unpartitioned assets. A downstream asset that reads many partitions gets them concatenated; partitions that
were never materialized (a registered model nobody ran yet, a corpus shard not counted) are skipped with a warning,
also when only one partition exists. Missing input is an error for an unpartitioned upstream asset and for a
partitioned run that reads exactly its one upstream partition, except that an unpartitioned input declared with
`AssetIn(metadata={OPTIONAL_INPUT: True})` that was never materialized loads as an empty table. A run over a range of
partitions (a single-run backfill, `assets/partition_ranges.py`) hands one table per partition key, stored apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.lib.paths import default_storage_dir

_DIMENSION_ORDER = {"model": 0}
OPTIONAL_INPUT = "sctc/optional"


def partition_path_parts(partitions_def: dg.PartitionsDefinition | None, partition_key: str) -> list[str]:
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        multi_key = partitions_def.get_partition_key_from_str(partition_key)
        dimensions = sorted(multi_key.keys_by_dimension.items(), key=lambda item: (_DIMENSION_ORDER.get(item[0], 1), item[0]))
        return [f"{name}={value}" for name, value in dimensions]
    return [f"partition={partition_key}"]


class ParquetIOManager(dg.ConfigurableIOManager):
    base_dir: Optional[str] = Field(default=None, description="Root folder; default data/storage.")

    def _root(self) -> Path:
        return Path(self.base_dir) if self.base_dir else default_storage_dir()

    def path_for(self, asset_key: dg.AssetKey, partitions_def: dg.PartitionsDefinition | None = None,
                 partition_key: str | None = None) -> Path:
        base = self._root().joinpath(*asset_key.path)
        if partition_key is None:
            return base.with_suffix(".parquet")
        parts = partition_path_parts(partitions_def, partition_key)
        return base.joinpath(*parts[:-1], parts[-1] + ".parquet")

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame | Mapping[str, pd.DataFrame] | None) -> None:
        if obj is None:
            return
        if isinstance(obj, Mapping) and context.has_asset_partitions:
            self._store_partitions(context, obj)
            return
        if not isinstance(obj, pd.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()}: ParquetIOManager stores DataFrames, got {type(obj).__name__}")
        partition_key = context.asset_partition_key if context.has_asset_partitions else None
        path = self.path_for(context.asset_key, context.asset_partitions_def if partition_key else None, partition_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_suffix(".parquet.tmp")
        obj.to_parquet(staging, index=False)
        staging.replace(path)  # readers never see a half-written file
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path))})

    def _store_partitions(self, context: dg.OutputContext, tables: Mapping[str, pd.DataFrame]) -> None:
        """A run over a range of partitions (`assets/partition_ranges.py`) hands one table per partition key."""
        expected = {str(key) for key in context.asset_partition_keys}
        if set(tables) != expected:
            raise ValueError(f"{context.asset_key.to_user_string()}: the run covers partitions {sorted(expected)}, "
                             f"the output holds {sorted(tables)}")
        for key, frame in tables.items():
            path = self.path_for(context.asset_key, context.asset_partitions_def, key)
            path.parent.mkdir(parents=True, exist_ok=True)
            staging = path.with_suffix(".parquet.tmp")
            frame.to_parquet(staging, index=False)
            staging.replace(path)
        folder = self._root().joinpath(*context.asset_key.path)
        context.add_output_metadata({"path": dg.MetadataValue.path(str(folder))})

    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        asset_key = context.asset_key
        if not context.has_asset_partitions:
            path = self.path_for(asset_key)
            if not path.exists():
                if (context.definition_metadata or {}).get(OPTIONAL_INPUT):
                    context.log.info(f"{asset_key.to_user_string()} has not been materialized: optional, empty")
                    return pd.DataFrame()
                raise FileNotFoundError(f"{asset_key.to_user_string()} has not been materialized yet ({path})")
            return pd.read_parquet(path)
        partitions_def = context.asset_partitions_def
        keys = list(context.asset_partition_keys)
        paths = {key: self.path_for(asset_key, partitions_def, key) for key in keys}
        present = {key: path for key, path in paths.items() if path.exists()}
        missing = sorted(set(paths) - set(present))
        # A partition computed from its own upstream partition cannot do without it; a table read across the
        # partitions (an unpartitioned run) skips missing ones however many there are, one included.
        if context.has_partition_key and len(keys) == 1 and missing:
            raise FileNotFoundError(
                f"{asset_key.to_user_string()} partition {keys[0]} has not been materialized yet ({paths[keys[0]]})")
        if missing:
            context.log.warning(
                f"{asset_key.to_user_string()}: skipping {len(missing)} partition(s) never materialized: "
                + ", ".join(missing[:20]) + (" …" if len(missing) > 20 else ""))
        frames = [pd.read_parquet(path) for path in present.values()]
        frames = [frame for frame in frames if not frame.empty]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
