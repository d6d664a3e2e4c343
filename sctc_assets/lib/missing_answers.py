"""Errors are never results: which models of a responses table have partitions without answers, said in words.

A model call that ended in an error after retries (`generation.failed_call`: outcome `error`, no text) is stored
as a row of its responses table, but no benchmark scores it: a partition whose calls all failed has no score, rate,
verdict, test or figure (missing, not 0), and a partition with some failures is scored on its answers. The lines
here say so at the end of `sctc run`'s summary of a benchmark, naming each such model with the first error
message (API keys redacted), so that a configuration error (a refused parameter, a wrong key) reads as one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

import pandas as pd

from sctc_assets.lib.generation import failed_calls

# What an error message may carry that must never be shown: a bearer token, an OpenAI-style key, a `key=` query.
_SECRETS = (re.compile(r"(?i)bearer\s+\S+"), re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"),
            re.compile(r"(?i)((?:api[_-]?)?key=)[^&\s]+"))
MESSAGE_CHARS = 200


def shown_message(message: object) -> str:
    """An error message for one line of output: secrets masked, whitespace collapsed, at most `MESSAGE_CHARS`."""
    text = " ".join(str(message).split()) if isinstance(message, str) and message.strip() else "(no message)"
    text = _SECRETS[0].sub("Bearer [redacted]", text)
    text = _SECRETS[1].sub("[redacted]", text)
    text = _SECRETS[2].sub(r"\1[redacted]", text)
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


@dataclass(frozen=True)
class PartitionErrors:
    """One model × partition with failed calls: `failed` of its `calls` ended in an error."""

    model: str
    partition: str
    calls: int
    failed: int
    first_error: str

    @property
    def no_answers(self) -> bool:
        return self.failed == self.calls


def partition_errors(responses: pd.DataFrame, dimension: str) -> list[PartitionErrors]:
    """Every model × partition (`dimension`: the table's second partition column) with a failed call, in the
    table's order."""
    if responses is None or responses.empty or "model" not in responses.columns:
        return []
    failed = failed_calls(responses, "response")
    if not failed.any():
        return []
    keys = [responses["model"].astype(str),
            responses[dimension].astype(str) if dimension in responses.columns else pd.Series("", index=responses.index)]
    found = []
    for (model, partition), rows in responses.groupby(keys, sort=False):
        errors = rows[failed.loc[rows.index]]
        if len(errors):
            message = errors["outcome_message"].iloc[0] if "outcome_message" in errors.columns else None
            found.append(PartitionErrors(model, partition, len(rows), len(errors), shown_message(message)))
    return found


def missing_answer_lines(responses: pd.DataFrame, dimension: str, models: Sequence[str],
                         published: Callable[[str], bool] = lambda model: False) -> list[str]:
    """One line per model of `models` with failed calls: "no answers" where every call of a partition failed, else
    how many answers are missing; each with the first error message. `published(model)`: its errors are a study's
    published data (a replay), scored as such and not listed."""
    by_model: dict[str, list[PartitionErrors]] = {}
    for found in partition_errors(responses, dimension):
        if found.model in models and not published(found.model):
            by_model.setdefault(found.model, []).append(found)
    lines = []
    for model in models:
        found = by_model.get(model)
        if not found:
            continue
        empty = [item for item in found if item.no_answers]
        partial = [item for item in found if not item.no_answers]
        partitions = responses.loc[responses["model"].astype(str) == model, dimension].astype(str).nunique() \
            if dimension in responses.columns else 1
        if empty:
            where = "" if len(empty) == partitions else f" in {', '.join(item.partition for item in empty)}"
            calls = sum(item.calls for item in empty)
            lines.append(f"{model}: no answers{where}: all {calls} model call(s) ended in an error (the first: "
                         f"{empty[0].first_error}); no score, rate, verdict or test{' for them' if where else ''}")
        if partial:
            missing, calls = sum(item.failed for item in partial), sum(item.calls for item in partial)
            detail = ", ".join(f"{item.partition} {item.failed}/{item.calls}" for item in partial)
            lines.append(f"{model}: scored on its answers; {missing} of {calls} missing ({detail}): their model "
                         f"calls ended in an error (the first: {partial[0].first_error}); a rerun asks them again")
    return lines
