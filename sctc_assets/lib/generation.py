"""Request and result types shared by every model backend, plus the small text helpers scoring needs.

Missing text: a stored answer is either a string (possibly "", an empty answer) or missing (no answer at all: a
refusal or error without text, a replay gap). Tables read back from storage hold missing text as `pd.NA` in a
`string` column (see `resources/io_manager.py`); frames built in memory may hold None or NaN. Every reader gets
answer text through `stored_text` (or `strip_reasoning`, which uses it), never by testing the value itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

Outcome = Literal["ok", "refusal", "error", "missing", "truncated"]
OUTCOMES: tuple[str, ...] = ("ok", "refusal", "error", "missing", "truncated")
# Outcomes worth remembering: a retry would return the same thing (a truncated answer too: the entry's max tokens
# is part of the request identity, so raising it asks again). Transport errors and replay gaps are not.
CACHEABLE_OUTCOMES: frozenset[str] = frozenset({"ok", "refusal", "truncated"})
# Why an answer is `truncated`: the model spent the token limit on its reasoning and never answered.
TRUNCATED_MESSAGE = "cut by the token limit with nothing after its reasoning: raise the entry's max_tokens"


def failed_call(outcome: Any, text: Any) -> bool:
    """Whether a stored row is a model call that ended in an error after retries (endpoint down, a request the API
    refused): outcome `error` and no text at all, so the model gave no answer and the row is no result. Errors are
    never results: such rows are left out of every score, rate, verdict and test (a replay's published errors
    excepted: they are the study's data). A refusal is an answer, and so is an empty one ("", or nothing after a
    reasoning block, which the sovereignty benchmark stores as `error` with its text)."""
    return outcome == "error" and stored_text(text) is None


def failed_calls(frame: pd.DataFrame, text_column: str) -> pd.Series:
    """`failed_call` of every row of a responses table (False throughout without an `outcome` column)."""
    if "outcome" not in frame.columns or text_column not in frame.columns:
        return pd.Series(False, index=frame.index, dtype=bool)
    return pd.Series([failed_call(outcome, text) for outcome, text in zip(frame["outcome"], frame[text_column])],
                     index=frame.index, dtype=bool)


class BackendUnavailable(RuntimeError):
    """The backend cannot serve this request at all (missing API key, missing weights): a configuration problem."""


@dataclass(frozen=True)
class GenerationRequest:
    """One model call.

    `messages` is the full chat (system/user/assistant dicts). `trial` separates repeated samples of the same
    prompt in the cache. `ref` locates the item in a benchmark (benchmark, lang, prompt_variant, row, ...): replay
    backends read published responses through it; live backends ignore it. `seed` is the sampling seed sent with
    this request, set by `ModelBackend.generate` from the backend's base seed and the trial (None: none is sent).
    `epoch` is a tag that makes asking again a new sample (`sctc run --sovereignty-epoch`): it enters the cache key
    only when set, and is never sent to the model.
    """

    messages: tuple[Mapping[str, str], ...]
    trial: int = 0
    ref: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    epoch: str | None = None

    @classmethod
    def user(cls, prompt: str, *, trial: int = 0, system: str | None = None, **ref: Any) -> "GenerationRequest":
        # Built directly as the tuple it stores: a paper-scale plan builds 132,540 requests per model.
        user = {"role": "user", "content": prompt}
        return cls(({"role": "system", "content": system}, user) if system else (user,), trial, ref)

    @property
    def prompt(self) -> str:
        """The last user message: what replay backends compare against the published prompt."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return message.get("content", "")
        return ""


@dataclass
class GenerationResult:
    text: str | None
    outcome: Outcome = "ok"
    message: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    cached: bool = False
    latency_s: float | None = None
    # What produced the answer: the seed actually used (None: none), and what an API reported about itself (the
    # model id it served, which may be a dated snapshot of the one asked for, and its `system_fingerprint`).
    seed: int | None = None
    served_model: str | None = None
    system_fingerprint: str | None = None
    # The model's reasoning, kept apart from the answer (a reasoning field of the API, or the `<think>` blocks of
    # the text, which stay in `text` as well), and the reasoning tokens the API billed (part of `output_tokens`).
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    # The provider's id of the batch that answered it (`lib/batches.py`); None for a synchronous call.
    batch_id: str | None = None

    def to_record(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "outcome": self.outcome,
            "message": self.message,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "finish_reason": self.finish_reason,
            "seed": self.seed,
            "served_model": self.served_model,
            "system_fingerprint": self.system_fingerprint,
            "reasoning": self.reasoning,
            "reasoning_tokens": self.reasoning_tokens,
            "batch_id": self.batch_id,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any], *, cached: bool = False) -> "GenerationResult":
        return cls(
            text=record.get("text"),
            outcome=record.get("outcome", "ok"),
            message=record.get("message"),
            input_tokens=record.get("input_tokens"),
            output_tokens=record.get("output_tokens"),
            finish_reason=record.get("finish_reason"),
            cached=cached,
            # Records stored before these fields existed lack them.
            seed=record.get("seed"),
            served_model=record.get("served_model"),
            system_fingerprint=record.get("system_fingerprint"),
            reasoning=record.get("reasoning"),
            reasoning_tokens=record.get("reasoning_tokens"),
            batch_id=record.get("batch_id"),
        )


@dataclass
class UsageTotals:
    """Token and cost figures summed over one partition's calls (cached answers reported separately)."""

    calls: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0  # the part of output_tokens the model spent reasoning
    outcomes: dict[str, int] = field(default_factory=dict)
    first_error: str | None = None  # the message of the first call that ended in an error (keys already redacted)

    def add(self, result: GenerationResult, times: int = 1) -> None:
        """Count `result` (`times` answers that share it: a replay's repeated published answer)."""
        self.calls += times
        self.outcomes[result.outcome] = self.outcomes.get(result.outcome, 0) + times
        if result.outcome == "error" and self.first_error is None:
            self.first_error = result.message or "(no message)"
        if result.cached:
            self.cached += times
            return
        self.input_tokens += (result.input_tokens or 0) * times
        self.output_tokens += (result.output_tokens or 0) * times
        self.reasoning_tokens += (result.reasoning_tokens or 0) * times

    def cost(self, price_input_per_mtok: float | None, price_output_per_mtok: float | None) -> float | None:
        if price_input_per_mtok is None and price_output_per_mtok is None:
            return None
        return (self.input_tokens * (price_input_per_mtok or 0.0) + self.output_tokens * (price_output_per_mtok or 0.0)) / 1e6


_THINK_BLOCK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)


def stored_text(value: object) -> str | None:
    """The text of a stored answer, or None when there is none (None, NaN, pd.NA, NaT); "" stays "" (an empty
    answer is an answer). A non-string value (a number a CSV reader typed) is its string form."""
    if isinstance(value, str):
        return value
    if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)):
        return None
    return str(value)


def strip_reasoning(text: object) -> str:
    """Drop `<think>…</think>` blocks (an unclosed block runs to the end) before an answer is scored; "" for a
    missing answer."""
    text = stored_text(text)
    if not text:
        return ""
    if "</think>" in text and "<think>" not in text:
        # Chat templates that open the block inside the prompt leave only the closing tag in the answer.
        text = text.split("</think>", 1)[1]
    return _THINK_BLOCK.sub("", text).strip()


def think_blocks(text: object) -> str | None:
    """The reasoning written in `<think>…</think>` blocks of an answer (what `strip_reasoning` drops, an unclosed
    block running to the end, a lone closing tag closing what came before it), joined; None when there is none."""
    text = stored_text(text)
    if not text or "</think>" not in text and "<think>" not in text:
        return None
    parts = []
    if "</think>" in text and "<think>" not in text:
        before, text = text.split("</think>", 1)
        parts.append(before)
    parts += [match.group(0).removeprefix("<think>").removesuffix("</think>") for match in _THINK_BLOCK.finditer(text)]
    reasoning = "\n\n".join(part.strip() for part in parts if part.strip())
    return reasoning or None


def is_truncated(text: object, reasoning: str | None, finish_reason: str | None) -> bool:
    """Whether an answer was cut by the token limit (`finish_reason` `length`, or `max_tokens` as some APIs say)
    with reasoning and nothing after it: the `truncated` outcome, not an empty answer."""
    if finish_reason not in ("length", "max_tokens", "MAX_TOKENS"):
        return False
    return bool(reasoning or think_blocks(text)) and not strip_reasoning(text)


def result_columns(results: Sequence[GenerationResult]) -> dict[str, Any]:
    """The columns a responses table keeps of each result, in order (token counts as nullable integers)."""
    return {
        "response": [result.text for result in results],
        "outcome": [result.outcome for result in results],
        "outcome_message": [result.message for result in results],
        "input_tokens": pd.array([result.input_tokens for result in results], dtype="Int64"),
        "output_tokens": pd.array([result.output_tokens for result in results], dtype="Int64"),
        "finish_reason": [result.finish_reason for result in results],
        "cached": [result.cached for result in results],
        "latency_s": np.array([np.nan if result.latency_s is None else result.latency_s for result in results],
                              dtype=float),
        **provenance_columns(results),
        **reasoning_columns(results),
    }


PROVENANCE_COLUMNS = ["seed", "served_model", "system_fingerprint", "batch_id"]


def provenance_columns(results: Sequence[GenerationResult]) -> dict[str, Any]:
    """The seed sent, what the API said it served and the provider batch that answered it (None: a synchronous
    call), per result (every benchmark's responses table keeps them).

    Tables written before these columns existed lack them: readers use `frame.get(name)` or `reindex`.
    """
    return {
        "seed": pd.array([result.seed for result in results], dtype="Int64"),
        "served_model": [result.served_model for result in results],
        "system_fingerprint": [result.system_fingerprint for result in results],
        "batch_id": [result.batch_id for result in results],
    }


REASONING_COLUMNS = ["reasoning", "reasoning_tokens"]


def reasoning_columns(results: Sequence[GenerationResult]) -> dict[str, Any]:
    """The model's reasoning and the reasoning tokens billed, per result (every benchmark's responses table keeps
    them; tables written before they existed lack them: readers use `frame.get(name)` or `reindex`)."""
    return {
        "reasoning": [result.reasoning for result in results],
        "reasoning_tokens": pd.array([result.reasoning_tokens for result in results], dtype="Int64"),
    }


def truncation_notes(results: Sequence[GenerationResult]) -> list[str]:
    """The run-output line for answers cut inside their reasoning (none when there are none)."""
    cut = sum(result.outcome == "truncated" for result in results)
    return [f"{cut} answer(s) {TRUNCATED_MESSAGE}"] if cut else []


def summarize_outcomes(results: Sequence[GenerationResult]) -> dict[str, int]:
    counts = {name: 0 for name in OUTCOMES}
    for result in results:
        counts[result.outcome] = counts.get(result.outcome, 0) + 1
    return counts
