"""Replay: the published responses of the SC-TC-Bench paper's 11 LLMs, served through the backend interface.

Each request's `ref` says where its published answer lives (benchmark, lang, prompt variant, row). A file that
the upstream copy lacks gives results with outcome `missing` whose message names the file, so the assets can
skip that part with a clear note instead of failing.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Optional, Sequence

import pandas as pd
from pydantic import Field

from sctc_assets.backends.base import ModelBackend, ResultCallback
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.lib.sctc_upstream import name_response_file, term_response_file

_lock = threading.Lock()


@lru_cache(maxsize=64)
def _read_column(path: str, column: str) -> tuple[Any, ...] | None:
    file = Path(path)
    if not file.is_file():
        return None
    frame = pd.read_csv(file)
    if column not in frame.columns:
        raise ValueError(f"{path}: missing required column {column!r}")
    return tuple(None if isinstance(value, float) and pd.isna(value) else value for value in frame[column])


class ReplayBackend(ModelBackend):
    """Published answers of one paper model, e.g. `upstream_name: qwen` for the files `…/qwen_*.csv`."""

    backend_name: ClassVar[str] = "replay"
    uses_cache: ClassVar[bool] = False
    needs_upstream: ClassVar[bool] = True

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

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        if not self.upstream_root:
            raise ValueError("ReplayBackend needs `upstream_root` (the registry resource fills it in)")
        for index, request in enumerate(requests):
            relative, column = self._locate(request.ref)
            with _lock:
                values = _read_column(str(Path(self.upstream_root) / relative), column)
            row = int(request.ref["row"])
            if values is None:
                on_result(index, GenerationResult(text=None, outcome="missing", message=f"upstream file missing: {relative}"))
            elif row >= len(values):
                on_result(index, GenerationResult(
                    text=None, outcome="missing", message=f"{relative}: no row {row} (file has {len(values)} rows)"))
            else:
                value = values[row]
                on_result(index, GenerationResult(text=None if value is None else str(value), outcome="ok"))
