"""The response assets' fast path for the backends whose traits say they replay the benchmark
(`BackendTraits.replays_benchmark`): published answers as columns, no object per request."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd

from sctc_assets.assets.metadata import usage_metadata
from sctc_assets.backends.replay import ReplayBackend, replay_cache_dir
from sctc_assets.lib.generation import result_columns


def replayed_columns(backend: ReplayBackend, refs: pd.DataFrame, log: Callable[[str], None],
                     what: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The result columns (as `result_columns` gives them) of the published answers at `refs`, one row per ref,
    and the usage metadata of those answers."""
    codes, results = backend.replay(refs)
    distinct = pd.DataFrame(result_columns(results))
    columns = distinct.take(codes).reset_index(drop=True) if len(codes) else distinct.iloc[:0]
    counts = np.bincount(codes, minlength=len(results)) if len(codes) else np.zeros(len(results), dtype=np.int64)
    log(f"{what}: {len(codes)} published answers ({len(results)} distinct results) read from the upstream files, "
        f"parsed once into {replay_cache_dir()}")
    return columns, usage_metadata(results, backend.pricing(), repeats=counts.tolist())

