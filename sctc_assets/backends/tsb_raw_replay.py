"""Replay of the original Taiwan sovereignty benchmark's raw result files (`results/raw/*_stage1_*.json`): one model's
published answer to each prompt, by prompting language and condition.

Registry entries `tsb-<model>` (written by `sctc run --tsb-results`) list the model's files. A request is answered
by its prompt id, its language (Simplified or Traditional Chinese, English where a file has it) and its condition
(`ref["condition"]`, `none` when the request names none: the files' `baseline`); an answer whose recorded
system prompt differs from the request's says so in its message (ask the imported conditions with the conditions
file the import writes, and they are the same). A failed call of the study
(an item with `error`) comes back as outcome `error`; what the files cannot hold comes back as `missing`: a language or
condition without a file, samples after the first, prompts a file lacks. The authors' verdicts are not part of the
answer: `published_verdicts` gives them to the scoring (the rule `published`).
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Iterable, Mapping, Optional, Sequence

from pydantic import Field

from sctc_assets.backends.base import ModelBackend, ResultCallback
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.lib.sovereignty.original_results import (NO_CONDITION, RawAnswer, RawResultFile, answer_index,
                                                         names_the_condition, published_verdicts, read_raw_file)
from sctc_assets.lib.sovereignty.original_rule import OriginalVerdict

_lock = threading.Lock()


@lru_cache(maxsize=256)
def _read(path: str, modified_ns: int) -> RawResultFile:
    return read_raw_file(Path(path))


class TSBRawReplayBackend(ModelBackend):
    """The answers of one model in the original benchmark's raw result files."""

    backend_name: ClassVar[str] = "tsb_raw_replay"
    uses_cache: ClassVar[bool] = False
    # Its `error` answers are the study's failed calls: data to score, not a failure of this run.
    replays: ClassVar[Optional[str]] = "original Taiwan sovereignty benchmark"
    replayed_benchmarks: ClassVar[tuple[str, ...]] = ("sovereignty",)
    forkable: ClassVar[bool] = True  # pure CPU work on published answers

    results_files: list[str] = Field(description="The model's raw result files of the original benchmark "
                                                 "(<model>_stage1_<sc|tc|en>_<condition>_<YYYYMMDD>.json).")

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend_name, "results_files": list(self.results_files)}

    def files(self) -> list[RawResultFile]:
        with _lock:
            return [_read(name, Path(name).stat().st_mtime_ns if Path(name).exists() else 0)
                    for name in self.results_files]

    def published_verdicts(self, items: Iterable[Mapping[str, Any]], keys: list[str]) -> dict[tuple, OriginalVerdict]:
        """The authors' verdicts of the stored answers `items` that are these files' answers, keyed by `keys`."""
        return published_verdicts(self.files(), items, keys)

    @staticmethod
    def _answer(answers: Mapping[tuple[str, str, str], RawAnswer], request: GenerationRequest) -> GenerationResult:
        ref = request.ref
        if ref.get("benchmark") != "sovereignty":
            raise ValueError(f"tsb_raw_replay has published answers for the sovereignty benchmark only, "
                             f"not {ref.get('benchmark')!r}")
        condition = ref.get("condition") or NO_CONDITION
        key = (ref["prompt_id"], ref["lang"], condition)
        if int(request.trial) > 0:
            return GenerationResult(text=None, outcome="missing", message="the study has one answer per prompt")
        if key not in answers:
            if not any(lang == ref["lang"] and cond == condition for _, lang, cond in answers):
                return GenerationResult(text=None, outcome="missing",
                                        message=f"no raw result file for {ref['lang']} under condition {condition}")
            return GenerationResult(text=None, outcome="missing",
                                    message=f"{ref['prompt_id']}: no answer in the {ref['lang']}/{condition} file")
        answer = answers[key]
        if answer.response is None:
            return GenerationResult(text=None, outcome="error", message=f"{ref['prompt_id']}: the study's call failed "
                                                                        f"({answer.error})")
        system = next((message.get("content") for message in request.messages if message.get("role") == "system"),
                      None)
        note = None if answer.prompt in (None, request.prompt) else f"published prompt differs: {answer.prompt!r}"
        if (answer.system_prompt or None) != (system or None) and not names_the_condition(answer.system_prompt,
                                                                                         condition):
            note = f"published system prompt differs: {answer.system_prompt!r}"
        return GenerationResult(text=answer.response, outcome="ok", message=note,
                                finish_reason=answer.finish_reason)

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        answers = answer_index(self.files())
        for index, request in enumerate(requests):
            on_result(index, self._answer(answers, request))
