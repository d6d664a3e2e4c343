"""Send a model's uncached requests as provider batches and collect them, never paying twice (issue #40).

`BatchDriver.run(lines, sync_ask)` takes the requests `ModelBackend.generate()` found neither in the cache nor being
asked by another process, and sees each one end answered (stored in the cache), refused (stored too) or as an
error row (returned in `BatchOutcome.failed`, never stored):

1. Keys an open batch already holds (its claims, owner `batch:<local id>`) join that batch: it is collected, never
   resubmitted. A batch recorded but never confirmed (`SUBMITTING`: a crash between the record and the provider's
   reply, or a submission whose retries ran out) is looked up with `client.find(local id)`: found, its id is adopted;
   not found after `submit_grace_s` (10 min), it is `ABANDONED`, its keys freed and submitted again.
2. The other keys are claimed, split at the client's `max_requests`/`max_bytes`, and each part is recorded in the
   cache (`record_batch`: the record, the request of each line, the claims moved to the batch) BEFORE it is
   submitted with its local id as label; the provider's id is then written to the record.
3. Open batches are polled every `poll_s`; an ended batch's results are streamed and each settled line stored as it
   is read (the answer carries `batch_id` = the provider's id). Unknown custom ids are counted and skipped; lines to
   retry and lines never seen (a cut file, an expired or cancelled batch) are asked again: at most
   `retry_sync_max` of them through `sync_ask` (the backend's ordinary path), more in a new batch, a line going
   through at most `max_rounds` batches before it becomes an error row. The record then ends `COLLECTED` and its
   claims are released. One process collects a batch at a time (a claim on `collect:<local id>`).
4. `wait="detach"` returns once everything is submitted and polled once, with the local ids still open;
   `wait="foreground"` polls until every batch ended, calling `on_progress(line)` each poll; `halt()` returning a
   reason (Ctrl-C, a spent budget) makes it return at once, the batches left running for a later run to collect.

Pure: no Dagster, no HTTP, no backends; the provider is behind the `BatchClient` protocol (`lib/batches.py`).
"""

from __future__ import annotations

import dataclasses
import os
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

from sctc_assets.lib.batches import (ABANDONED, COLLECTED, SUBMITTING, BatchApiError, BatchClient, BatchLine,
                                     BatchRecord, BatchStatus, batch_owner)
from sctc_assets.lib.budget import Budget, call_cost, estimate_request_tokens
from sctc_assets.lib.cache import Cache, new_claim_owner
from sctc_assets.lib.cache_common import request_json
from sctc_assets.lib.generation import CACHEABLE_OUTCOMES, GenerationRequest, GenerationResult
from sctc_assets.lib.work_queue import claim_lease_s

# The state a record has once the provider accepted it, until the first poll says the provider's own state.
SUBMITTED = "submitted"
# How long a claim lets a batch stay (the providers' 24 h window) plus a margin, and how long a `SUBMITTING` record
# that `find` cannot see is waited for before its keys are freed.
BATCH_WINDOW_S = 24 * 3600
CLAIM_MARGIN_S = 2 * 3600
SUBMIT_GRACE_S = 600.0
# Keys claimed per statement (SQLite's host-parameter limit), and how long a collector holds `collect:<local id>`
# (a crashed collector's hold lapses with its process on this host, else after this).
CLAIM_CHUNK = 500
COLLECT_LEASE_S = 900.0
# The words of a state or retry reason that make a line count as expired or cancelled (else as cut from a file).
_ENDED_EARLY = ("expire", "cancel")

Wait = Literal["foreground", "detach"]
# How a `generate()` with batches waits: `foreground` (`sctc run`: poll until they end) or `detach` (the default: a
# UI or daemon run returns at once with the batches pending, and the `sctc_batches` sensor requests it again).
WAIT_ENV = "SCTC_BATCH_WAIT"


def batch_wait_mode() -> Wait:
    """`$SCTC_BATCH_WAIT` when it is `foreground`, else `detach`."""
    return "foreground" if (os.environ.get(WAIT_ENV) or "").strip().lower() == "foreground" \
        else "detach"


@dataclass
class BatchOutcome:
    """What one `BatchDriver.run` did, counted (and the error rows and open batches it leaves)."""

    batches_submitted: int = 0
    lines_submitted: int = 0
    stored: int = 0  # answers (ok, truncated) stored from batch results
    refused: int = 0  # refusals stored from batch results
    errors: int = 0  # error rows: lines the API refused outright, or still failing after `max_rounds` batches
    retried_sync: int = 0  # lines handed to `sync_ask`
    retried_batch: int = 0  # lines sent again in a new batch
    unknown_lines: int = 0  # result lines whose custom id the batch never sent
    cut_files: int = 0  # ended batches whose results lacked lines (a file cut mid-way)
    failed_batches: int = 0  # batches the provider failed as a whole (a validation failure): every line retried
    expired_lines: int = 0  # lines of an expired or cancelled batch, or that the provider said expired/cancelled
    joined: int = 0  # lines answered by a batch already open (another run's), collected instead of resubmitted
    polls: int = 0
    poll_failures: int = 0  # status or results calls that failed after the client's retries (tried again)
    submit_failures: int = 0  # submissions that failed after the client's retries (resolved through `find`)
    abandoned: int = 0  # recorded batches that never reached the provider: their lines were submitted again
    collected: set[str] = field(default_factory=set)  # provider ids of the batches this run collected
    failed: dict[str, GenerationResult] = field(default_factory=dict)  # key → error row (not stored)
    open_local_ids: list[str] = field(default_factory=list)  # batches still open when run() returned
    open_provider_ids: list[str] = field(default_factory=list)
    halted: str | None = None  # why it returned before every batch ended (Ctrl-C, the budget)
    cost_usd: float = 0.0  # what the stored lines cost at the batch price (0 without prices)

    @property
    def pending(self) -> bool:
        return bool(self.open_local_ids)


def _wait(seconds: float) -> None:
    time.sleep(seconds)


def request_from_json(text: str) -> GenerationRequest:
    """The request a `batch_requests` row stands for (its messages, trial, seed and epoch: all its key depends on)."""
    payload = json.loads(text)
    return GenerationRequest(tuple(payload["messages"]), int(payload.get("trial", 0)), {}, payload.get("seed"),
                             payload.get("epoch"))


def new_local_id() -> str:
    return f"sctc-{uuid.uuid4().hex[:12]}"


def split_lines(lines: Sequence[BatchLine], client: BatchClient) -> list[list[BatchLine]]:
    """`lines` in parts of at most `client.max_requests` lines and `client.max_bytes` bytes (`line_bytes`)."""
    parts: list[list[BatchLine]] = []
    part: list[BatchLine] = []
    size = 0
    for line in lines:
        line_size = client.line_bytes(line)
        if part and (len(part) >= client.max_requests or size + line_size > client.max_bytes):
            parts.append(part)
            part, size = [], 0
        part.append(line)
        size += line_size
    if part:
        parts.append(part)
    return parts


class BatchDriver:
    """Submits, polls and collects one model's provider batches through the response cache (see the module)."""

    def __init__(self, cache: Cache, client: BatchClient, *, identity: Mapping[str, Any], model: str,
                 poll_s: float = 60.0, retry_sync_max: int = 20, max_rounds: int = 3, price_factor: float = 0.5,
                 pricing: tuple[float | None, float | None] = (None, None), wait: Wait = "foreground",
                 on_progress: Callable[[str], None] | None = None, halt: Callable[[], str | None] = lambda: None,
                 budget: Budget | None = None, owner: str | None = None, registry_key: str | None = None,
                 partitions: Sequence[str] = (), submit_grace_s: float | None = None,
                 sleep: Callable[[float], None] | None = None, clock: Callable[[], float] = time.time):
        self.cache, self.client = cache, client
        self.identity, self.model = dict(identity), model
        self.poll_s, self.retry_sync_max, self.max_rounds = poll_s, retry_sync_max, max_rounds
        self.price_factor, self.pricing = price_factor, pricing
        self.wait, self.on_progress, self.halt = wait, on_progress, halt
        self.budget, self.owner = budget, owner or new_claim_owner()
        self.registry_key, self.partitions = registry_key, list(partitions)
        self.submit_grace_s = SUBMIT_GRACE_S if submit_grace_s is None else submit_grace_s
        self._sleep, self._clock = sleep or _wait, clock

    # --- the run -----------------------------------------------------------------------------------------------------

    def run(self, lines: list[BatchLine], sync_ask: Callable[[list[BatchLine]], None]) -> BatchOutcome:
        """See each of `lines` answered, refused or failed (module docstring); returns the counts."""
        self._outcome = outcome = BatchOutcome()
        self._lines = {line.custom_id: line for line in lines}
        self._rounds: dict[str, int] = {}
        self._open: dict[str, float] = {}  # local id → when this run started waiting on it
        self._sync_ask = sync_ask
        started = self._clock()
        try:
            self._intake(list(self._lines))
            while True:
                reason = self.halt()
                if reason is not None:
                    outcome.halted = reason
                    break
                self._poll_all()
                if not self._open:
                    break
                if self.wait == "detach":
                    break
                self._progress(started)
                if self._pause():
                    break
        finally:
            self._leave(outcome)
        return outcome

    def _pause(self) -> bool:
        """Wait `poll_s`, a short step at a time so that Ctrl-C is seen at once; True when halted."""
        deadline = self._clock() + self.poll_s
        while True:
            reason = self.halt()
            if reason is not None:
                self._outcome.halted = reason
                return True
            left = deadline - self._clock()
            if left <= 0:
                return False
            self._sleep(min(left, 0.5))

    def _leave(self, outcome: BatchOutcome) -> None:
        """The batches still open, for the caller (`BatchesPending`), and any claim of this run let go."""
        for local_id in self._open:
            record = self.cache.get_batch(local_id)
            outcome.open_local_ids.append(local_id)
            if record is not None and record.provider_id:
                outcome.open_provider_ids.append(record.provider_id)
        self.cache.release_claims(self.owner)

    # --- intake: join open batches, claim, submit --------------------------------------------------------------------

    def _intake(self, keys: list[str]) -> None:
        """Place `keys`: those an open batch holds join it; the rest are claimed a part at a time, each part right
        before it is recorded (so no claim waits on another part's upload), and submitted; keys another process
        is asking synchronously are handed to `sync_ask`, which waits for them as the ordinary path does."""
        free: list[str] = []
        for start in range(0, len(keys), CLAIM_CHUNK):
            chunk = keys[start : start + CLAIM_CHUNK]
            holding = self.cache.batches_holding(chunk)
            self._join(holding)
            free += [key for key in chunk if key not in holding]
        elsewhere: list[str] = []
        parts = split_lines([self._line(key) for key in free], self.client)
        for number, part in enumerate(parts):
            reason = self.halt()
            if reason is not None:
                self._outcome.halted = reason
                break
            claimed, held = self._claim([line.custom_id for line in part])
            late = self.cache.batches_holding(held) if held else {}  # recorded between the two statements
            self._join(late)
            elsewhere += [key for key in held if key not in late]
            lines = [line for line in part if line.custom_id in claimed]
            granted = len(lines) if self.budget is None or not lines else self.budget.reserve(len(lines))
            if granted:
                self._submit_part(lines[:granted])
            if granted < len(lines):
                # The budget allows no more lines: what is left is let go for a later run.
                self._outcome.halted = self.budget.exhausted() or "the budget is spent"
                self.cache.release_claims(self.owner, [line.custom_id for line in lines[granted:]])
                break
        if elsewhere:
            self._ask_sync(elsewhere)

    def _claim(self, keys: list[str]) -> tuple[set[str], list[str]]:
        """Claim `keys` for this run: (claimed, held by another owner); keys answered meanwhile are neither."""
        claimed: set[str] = set()
        held: list[str] = []
        for start in range(0, len(keys), CLAIM_CHUNK):
            outcome = self.cache.claim(keys[start : start + CLAIM_CHUNK], self.owner, lease_s=claim_lease_s())
            claimed.update(outcome.claimed)
            held += outcome.held
        return claimed, held

    def _join(self, holding: Mapping[str, str]) -> None:
        for key, local_id in holding.items():
            if key in self._lines and local_id not in self._open:
                self._open[local_id] = self._clock()
            self._rounds[key] = self._rounds.get(key, 0) + 1
        self._outcome.joined += sum(key in self._lines for key in holding)

    def _submit_part(self, part: list[BatchLine]) -> None:
        now = self._clock()
        local_id = new_local_id()
        record = BatchRecord(local_id=local_id, provider=self.client.provider, model=self.model,
                             identity=self.identity, size=len(part), created_at=now, updated_at=now,
                             expires_at=now + BATCH_WINDOW_S + CLAIM_MARGIN_S,
                             estimated_cost_usd=self._cost_ceiling(part), registry_key=self.registry_key,
                             partitions=self.partitions)
        self.cache.record_batch(record, [(line.custom_id, request_json(self.identity, line.request))
                                         for line in part])
        for line in part:
            self._rounds[line.custom_id] = self._rounds.get(line.custom_id, 0) + 1
        self._open[local_id] = now
        self._outcome.batches_submitted += 1
        self._outcome.lines_submitted += len(part)
        try:
            provider_id = self.client.submit(part, local_id)
        except BatchApiError as error:
            # The outcome is unknown (the client's own retries ran out): the record stays SUBMITTING, and `find`
            # decides on a later poll whether the provider has it, never a blind second submission.
            self._outcome.submit_failures += 1
            self.cache.update_batch(local_id, message=f"submission failed: {error}")
            return
        except BaseException as error:
            # A 401/403/404 (`BackendUnavailable`) or a bug: no batch was created, so the keys are freed at once.
            self.cache.update_batch(local_id, state=ABANDONED, ended=True, message=f"not submitted: {error}")
            self.cache.release_claims(batch_owner(local_id))
            self._open.pop(local_id, None)
            raise
        self.cache.update_batch(local_id, provider_id=provider_id, state=SUBMITTED)

    def _line(self, key: str, recorded: Mapping[str, str] | None = None) -> BatchLine:
        """The line of `key`: this run's, else rebuilt from the request its batch recorded."""
        line = self._lines.get(key)
        return line if line is not None else BatchLine(key, request_from_json(recorded[key]))

    def _cost_ceiling(self, part: Sequence[BatchLine]) -> float | None:
        """What `part` costs at most at the batch price: its input tokens (estimated from the text) and every answer
        as long as the entry's `max_tokens` allows (input only when the entry has none). Replaced by what the
        stored lines cost once the batch is collected. None without prices."""
        price_in, price_out = self.pricing
        if price_in is None and price_out is None:
            return None
        params = self.identity.get("params") if isinstance(self.identity.get("params"), Mapping) else {}
        max_tokens = params.get("max_tokens") if isinstance(params.get("max_tokens"), int) else 0
        input_tokens = sum(estimate_request_tokens(line.request) for line in part)
        return (input_tokens * (price_in or 0.0) + len(part) * max_tokens * (price_out or 0.0)) \
            * self.price_factor / 1e6

    # --- polling and collecting --------------------------------------------------------------------------------------

    def _poll_all(self) -> None:
        self._outcome.polls += 1
        for local_id in list(self._open):
            record = self.cache.get_batch(local_id)
            if record is None or record.state == ABANDONED:
                self._open.pop(local_id)
                self._after_other(local_id)
                continue
            if record.state == COLLECTED:
                self._open.pop(local_id)
                self._after_other(local_id)
                continue
            if record.state == SUBMITTING and not self._resolve_submitting(record):
                continue
            record = self.cache.get_batch(local_id)
            try:
                status = self.client.status(record.provider_id)
            except BatchApiError as error:
                self._outcome.poll_failures += 1
                self.cache.update_batch(local_id, message=f"poll failed (tried again): {error}")
                continue
            self.cache.update_batch(local_id, state=status.state, ended=status.ended, counts=dict(status.counts),
                                    message=status.message)
            if status.ended:
                self._collect(record, status)

    def _resolve_submitting(self, record: BatchRecord) -> bool:
        """A record whose submission was never confirmed: adopt the provider's batch `find` sees (True), free its
        keys once `find` has not seen it for `submit_grace_s` (False), or wait (False)."""
        try:
            provider_id = self.client.find(record.local_id, created_after=record.created_at - 60, size=record.size)
        except BatchApiError as error:
            self._outcome.poll_failures += 1
            self.cache.update_batch(record.local_id, message=f"find failed (tried again): {error}")
            return False
        if provider_id is not None:
            self.cache.update_batch(record.local_id, provider_id=provider_id, state=SUBMITTED, message=None)
            return True
        if self._clock() - record.created_at < self.submit_grace_s:
            return False
        self.cache.update_batch(record.local_id, state=ABANDONED, ended=True,
                                message=f"the provider has no batch labelled {record.local_id}: its lines are "
                                        "submitted again")
        self._outcome.abandoned += 1
        mine = [key for key, _ in self.cache.batch_requests(record.local_id) if key in self._lines]
        self.cache.release_claims(batch_owner(record.local_id))
        self._open.pop(record.local_id, None)
        self._intake(mine)
        return False

    def _after_other(self, local_id: str) -> None:
        """A batch this run waited on was collected (or abandoned) elsewhere: this run's keys in it are answered,
        held by the batch their retry went to, or free again (placed anew)."""
        mine = [key for key, _ in self.cache.batch_requests(local_id) if key in self._lines]
        answered = set()
        for start in range(0, len(mine), CLAIM_CHUNK):
            answered |= set(self.cache.get_many(mine[start : start + CLAIM_CHUNK]))
        left = [key for key in mine if key not in answered and key not in self._outcome.failed]
        exhausted = [key for key in left if self._rounds.get(key, 0) >= self.max_rounds]
        self._fail(exhausted, f"no answer after {self.max_rounds} batch(es)")
        self._intake([key for key in left if key not in set(exhausted)])

    def _collect(self, record: BatchRecord, status: BatchStatus) -> None:
        """Read an ended batch's results into the cache, retry what needs it, and close the record."""
        mutex = f"collect:{record.local_id}"
        if not self.cache.claim([mutex], self.owner, lease_s=COLLECT_LEASE_S).claimed:
            return  # another process is collecting it; this run sees the record COLLECTED on a later poll
        try:
            self._collect_claimed(record, status)
        finally:
            self.cache.release_claims(self.owner, [mutex])

    def _collect_claimed(self, record: BatchRecord, status: BatchStatus) -> None:
        outcome, provider_id = self._outcome, record.provider_id
        identity = record.identity
        members = {key for key, _ in self.cache.batch_requests(record.local_id)}  # the keys it was sent
        seen: set[str] = set()
        retry: dict[str, str] = {}  # key → why
        recorded: dict[str, str] | None = None  # the batch's requests, read only for lines of another run
        stored = 0
        spent_before = outcome.cost_usd
        try:
            for line in self.client.results(provider_id):
                key = line.custom_id
                if key not in members:
                    outcome.unknown_lines += 1
                    continue
                if key in seen:
                    continue
                seen.add(key)
                if line.result is None:
                    retry[key] = line.retry or "to retry"
                    continue
                request = None
                if key not in self._lines:
                    recorded = recorded if recorded is not None else dict(self.cache.batch_requests(record.local_id))
                    request = recorded[key]
                stored += self._store(key, identity, request, dataclasses.replace(line.result, batch_id=provider_id))
        except BatchApiError as error:
            # The download failed after the client's retries: read it again on the next poll (what was stored
            # stays stored; storing a line twice keeps the first answer).
            outcome.poll_failures += 1
            self.cache.update_batch(record.local_id, message=f"reading results failed (tried again): {error}")
            return
        ended_early = any(word in status.state.lower() for word in _ENDED_EARLY)
        failed_whole = "fail" in status.state.lower() and not seen
        missing = members - seen
        if failed_whole:
            outcome.failed_batches += 1
        elif missing and not ended_early:
            outcome.cut_files += 1
        outcome.expired_lines += sum(any(word in why.lower() for word in _ENDED_EARLY) for why in retry.values())
        if ended_early:
            outcome.expired_lines += len(missing)
        for key in sorted(missing):
            retry[key] = (f"batch {provider_id} failed as a whole: {status.message or status.state}" if failed_whole
                          else f"missing from the results of batch {provider_id} ({status.state})")
        cost = {} if record.estimated_cost_usd is None else \
            {"estimated_cost_usd": outcome.cost_usd - spent_before}  # the ceiling gives way to what it cost
        self.cache.update_batch(record.local_id, state=COLLECTED, ended=True, stored=record.stored + stored,
                                counts=dict(status.counts), **cost)
        outcome.collected.add(provider_id)
        self._open.pop(record.local_id, None)
        if any(key not in self._lines for key in retry) and recorded is None:
            recorded = dict(self.cache.batch_requests(record.local_id))
        self._retry(record.local_id, retry, recorded)
        self.cache.release_claims(batch_owner(record.local_id))

    def _store(self, key: str, identity: Mapping[str, Any], request: str | None, result: GenerationResult) -> int:
        """Store one settled line (or keep it as an error row); 1 when the cache now holds it."""
        outcome = self._outcome
        line = self._lines.get(key)
        if request is None:
            request = request_json(identity, line.request)
        if result.outcome not in CACHEABLE_OUTCOMES:
            outcome.errors += 1
            if line is not None:
                outcome.failed[key] = result
            return 0
        self.cache.store_line(key, identity, request, result)
        if result.outcome == "refusal":
            outcome.refused += 1
        else:
            outcome.stored += 1
        if any(price is not None for price in self.pricing):
            asked = line.request if line is not None else request_from_json(request)
            outcome.cost_usd += self.budget.record(asked, result, price_factor=self.price_factor) \
                if self.budget is not None else call_cost(asked, result, self.pricing,
                                                          price_factor=self.price_factor)[0]
        return 1

    def _retry(self, local_id: str, retry: Mapping[str, str], recorded: Mapping[str, str] | None) -> None:
        """Ask again the lines of a collected batch that need it: few synchronously, more in a new batch, none past
        `max_rounds` batches (an error row)."""
        if not retry:
            return
        if len(retry) <= self.retry_sync_max:
            self.cache.release_claims(batch_owner(local_id), list(retry))
            self._ask_sync(list(retry), recorded)
            return
        exhausted = [key for key in retry if self._rounds.get(key, 1) >= self.max_rounds]
        for key in exhausted:
            self._fail([key], f"no answer after {self.max_rounds} batch(es): {retry[key]}")
        again = [key for key in retry if key not in set(exhausted)]
        if not again:
            return
        self._outcome.retried_batch += len(again)
        lines = [self._line(key, recorded) for key in again]
        # The claims stay with the old batch until the new one's record takes them over: never a gap.
        for part in split_lines(lines, self.client):
            self._submit_part(part)

    def _ask_sync(self, keys: list[str], recorded: Mapping[str, str] | None = None) -> None:
        self._outcome.retried_sync += len(keys)
        self._sync_ask([self._line(key, recorded) for key in keys])

    def _fail(self, keys: Iterable[str], message: str) -> None:
        for key in keys:
            self._outcome.errors += 1
            if key in self._lines:
                self._outcome.failed[key] = GenerationResult(text=None, outcome="error", message=message)

    # --- progress ----------------------------------------------------------------------------------------------------

    def _progress(self, started: float) -> None:
        if self.on_progress is None:
            return
        parts = []
        for local_id in self._open:
            record = self.cache.get_batch(local_id)
            if record is None:
                continue
            counts = ", ".join(f"{name} {count}" for name, count in sorted(record.counts.items()))
            parts.append(f"{record.provider_id or local_id}: {record.state}" + (f" ({counts})" if counts else ""))
        elapsed = int(self._clock() - started)
        self.on_progress(f"{len(self._open)} batch(es) open, {elapsed // 60}m{elapsed % 60:02d}s: " + "; ".join(parts))
