"""Replay: the published responses of the SC-TC-Bench paper's 11 LLMs, served through the backend interface.

Each request's `ref` says where its published answer lives (benchmark, lang, prompt variant, row). A file that
the upstream copy lacks gives results with outcome `missing` whose message names the file, so the assets can
skip that part with a clear note instead of failing.

Published answers are parsed once: the answer column of each upstream CSV is kept as a one-column Parquet file
under `data/cache/replay/`, named by the SHA-256 of the CSV's content, so a changed upstream file is parsed again
and an unchanged one never is. Replays do not go through the response cache (a cached copy of a published answer
would only duplicate the file). `generate()` serves requests one by one as every backend does; `replay()` answers
a whole frame of locations at once, without a Python object per request, for the response assets.
"""

from __future__ import annotations

import hashlib
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Optional, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from sctc_assets.backends.base import ModelBackend, ResultCallback
from sctc_assets.lib.atomic_files import replacing
from sctc_assets.lib.generation import GenerationRequest, GenerationResult, stored_text
from sctc_assets.lib.paths import data_dir
from sctc_assets.lib.sctc_upstream import name_response_file, term_response_file

_lock = threading.Lock()
_CACHE_FORMAT = 1  # bump when the cached column's meaning changes


def replay_cache_dir() -> Path:
    """Where parsed published answers are kept (a cache: safe to delete)."""
    return data_dir() / "cache" / "replay"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _parse_column(path: Path, column: str) -> pa.Array:
    frame = pd.read_csv(path)
    if column not in frame.columns:
        raise ValueError(f"{path}: missing required column {column!r}")
    # What pandas typed as a number is the answer's text; an empty cell is no answer.
    # A numpy array of objects: iterating pandas' Arrow-backed text column directly costs several times as much.
    return pa.array([stored_text(value) for value in frame[column].to_numpy(dtype=object)], type=pa.large_string())


@lru_cache(maxsize=8)
def _published_column(path: str, column: str, size: int, modified_ns: int, cache_dir: str) -> pa.Array:
    """The parsed column of one upstream file (`size` and `modified_ns` keep this process's memo honest; the
    content hash names the file on disk). The memo serves one partition's requests, which come file by file; a
    few files are enough, and more would hold every replayed answer of the run in memory (half a gigabyte for the
    name benchmark's 1.46 million) while the disk cache serves the next run."""
    source = Path(path)
    cached = Path(cache_dir) / f"{_sha256(source)}-{column}-v{_CACHE_FORMAT}.parquet"
    if cached.is_file():
        try:
            return pq.read_table(cached).column(column).combine_chunks()
        except (OSError, KeyError, pa.ArrowInvalid):
            pass  # a damaged cache file is parsed again and replaced
    values = _parse_column(source, column)
    with replacing(cached) as staging:  # a concurrent writer writes the same bytes
        pq.write_table(pa.table({column: values}), staging)
    return values


def published_column(path: str | Path, column: str) -> pa.Array | None:
    """The answers of one published file (null where the file has none), or None when the file is absent."""
    file = Path(path)
    try:
        status = file.stat()
    except FileNotFoundError:
        return None
    if not file.is_file():
        return None
    with _lock:
        return _published_column(str(file), column, status.st_size, status.st_mtime_ns, str(replay_cache_dir()))


class ReplayBackend(ModelBackend):
    """Published answers of one paper model, e.g. `upstream_name: qwen` for the files `…/qwen_*.csv`."""

    backend_name: ClassVar[str] = "replay"
    uses_cache: ClassVar[bool] = False
    needs_upstream: ClassVar[bool] = True
    replays: ClassVar[Optional[str]] = "SC-TC-Bench"
    replayed_benchmarks: ClassVar[tuple[str, ...]] = ("term", "name")
    forkable: ClassVar[bool] = True  # pure CPU work on published answers

    upstream_name: str = Field(description="The model's file-name prefix in the upstream data (qwen, gpt4o, ...).")
    no_think: bool = Field(default=False, description="Read the `_no_think` files (DeepSeek-R1, as the authors did).")
    upstream_root: Optional[str] = Field(default=None, description="Filled in from the upstream resource.")

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend_name, "model": self.upstream_name, "no_think": self.no_think}

    def _locate(self, ref: Mapping[str, Any]) -> tuple[str, str]:
        locators: dict[str, Callable[[Mapping[str, Any]], tuple[str, str]]] = {
            "term": lambda r: (term_response_file(self.upstream_name, r["lang"], int(r["prompt_variant"]),
                                                  no_think=self.no_think), "response"),
            # The name task's answers have no `_no_think` variant: DeepSeek-R1's keep their reasoning.
            "name": lambda r: (name_response_file(self.upstream_name, r["lang"], int(r["prompt_id"])), "response"),
        }
        benchmark = ref.get("benchmark")
        if benchmark not in locators:
            raise ValueError(f"replay has no published responses for benchmark {benchmark!r}")
        return locators[benchmark](ref)

    def published_file(self, ref: Mapping[str, Any]) -> str:
        return self._locate(ref)[0]

    def _root(self) -> Path:
        if not self.upstream_root:
            raise ValueError("ReplayBackend needs `upstream_root` (the registry resource fills it in)")
        return Path(self.upstream_root)

    def replay(self, refs: pd.DataFrame) -> tuple[np.ndarray, list[GenerationResult]]:
        """The published answers of a frame of locations (a `ref` per row: `benchmark`, `lang`, `row` and
        `prompt_variant` or `prompt_id`), as one result per distinct answer and, per row, the index of its result:
        the same results `generate()` gives, without a request or result object per row."""
        root = self._root()
        codes = np.zeros(len(refs), dtype=np.int64)
        results: list[GenerationResult] = []
        if refs.empty:
            return codes, results
        file_keys = [column for column in ("benchmark", "lang", "prompt_variant", "prompt_id") if column in refs]
        for key, positions in refs.groupby(file_keys, sort=False).indices.items():
            ref = dict(zip(file_keys, key if isinstance(key, tuple) else (key,)))
            relative, column = self._locate(ref)
            values = published_column(root / relative, column)
            rows = refs["row"].to_numpy(dtype=np.int64)[positions]
            if values is None:
                codes[positions] = len(results)
                results.append(GenerationResult(text=None, outcome="missing",
                                                message=f"upstream file missing: {relative}"))
                continue
            inside = (rows >= 0) & (rows < len(values))
            for row in sorted(set(rows[~inside].tolist())):
                codes[positions[rows == row]] = len(results)
                results.append(GenerationResult(
                    text=None, outcome="missing", message=f"{relative}: no row {row} (file has {len(values)} rows)"))
            texts = values.take(pa.array(rows[inside]))
            text_codes, uniques = pd.factorize(texts.to_pandas(types_mapper={pa.large_string(): pd.StringDtype()}.get),
                                               use_na_sentinel=True)
            answers = [GenerationResult(text=stored_text(text), outcome="ok")
                       for text in uniques.to_numpy(dtype=object)]
            missing_text = len(answers)
            if (text_codes < 0).any():
                answers.append(GenerationResult(text=None, outcome="ok"))
            codes[positions[inside]] = len(results) + np.where(text_codes >= 0, text_codes, missing_text)
            results.extend(answers)
        return codes, results

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        root = self._root()
        for index, request in enumerate(requests):
            relative, column = self._locate(request.ref)
            values = published_column(root / relative, column)
            row = int(request.ref["row"])
            if values is None:
                on_result(index, GenerationResult(text=None, outcome="missing", message=f"upstream file missing: {relative}"))
            elif not 0 <= row < len(values):
                on_result(index, GenerationResult(
                    text=None, outcome="missing", message=f"{relative}: no row {row} (file has {len(values)} rows)"))
            else:
                on_result(index, GenerationResult(text=values[row].as_py(), outcome="ok"))
