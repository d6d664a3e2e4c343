"""Provider batch APIs (OpenAI's Batch API, Anthropic's Message Batches, Gemini's batch mode): the types every
batch client and the batch driver share. Pure Python: no Dagster, no HTTP (the clients live with their backends in
`sctc_assets/backends/`).

A batch request carries its response-cache key as its `custom_id` (a SHA-256 hex digest: 64 characters of
[0-9a-f], which every provider's id rules accept), so every line of a results file says which cached request it
answers. A batch is recorded in the response cache before its submission returns (`BatchRecord`, the cache's
`batches` and `batch_requests` tables) and its keys are claimed by the owner `batch:<local id>` until the batch's
window ends, so no other process, run or host asks them again while it is open.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Protocol, Sequence

from sctc_assets.lib.generation import GenerationRequest, GenerationResult

# The claim owner of a key that an open batch is answering: `batch:<local id>`.
BATCH_OWNER_PREFIX = "batch:"
# Local states a record has beside the provider's own state names.
SUBMITTING = "submitting"  # recorded, submission not (yet) confirmed: a crash here is resolved through `find`
COLLECTED = "collected"  # every line read and stored (or handed to a retry): the record is history
ABANDONED = "abandoned"  # never reached the provider (find found nothing): its keys were freed


def batch_owner(local_id: str) -> str:
    return f"{BATCH_OWNER_PREFIX}{local_id}"


@dataclass(frozen=True)
class BatchLine:
    """One request of a batch: its cache key (sent as the line's custom id) and the request."""

    custom_id: str
    request: GenerationRequest


@dataclass(frozen=True)
class BatchStatus:
    """What a poll of one batch found.

    `state`: the provider's own state name (OpenAI `validating` … `completed`; Anthropic `in_progress`/`canceling`/
    `ended`; Gemini `JOB_STATE_*`/`BATCH_STATE_*`); `ended`: no line will change any more, so the results can be
    read; `counts`: the provider's request counts under its own names (`total`, `completed`, `failed`, `succeeded`,
    `errored`, `expired`, `canceled`, `processing` …); `message`: why a batch failed as a whole (a validation
    failure), else None.
    """

    state: str
    ended: bool
    counts: Mapping[str, int] = field(default_factory=dict)
    message: str | None = None


@dataclass(frozen=True)
class LineResult:
    """One line of a batch's results (or error) file.

    `result`: the answer (outcome ok/refusal/truncated), or a final `error` result (a request the API refused, e.g.
    a 400), when the line is settled. `retry`: why the line should be asked again instead (expired, canceled, a 5xx
    or 429 for that line, a line missing from a cut file) when it is not; exactly one of the two is set.
    `custom_id` may be one this batch never sent (a provider's mistake): the driver counts and skips it.
    """

    custom_id: str
    result: GenerationResult | None = None
    retry: str | None = None


class BatchClient(Protocol):
    """What a backend with a batch API gives the driver (`ModelBackend.batch_client()`), all calls synchronous.

    Every method retries 429/5xx/timeouts itself (honouring Retry-After) and raises `BatchApiError` when they
    persist; a 401/403/404 raises `BackendUnavailable`. `submit` must never create a batch twice: after a failure
    whose outcome is unknown (a timeout, a 5xx) it asks `find(label)` before it tries again.
    """

    provider: str  # "openai", "anthropic" or "gemini": what `sctc batches` shows
    max_requests: int  # the provider's limit on lines per batch
    max_bytes: int  # the provider's limit on a batch's bytes (its input file or request body)

    def line_bytes(self, line: BatchLine) -> int:
        """The bytes `line` takes in a submission (to split at `max_bytes`)."""

    def submit(self, lines: Sequence[BatchLine], label: str) -> str:
        """Create a batch of `lines`, tagged with `label` where the API keeps one (OpenAI metadata, Gemini display
        name); returns the provider's batch id."""

    def find(self, label: str, *, created_after: float, size: int) -> str | None:
        """The provider id of a batch submitted with `label` (or, where the API keeps no label, the one batch of
        `size` lines created after `created_after`, a Unix time), or None when there is none."""

    def status(self, provider_id: str) -> BatchStatus: ...

    def results(self, provider_id: str) -> Iterator[LineResult]:
        """The lines of an ended batch, read as they stream in: answers, final errors and lines to retry; a file
        cut mid-line ends the stream early (the driver retries the lines it never saw)."""

    def cancel(self, provider_id: str) -> None: ...


class BatchApiError(RuntimeError):
    """A batch API call failed after retries (HTTP status and redacted message in the text)."""


@dataclass
class BatchRecord:
    """A batch as the response cache records it (`batches` table)."""

    local_id: str  # "sctc-<12 hex>": the label sent with the submission
    provider: str
    model: str  # the model as the endpoint knows it
    identity: dict[str, Any]  # the backend's identity(): which backend may collect it
    size: int  # lines submitted
    state: str = SUBMITTING
    provider_id: str | None = None
    ended: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    expires_at: float = 0.0  # when the keys' claims lapse (the provider's window plus a margin)
    # At most, until collected (input estimated, every answer at max_tokens); then what its stored lines cost.
    estimated_cost_usd: float | None = None
    stored: int = 0  # lines stored in the cache so far
    message: str | None = None
    registry_key: str | None = None  # the registry entry that submitted it, when known (for `sctc batches`)
    partitions: list[str] = field(default_factory=list)  # Dagster partition keys waiting on it (the sensor's runs)
