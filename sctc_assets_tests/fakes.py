"""Fakes for tests only: backends with deterministic answers and a call log that survives process boundaries, and
an embedded artifact whose parts live in made-up packages."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, ClassVar, Mapping, Optional, Sequence

from sctc_assets.backends.base import ModelBackend, ResultCallback
from sctc_assets.lib import embedded_model as emb
from sctc_assets.lib.generation import GenerationRequest, GenerationResult


class ScriptedBackend(ModelBackend):
    """Answers from a fixed mapping (prompt → answer), else the benchmark's answer (`benchmark_answers`, by the
    request's `benchmark`), else a default; logs each uncached call to `calls_file`.

    `fail_after` raises after that many answers, to simulate a crash in the middle of a partition; `delay_s` waits
    that long before each answer, as a slow local model does.
    """

    backend_name: ClassVar[str] = "scripted"

    name: str = "scripted"
    answers: dict[str, str] = {}
    benchmark_answers: dict[str, str] = {}
    default_answer: str = "不知道"
    calls_file: Optional[str] = None
    fail_after: Optional[int] = None
    delay_s: float = 0.0

    def identity(self) -> dict[str, Any]:
        params: dict[str, Any] = {"default": self.default_answer}
        if self.benchmark_answers:
            params["benchmarks"] = self.benchmark_answers
        return {"backend": self.backend_name, "model": self.name, "params": params}

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
            if self.delay_s:
                time.sleep(self.delay_s)
            text = self.answers[request.prompt] if request.prompt in self.answers else self.benchmark_answers.get(
                str(request.ref.get("benchmark")), self.default_answer)  # "" is an answer (an empty one)
            on_result(index, GenerationResult(text=text, outcome="ok", input_tokens=len(request.prompt),
                                              output_tokens=len(text)))


class EndpointFake(ScriptedBackend):
    """A provider backend of a third party's, defined only here and named in a registry as a package's backend is
    (`backend: sctc_assets_tests.fakes:EndpointFake`): its class says where its calls go (`endpoint_lane`, from the
    entry's `endpoint`), and `sctc run` gives it an endpoint lane with no edit to the package."""

    backend_name: ClassVar[str] = "endpoint-fake"

    endpoint: str = "http://endpoint-fake.invalid/api"

    @classmethod
    def endpoint_lane(cls, settings: Mapping[str, Any]) -> str | None:
        return str(settings.get("endpoint") or cls.model_fields["endpoint"].default)


class ForkableFake(ScriptedBackend):
    """A third party's backend whose class lets `sctc run` place its model stages in forked worker processes."""

    backend_name: ClassVar[str] = "forkable-fake"
    forkable: ClassVar[bool] = True


def count_calls(calls_file: str | Path) -> int:
    path = Path(calls_file)
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


# One in ten prompts of each kind of non-answer, the rest answered.
OUTCOME_KINDS = ("refusal", "refusal_with_text", "error", "empty") + ("answer",) * 6


def outcome_kind(prompt: str) -> str:
    """Which kind of answer `OutcomeBackend` gives to `prompt`: a stable function of the prompt, so that a test
    can count each kind from the prompts it reads back."""
    return OUTCOME_KINDS[int(hashlib.sha1(prompt.encode("utf-8")).hexdigest(), 16) % len(OUTCOME_KINDS)]


class OutcomeBackend(ModelBackend):
    """A model that refuses some prompts (HTTP 400 content_filter: no text, or a refusal message), fails on others
    (an error after retries), answers some with nothing and the rest with its answer for the benchmark
    (`answers`, else `answer`), chosen by `outcome_kind`."""

    backend_name: ClassVar[str] = "outcomes"

    name: str = "outcomes"
    answer: str = "不知道"
    answers: dict[str, str] = {}

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend_name, "model": self.name, "params": {"answer": self.answer,
                                                                             "answers": self.answers}}

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        for index, request in enumerate(requests):
            answer = self.answers.get(str(request.ref.get("benchmark")), self.answer)
            result = {
                "refusal": GenerationResult(text=None, outcome="refusal", message="content_filter",
                                            finish_reason="content_filter"),
                "refusal_with_text": GenerationResult(text="I'm sorry, I can't help with that.", outcome="refusal",
                                                      message="content_filter", finish_reason="content_filter"),
                "error": GenerationResult(text=None, outcome="error", message="HTTP 503 after 3 retries"),
                "empty": GenerationResult(text="", outcome="ok", finish_reason="stop"),
                "answer": GenerationResult(text=answer, outcome="ok", finish_reason="stop"),
            }[outcome_kind(request.prompt)]
            on_result(index, result)




def write_two_term_fakes(folder: Path) -> tuple[Path, Path]:
    """A registry of `fake-a` (answers 复印件) and `fake-b` (滑鼠), one trial of prompt variant 1 each, and the file
    their uncached calls are logged to."""
    calls, path = folder / "calls.log", folder / "models.yaml"
    path.write_text("models:\n" + "".join(
        f"  fake-{name}: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: {name}, calls_file: '{calls}',"
        f" default_answer: '{answer}', benchmarks: {{term: {{trials: 1, prompt_variants: [1]}}}}}}\n"
        for name, answer in (("a", "复印件"), ("b", "滑鼠"))), encoding="utf-8")
    return path, calls


class DefinitionBackend(ModelBackend):
    """A model that drafts a definition for any concept: a fixed sentence with a number drawn from the prompt (so
    each concept gets its own), which names none of the concept's forms."""

    backend_name: ClassVar[str] = "definitions"

    name: str = "definitions"

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend_name, "model": self.name, "params": {}}

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        for index, request in enumerate(requests):
            number = int(hashlib.sha1(request.prompt.encode("utf-8")).hexdigest(), 16) % 1_000_000
            text = f"释义：一种日常所见之物，编号{number}。"
            on_result(index, GenerationResult(text=text, outcome="ok", input_tokens=len(request.prompt),
                                              output_tokens=len(text)))


def fake_artifact(site: Path, chunks: Sequence[bytes], *, prefix: str = "sctc_fake_part",
                  sha: Optional[str] = None) -> emb.EmbeddedArtifact:
    """An embedded artifact named "fake" joined from `chunks`, one made-up part package each under `site` (importing
    one raises), with the joined bytes' sha256 unless `sha` says otherwise."""
    members = []
    for number, chunk in enumerate(chunks, start=1):
        package = site / f"{prefix}{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise RuntimeError('part packages must never be imported')\n")
        (package / "data" / f"part0{number}.bin").write_bytes(chunk)
        members.append((f"{prefix}{number}", f"data/part0{number}.bin"))
    joined = b"".join(chunks)
    return emb.EmbeddedArtifact(name="fake", parts=tuple(members), size=len(joined),
                                sha256=sha or hashlib.sha256(joined).hexdigest(), hub_repo_id="example/fake-GGUF",
                                hub_filename="fake-q4.gguf")


def write_vocab_gguf(path: Path, architecture: str, model: str, name: str = "tiny") -> Path:
    """A vocabulary-only GGUF (no tensors, as llama.cpp's ggml-vocab-*.gguf): a sentencepiece vocabulary with
    scores (`llama`) or a byte-level one with merges (`gpt2`), with control and user-defined tokens."""
    import gguf
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name(name)
    writer.add_tokenizer_model(model)
    if model == "llama":
        tokens = ["<unk>", "<s>", "</s>", "\u2581", "a", "b", "\u2581a", "ab", "\u2581ab", "名", "字", "名字",
                  "<think>"]
        writer.add_token_scores([0.0, 0.0, 0.0, *(-float(rank) for rank in range(len(tokens) - 3))])
        writer.add_token_types([2, 3, 3, *[1] * (len(tokens) - 4), 4])
        writer.add_unk_token_id(0)
        writer.add_add_bos_token(True)
    else:
        spelled = [bytes_to_unicode()[byte] for byte in "名字".encode()]
        merges = ["a b", "\u0120 a", f"{spelled[0]} {spelled[1]}", f"{spelled[0]}{spelled[1]} {spelled[2]}"]
        tokens = [*bytes_to_unicode().values(), *(merge.replace(" ", "") for merge in merges),
                  "<|endoftext|>", "<|im_start|>", "<think>"]
        writer.add_tokenizer_pre("qwen2" if architecture == "qwen2" else "gpt-2")
        writer.add_token_merges(merges)
        writer.add_token_types([*[1] * (len(tokens) - 3), 3, 3, 4])
        writer.add_pad_token_id(len(tokens) - 3)
    writer.add_token_list(tokens)
    writer.add_bos_token_id(1 if model == "llama" else len(tokens) - 3)
    writer.add_eos_token_id(2 if model == "llama" else len(tokens) - 3)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
