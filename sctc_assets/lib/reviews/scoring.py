"""Reading a model's answer as a score: the prompt asks for the number alone, so anything else is invalid
(Appendix D: explanations instead of a number, values outside 1–10, no engagement with the task)."""

from __future__ import annotations

import unicodedata
from typing import Sequence

import pandas as pd
import regex

from sctc_assets.lib.generation import GenerationResult, provenance_columns, reasoning_columns, strip_reasoning

# The number alone, tolerating what does not change it: "8", "8.0", "8/10", a final full stop, full-width digits.
_SCORE = regex.compile(r"(10|[1-9])(?:\.0)?(?:\s*/\s*10)?[.。]?")


def parse_score(answer: str | None) -> int | None:
    """The score 1–10 the answer consists of, else None (invalid)."""
    text = unicodedata.normalize("NFKC", strip_reasoning(answer)).strip()
    match = _SCORE.fullmatch(text)
    return int(match.group(1)) if match else None


PREDICTION_COLUMNS = ["model", "format", "pair_id", "review_id", "variety", "version", "text_variety", "response",
                      "outcome", "outcome_message", "prediction", "status", "input_tokens", "output_tokens", "cached",
                      "latency_s", "seed", "served_model", "system_fingerprint", "batch_id", "reasoning", "reasoning_tokens"]


def answer_statuses(parsed: Sequence[object], results: Sequence[GenerationResult]) -> list[str]:
    """Per answer: `valid` (it parsed), `error` (the call failed) or `invalid` (an answer that does not parse)."""
    return ["valid" if value is not None else "error" if result.outcome == "error" else "invalid"
            for value, result in zip(parsed, results)]


def predictions_table(model: str, prompts: pd.DataFrame, results: Sequence[GenerationResult]) -> pd.DataFrame:
    """One row per prompt: the raw answer, the score it gives (null unless `valid`) and its status: `valid`,
    `invalid` (answered, but not a number from 1 to 10, or refused) or `error` (no answer after the backend's
    retries; not cached, so asked again next time)."""
    frame = prompts[["format", "pair_id", "review_id", "variety", "version", "text_variety"]].copy()
    frame.insert(0, "model", model)
    frame["response"] = [result.text for result in results]
    frame["outcome"] = [result.outcome for result in results]
    frame["outcome_message"] = [result.message for result in results]
    scores = [parse_score(result.text) if result.outcome == "ok" else None for result in results]
    frame["prediction"] = pd.array(scores, dtype="Int64")
    frame["status"] = answer_statuses(scores, results)
    frame["input_tokens"] = pd.array([result.input_tokens for result in results], dtype="Int64")
    frame["output_tokens"] = pd.array([result.output_tokens for result in results], dtype="Int64")
    frame["cached"] = [result.cached for result in results]
    frame["latency_s"] = pd.array([result.latency_s for result in results], dtype="float64")
    frame = frame.assign(**provenance_columns(results), **reasoning_columns(results))
    return frame[PREDICTION_COLUMNS]
