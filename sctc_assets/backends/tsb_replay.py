"""Replay of one Pro-study result file (Taiwan sovereignty benchmark): the published answer of each prompt.

Registry entries `tsb-<model>` (written by `sctc run --tsb-results`) point at the file. A null or "[ERROR]" answer
(an API error in the study) comes back as outcome `error`; what the file cannot hold comes back as `missing`: the
Simplified Chinese prompts (the study asked Traditional Chinese and English only), samples after the first,
conditions other than `none` (the study sent no system prompt) and prompts the file lacks.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Optional, Sequence

from pydantic import Field

from sctc_assets.backends.base import ModelBackend, ResultCallback
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.lib.sovereignty.flags import has_answer
from sctc_assets.lib.sovereignty.prompts import BASELINE_CONDITION
from sctc_assets.lib.sovereignty.pro_format import BLOCK_LANGS, ProResult, read_result

_LANG_BLOCKS = {lang: block for block, lang in BLOCK_LANGS.items()}
_lock = threading.Lock()


@lru_cache(maxsize=32)
def _read(path: str, modified_ns: int) -> ProResult:
    return read_result(Path(path))


class TSBReplayBackend(ModelBackend):
    """The answers of one model in one Pro-study result file."""

    backend_name: ClassVar[str] = "tsb_replay"
    uses_cache: ClassVar[bool] = False
    # Its `error` answers are the study's published API errors: data to score, not a failure of this run.
    replays: ClassVar[Optional[str]] = "Pro study"
    replayed_benchmarks: ClassVar[tuple[str, ...]] = ("sovereignty",)
    forkable: ClassVar[bool] = True  # pure CPU work on published answers

    results_file: str = Field(description="A result file in the Pro study's JSON format.")

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend_name, "results_file": self.results_file}

    def _answer(self, result: ProResult, request: GenerationRequest) -> GenerationResult:
        ref = request.ref
        if ref.get("benchmark") != "sovereignty":
            raise ValueError(f"tsb_replay has published answers for the sovereignty benchmark only, "
                             f"not {ref.get('benchmark')!r}")
        block = _LANG_BLOCKS.get(ref["lang"])
        where = f"{self.results_file}: {ref['prompt_id']}"
        if block is None:
            return GenerationResult(text=None, outcome="missing", message=f"the study has no {ref['lang']} answers")
        if int(request.trial) > 0:
            return GenerationResult(text=None, outcome="missing", message="the study has one answer per prompt")
        if ref.get("condition", BASELINE_CONDITION) != BASELINE_CONDITION:
            return GenerationResult(text=None, outcome="missing", message=f"the study asked without a system prompt "
                                                                          f"(condition {BASELINE_CONDITION} only)")
        if (ref["prompt_id"], block) not in result.answers:
            return GenerationResult(text=None, outcome="missing", message=f"{where}: no {block} answer in the file")
        prompt, response = result.answers[(ref["prompt_id"], block)]
        note = None if prompt in (None, request.prompt) else f"published prompt differs: {prompt!r}"
        if not has_answer(response):
            return GenerationResult(text=response, outcome="error", message=f"{where}: no {block} answer (API error "
                                                                              f"in the study)")
        return GenerationResult(text=response, outcome="ok", message=note)

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        path = Path(self.results_file)
        with _lock:
            result = _read(str(path), path.stat().st_mtime_ns if path.exists() else 0)
        for index, request in enumerate(requests):
            on_result(index, self._answer(result, request))
