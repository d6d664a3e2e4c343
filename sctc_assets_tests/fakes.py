"""Backends for tests only: deterministic answers and a call log that survives process boundaries."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar, Optional, Sequence

from sctc_assets.backends.base import ModelBackend, ResultCallback
from sctc_assets.lib.generation import GenerationRequest, GenerationResult


class ScriptedBackend(ModelBackend):
    """Answers from a fixed mapping (prompt → answer), else a default; logs each uncached call to `calls_file`.

    `fail_after` raises after that many answers, to simulate a crash in the middle of a partition.
    """

    backend_name: ClassVar[str] = "scripted"

    name: str = "scripted"
    answers: dict[str, str] = {}
    default_answer: str = "不知道"
    calls_file: Optional[str] = None
    fail_after: Optional[int] = None

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend_name, "model": self.name, "params": {"default": self.default_answer}}

    def _log_call(self, request: GenerationRequest) -> None:
        if self.calls_file:
            with open(self.calls_file, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"pid": os.getpid(), "prompt": request.prompt, "trial": request.trial},
                                        ensure_ascii=False) + "\n")

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        for index, request in enumerate(requests):
            if self.fail_after is not None and index >= self.fail_after:
                raise RuntimeError(f"simulated crash after {self.fail_after} answers")
            self._log_call(request)
            text = self.answers.get(request.prompt, self.default_answer)
            on_result(index, GenerationResult(text=text, outcome="ok", input_tokens=len(request.prompt),
                                              output_tokens=len(text)))


def count_calls(calls_file: str | Path) -> int:
    path = Path(calls_file)
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0
