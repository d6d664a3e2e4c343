"""The one interface every model backend implements, and the cache logic they all share.

A backend is a Dagster `ConfigurableResource` whose fields are the settings of one registry entry. Subclasses
implement `identity()` (what distinguishes their answers in the cache) and `_generate_uncached()` (the real
calls); `generate()` serves cached answers first and stores each new answer the moment it arrives, so a crash or a
retried partition never pays twice. Keys are claimed in the cache before they are asked (`lib/work_queue.py`), so
concurrent processes on one model split the work, and every new call first passes `halt_reason()` (Ctrl-C and the
budget): a halted `generate()` raises `GenerationHalted` once what was in flight is stored.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Optional, Sequence

import dagster as dg
from pydantic import PrivateAttr

from sctc_assets.lib.batches import BatchLine
from sctc_assets.lib.budget import Budget
from sctc_assets.lib.cache import Cache, CacheUnavailable, cache_key, new_claim_owner, score_key
# BackendUnavailable is defined in lib so that the embedded model's files (lib/embedded_model) can raise it without
# Dagster; backends import it from here.
from sctc_assets.lib.generation import (CACHEABLE_OUTCOMES, BackendUnavailable, GenerationRequest, GenerationResult,
                                        truncation_notes)
from sctc_assets.lib.interrupt import stop_reason
from sctc_assets.lib.work_queue import WAIT, WorkQueue, claim_lease_s

if TYPE_CHECKING:
    from sctc_assets.lib.batches import BatchClient
    from sctc_assets.lib.cost_estimate import TokenCounter

ProgressCallback = Callable[[int, int], None]
ResultCallback = Callable[[int, GenerationResult], None]


class GenerationHalted(RuntimeError):
    """`generate()` stopped starting calls (Ctrl-C, a spent budget) after storing every answer that arrived.

    `answered`: requests of this call with a stored answer (from the cache or new); `remaining`: the others, which
    a rerun asks.
    """

    def __init__(self, reason: str, answered: int, remaining: int):
        self.reason, self.answered, self.remaining = reason, answered, remaining
        super().__init__(f"stopped: {reason}; {answered} answers stored, {remaining} not yet asked (or failed): "
                         "run again to continue from the cache")

    def __reduce__(self):  # picklable with its fields (Dagster serialises step errors across processes)
        return (type(self), (self.reason, self.answered, self.remaining))


class BatchesPending(GenerationHalted):
    """`generate()` submitted (or joined) provider batches that have not ended yet, and was not asked to wait for
    them (`$SCTC_BATCH_WAIT` is not `foreground`: a UI or daemon run). Every answer that had arrived is stored; the
    batches keep running at the provider, and the same run started again once they end collects them (the
    `sctc_batches` sensor does it for a Dagster run). `local_ids`: the batches' ids in the response cache
    (`sctc batches`); `provider_ids`: the provider's ids of those it confirmed."""

    def __init__(self, local_ids: Sequence[str], provider_ids: Sequence[str], *, answered: int, remaining: int,
                 reason: str | None = None):
        self.local_ids, self.provider_ids = list(local_ids), list(provider_ids)
        reason = reason or (f"waiting for {len(self.local_ids)} provider batch(es) to end "
                            f"({', '.join(self.local_ids)})")
        super().__init__(reason, answered=answered, remaining=remaining)

    def __reduce__(self):
        return (_batches_pending, (self.local_ids, self.provider_ids, self.answered, self.remaining, self.reason))


def _batches_pending(local_ids, provider_ids, answered, remaining, reason) -> BatchesPending:
    return BatchesPending(local_ids, provider_ids, answered=answered, remaining=remaining, reason=reason)


def _print_progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


class ModelBackend(dg.ConfigurableResource):
    """Base class: subclasses set `backend_name` and implement `identity` and `_generate_uncached`."""

    backend_name: ClassVar[str] = "base"
    # --- Traits: what `sctc run`, the estimate, the checks and the report ask of a backend, stated once, here on
    # its class. The class variables are plain literals: `lib/backend_catalog.py` reads a built-in backend's from
    # its source (no Dagster import) and a backend of your own's (`module:Class`) from the class; the methods
    # (`endpoint_lane`, `token_counter`) are asked where the backends are imported anyway.
    # Replay backends read published answers; caching them would only duplicate the upstream files.
    uses_cache: ClassVar[bool] = True
    # Whose published answers the backend replays (the study, as the report names it); None: it asks a model.
    replays: ClassVar[Optional[str]] = None
    # The benchmarks those published answers cover: a replay answers no other benchmark's prompts.
    replayed_benchmarks: ClassVar[tuple[str, ...]] = ()
    # Whether `sctc run` may run the model's stages in a forked worker process: CPU work with no model in memory,
    # thread pool or connection that a fork would break (replays); others stay in the parent process.
    forkable: ClassVar[bool] = False
    # Whether `score_continuations` (teacher-forced log-probabilities) is implemented.
    supports_logprobs: ClassVar[bool] = False
    # The provider batch API the backend can send its requests through (`batch: true`, `batch_client()`):
    # "openai", "anthropic", "gemini"; None: none.
    batch_api: ClassVar[Optional[str]] = None
    # Whether the registry may ask to observe the model its endpoint serves (`observe:`, lib/served_model.py): an
    # endpoint that answers a one-token chat call with `model` and `system_fingerprint`. Never a replay (published
    # answers do not change) nor a local model (the embedded one: its file is its version).
    observable: ClassVar[bool] = False
    _budget: Optional[Budget] = PrivateAttr(default=None)
    _notes: list = PrivateAttr(default_factory=list)
    # Provider batches: what the record of a batch names (`set_batch_context`), where the foreground wait's progress
    # lines go (None: standard error) and the counts of the last batched `generate()` (`BatchOutcome`).
    _batch_context: dict = PrivateAttr(default_factory=dict)
    _batch_progress: Optional[Callable[[str], None]] = PrivateAttr(default=None)
    _batch_outcome: Any = PrivateAttr(default=None)

    @classmethod
    def endpoint_lane(cls, settings: Mapping[str, Any]) -> str | None:
        """The network endpoint a registry entry's calls go to (from its settings, e.g. a base URL): `sctc run`
        gives each such model a thread (a lane) of its own, and the models behind one endpoint share its stage
        slots. None (the default): no endpoint; the model runs in the one lane of local models and replays."""
        return None

    def token_counter(self) -> "TokenCounter | None":
        """The model's own tokenizer for `sctc plan`'s token counts, when it is known offline; None (the default):
        the estimate's characters-per-token rule."""
        return None

    def batch_client(self) -> "BatchClient":
        """The client of the provider's batch API (`lib/batches.py`) that `generate()` sends uncached requests
        through when the entry sets `batch: true`; backends without one raise `BackendUnavailable`."""
        raise BackendUnavailable(f"the {self.backend_name} backend has no batch API")

    def set_batch_context(self, *, registry_key: str | None = None, partitions: Sequence[str] = (),
                          on_progress: Callable[[str], None] | None = None) -> None:
        """What the records of this backend's batches name (its registry entry, the Dagster partitions waiting on
        them), and where a foreground wait prints its progress lines."""
        self._batch_context = {"registry_key": registry_key, "partitions": list(partitions)}
        self._batch_progress = on_progress

    def batch_outcome(self) -> Any:
        """The counts of the last `generate()` that went through provider batches (`BatchOutcome`), else None."""
        return self._batch_outcome

    def identity(self) -> dict[str, Any]:
        """Everything that changes an answer except the messages and trial: backend, endpoint, model, parameters.

        Never include secrets (API keys): this dictionary is stored in the cache.
        """
        raise NotImplementedError

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        """Answer every request, calling `on_result(index, result)` as soon as each answer exists.

        Transport failures that survive the backend's retries are reported as results with outcome `error`, not
        raised, so the other answers of the partition are kept; raise only for configuration problems.
        """
        raise NotImplementedError

    def pricing(self) -> tuple[float | None, float | None]:
        """USD per million input and output tokens, when configured."""
        return None, None

    def request_seed(self, request: GenerationRequest) -> int | None:
        """The seed to send with `request`: sampling backends whose API takes a seed give trial k `base seed + k`,
        so repeated trials are distinct, reproducible requests. None: no seed is sent."""
        return None

    def claim_chunk_size(self) -> int:
        """How many keys to claim (and hand to `_generate_uncached`) at a time: about what runs at once."""
        return 64

    def trials_are_repeats(self) -> bool:
        """Whether repeated trials of a prompt repeat one request rather than draw samples (temperature 0)."""
        temperature = getattr(self, "temperature", None)
        return self.uses_cache and temperature is not None and float(temperature) == 0.0

    def attach_budget(self, budget: Budget | None) -> None:
        """Count this backend's new calls against `budget` (set by `ModelRegistryResource.backend`)."""
        self._budget = budget

    def halt_reason(self) -> str | None:
        """Why no new request may start: Ctrl-C (`lib/interrupt.py`) or a spent budget; None to go on."""
        reason = stop_reason()
        if reason is None and self._budget is not None and self.uses_cache:
            reason = self._budget.exhausted()
        return reason

    def generation_notes(self) -> list[str]:
        """Warnings about the last `generate()` call, for the run output and the asset metadata."""
        return list(self._notes)

    def request_adaptations(self) -> list[str]:
        """How this backend's requests differ from what its registry entry says (parameters a reasoning model
        refused, learned from the API), one line each, for the asset metadata; [] when they do not."""
        return []

    def _generate_from(self, queue: WorkQueue, on_result: ResultCallback) -> None:
        """Ask what `queue` hands out until it is empty or halted. The default takes chunks for
        `_generate_uncached`; backends that overlap requests (openai) take one request per free slot instead."""
        while True:
            chunk = queue.take_chunk(self.claim_chunk_size())
            if chunk is None:
                return
            if chunk == WAIT:
                time.sleep(queue.poll_s)
                continue
            indices = [index for index, _ in chunk]
            self._generate_uncached([request for _, request in chunk],
                                    lambda position, result: on_result(indices[position], result))

    def generate(
        self,
        requests: Sequence[GenerationRequest],
        *,
        cache: Cache | None = None,
        progress: ProgressCallback | None = None,
    ) -> list[GenerationResult]:
        """Answer `requests` in order: cached answers first, then new calls, each stored the moment it arrives.

        With a cache, the keys to ask are claimed chunk by chunk, so another process on the same model asks other
        keys and waits for these; every answer returned is the one the cache holds, and a call that failed here is
        looked up in the cache once more at the end (another process may have answered it meanwhile, or be asking
        it: then its answer is waited for). Raises
        `GenerationHalted` after storing what arrived when Ctrl-C or a budget stopped it early.

        With `batch: true` (a backend with a `batch_api`) and a cache, the uncached requests go through the
        provider's batch API instead (`lib/batch_driver.py`): with `$SCTC_BATCH_WAIT=foreground` (`sctc run`) this
        waits for the batches, printing a progress line each poll; otherwise it raises `BatchesPending` once they
        are submitted, and the same call made again after they end collects them.
        """
        requests = [request if request.seed is not None else
                    dataclasses.replace(request, seed=self.request_seed(request)) for request in requests]
        self._notes = self._trial_notes(requests)
        results: list[GenerationResult | None] = [None] * len(requests)
        total, done = len(requests), 0
        identity = self.identity()
        use_cache = cache is not None and self.uses_cache
        keys = [cache_key(identity, request) for request in requests] if use_cache else \
            [str(index) for index in range(len(requests))]
        if use_cache:
            hits = cache.get_many(list(dict.fromkeys(keys)))
            for index, key in enumerate(keys):
                if key in hits:
                    results[index] = hits[key]
                    done += 1
        if progress is not None:
            progress(done, total)
        pending = [index for index, result in enumerate(results) if result is None]
        if not pending:
            self._notes += truncation_notes(results)  # type: ignore[arg-type]
            return results  # type: ignore[return-value]
        # Repeated identical requests (same messages, trial and seed) are asked once.
        leaders: dict[str, int] = {}
        followers: dict[int, list[int]] = {}
        for index in pending:
            leader = leaders.setdefault(keys[index], index)
            followers.setdefault(leader, [])
            if leader != index:
                followers[leader].append(index)
        lock = threading.Lock()  # backends may answer from worker threads
        budget = self._budget if self.uses_cache else None

        def settle(index: int, result: GenerationResult) -> None:
            nonlocal done
            with lock:
                results[index] = result
                # Repeats were paid for once: report them as cached so usage is not counted twice.
                for target in followers[index]:
                    results[target] = dataclasses.replace(result, cached=True)
                done += 1 + len(followers[index])
                if progress is not None:
                    progress(done, total)

        started = time.monotonic()
        batch_pending: BatchesPending | None = None
        if use_cache and getattr(self, "batch", False):
            # The uncached leaders go to the provider's batch API (lib/batch_driver.py); lines it retries
            # synchronously come back through the ordinary queue below (`sync_ask`).
            halted_reason, batch_pending = self._generate_through_batches(
                requests, leaders, settle, results, identity=identity, cache=cache, budget=budget)
            queue_halted = halted_reason
        else:
            queue = self._ask_through_queue(list(leaders.values()), requests, keys, settle, identity=identity,
                                            cache=cache if use_cache else None, budget=budget,
                                            chunk_size=self.claim_chunk_size() if use_cache else len(pending))
            queue_halted = queue.halted
        if use_cache:
            self._answered_meanwhile(cache, keys, results, followers)
        if budget is not None:
            self._notes += budget.notes()
        answered = sum(result is not None and result.outcome in CACHEABLE_OUTCOMES for result in results)
        if batch_pending is not None:
            raise BatchesPending(batch_pending.local_ids, batch_pending.provider_ids, answered=answered,
                                 remaining=total - answered, reason=batch_pending.reason)
        reason = queue_halted or (self.halt_reason() if any(result is None for result in results) else None)
        missing = [index for index in leaders.values() if results[index] is None]
        if reason is not None and (missing or queue_halted):
            raise GenerationHalted(reason, answered=answered, remaining=total - answered)
        if missing:
            raise RuntimeError(
                f"{type(self).__name__} returned no result for {len(missing)} of {len(leaders)} requests"
                f" (after {time.monotonic() - started:.1f}s)"
            )
        self._notes += truncation_notes(results)  # type: ignore[arg-type]
        return results  # type: ignore[return-value]

    def _ask_through_queue(self, indices: Sequence[int], requests: Sequence[GenerationRequest], keys: Sequence[str],
                           settle: ResultCallback, *, identity: Mapping[str, Any], cache: Cache | None,
                           budget: Budget | None, chunk_size: int) -> WorkQueue:
        """Ask `requests[i]` for each of `indices` the ordinary way (claimed chunk by chunk, each answer stored as
        it arrives, `settle(i, result)` called with what the cache holds); returns the queue (`halted`)."""
        queue = WorkQueue(
            list(indices), requests, keys, cache=cache, owner=new_claim_owner(), on_cached=settle,
            halt=self.halt_reason, reserve=budget.reserve if budget is not None else None, chunk_size=chunk_size,
            lease_s=claim_lease_s(),
        )

        def on_result(index: int, result: GenerationResult) -> None:
            if result.seed is None and requests[index].seed is not None:
                result = dataclasses.replace(result, seed=requests[index].seed)
            try:
                if budget is not None:
                    budget.record(requests[index], result)
                stored = cache.store(keys[index], identity, requests[index], result) if cache is not None else None
            except CacheUnavailable as exc:
                # The cache's database went away with the answer in flight: it is not stored, so it is reported
                # as an error (a rerun asks it again), never as an answer the cache does not hold.
                stored, result = None, dataclasses.replace(result, text=None, outcome="error",
                                                           message=f"not stored: {exc}")
                queue.stop(f"the response cache is unavailable: {exc}")  # what it would ask could not be stored
            queue.finished(index, stored is not None)
            # The table gets what the cache holds: another process's answer when it stored one first.
            if stored is not None and stored is not result:
                result = dataclasses.replace(stored, latency_s=result.latency_s)
            settle(index, result)

        returned = False
        try:
            self._generate_from(queue, on_result)
            returned = True
        finally:
            queue.close()
            never_asked = queue.unanswered()
            if budget is not None and returned and never_asked:
                budget.refund(len(never_asked))  # counted when handed out, but the backend stopped before them
        return queue

    def _generate_through_batches(self, requests: Sequence[GenerationRequest], leaders: Mapping[str, int],
                                  settle: ResultCallback, results: Sequence[GenerationResult | None], *,
                                  identity: Mapping[str, Any], cache: Cache,
                                  budget: Budget | None) -> tuple[str | None, "BatchesPending | None"]:
        """Send the uncached `leaders` (key → index) through the provider's batch API (`BatchDriver`), settle each
        with what the cache holds (or its error row), and say why it stopped early: (halt reason, pending)."""
        from sctc_assets.lib.batch_driver import BatchDriver, batch_wait_mode

        queue_halted: list[str] = []

        def sync_ask(lines: list[BatchLine]) -> None:
            # Lines a batch failed, few enough to ask one by one: the ordinary path. A line of another run's batch
            # (collected here) has no index of this call: it is asked and stored all the same.
            line_requests = [line.request for line in lines]
            line_keys = [line.custom_id for line in lines]

            def settle_line(position: int, result: GenerationResult) -> None:
                index = leaders.get(line_keys[position])
                if index is not None:
                    settle(index, result)

            queue = self._ask_through_queue(range(len(lines)), line_requests, line_keys, settle_line,
                                            identity=identity, cache=cache, budget=budget,
                                            chunk_size=self.claim_chunk_size())
            if queue.halted:
                queue_halted.append(queue.halted)

        context = self._batch_context
        client = self.batch_client()
        driver = BatchDriver(
            cache, client, identity=identity, model=str(identity.get("model", "")),
            poll_s=float(getattr(self, "batch_poll_seconds", 60.0)),
            retry_sync_max=int(getattr(self, "batch_retry_sync_max", 20)),
            max_rounds=int(getattr(self, "batch_max_rounds", 3)),
            price_factor=float(getattr(self, "batch_price_factor", 0.5)), pricing=self.pricing(),
            wait=batch_wait_mode(), on_progress=self._batch_progress or _print_progress, halt=stop_reason,
            budget=budget, registry_key=context.get("registry_key"), partitions=context.get("partitions", ()))
        lines = [BatchLine(key, requests[index]) for key, index in leaders.items()]
        try:
            outcome = driver.run(lines, sync_ask)
        finally:
            close = getattr(client, "close", None)  # the provider clients hold a connection and an event loop thread
            if close is not None:
                close()
        del lines
        self._batch_outcome = outcome
        for key, result in outcome.failed.items():
            settle(leaders[key], result)
        # What the batches answered is read back from the cache, a chunk at a time (never all results at once
        # beyond the table being built); an answer this run's batches brought is new, not cached.
        unsettled = [key for key, index in leaders.items() if results[index] is None]
        for start in range(0, len(unsettled), 500):
            chunk = unsettled[start : start + 500]
            for key, result in cache.get_many(chunk).items():
                if result.batch_id is not None and result.batch_id in outcome.collected:
                    result = dataclasses.replace(result, cached=False)
                settle(leaders[key], result)
        notes = []
        if outcome.lines_submitted or outcome.joined:
            notes.append(f"batches: {outcome.batches_submitted} submitted ({outcome.lines_submitted} lines), "
                         f"{outcome.joined} lines collected from batches already open, {outcome.stored} answers "
                         f"and {outcome.refused} refusals stored, {outcome.errors} errors, "
                         f"{outcome.retried_sync + outcome.retried_batch} lines retried")
        faults = {"lines of expired or cancelled batches": outcome.expired_lines,
                  "results files without every line": outcome.cut_files,
                  "batches failed as a whole": outcome.failed_batches,
                  "result lines for requests never sent (skipped)": outcome.unknown_lines,
                  "failed polls or downloads (tried again)": outcome.poll_failures,
                  "failed submissions (resolved through the provider's batch list)": outcome.submit_failures,
                  "recorded batches that never reached the provider (resubmitted)": outcome.abandoned}
        if any(faults.values()):
            notes.append("batch faults handled: " + ", ".join(f"{count} {what}" for what, count in faults.items()
                                                               if count))
        self._notes += notes
        pending = None
        if outcome.open_local_ids and (outcome.halted is None or driver.wait == "detach"):
            # Detached (a UI or daemon run): the run waits for its batches even when the budget stopped further
            # submissions; the rerun the sensor requests collects them and halts on the budget then.
            pending = BatchesPending(outcome.open_local_ids, outcome.open_provider_ids, answered=0, remaining=0)
        reason = outcome.halted or (queue_halted[0] if queue_halted else None)
        if reason is not None and outcome.open_local_ids and pending is None:
            reason = (f"{reason}; {len(outcome.open_local_ids)} batch(es) left running at the provider "
                      f"({', '.join(outcome.open_local_ids)}): the same command collects them")
        return reason, pending

    def _answered_meanwhile(self, cache: Cache, keys: Sequence[str], results: list[GenerationResult | None],
                            followers: dict[int, list[int]], poll_s: float = 0.25) -> None:
        """Replace each error result whose key the cache now holds by the cached answer: a call that failed here
        releases its claim, and another process on the same model may have taken the key over and stored an answer
        since. The table then shows that answer, not an error a rerun would find answered. A key another process is
        asking right now (a live claim) is waited for, at most one claim lease (`claim_lease_s`), unless halted."""
        failed = [index for index in followers if results[index] is not None and results[index].outcome == "error"]
        if not failed:
            return
        owner, hits = new_claim_owner(), {}
        waiting = list(dict.fromkeys(keys[index] for index in failed))
        deadline = time.monotonic() + claim_lease_s()
        try:
            while waiting:
                # A claim both reads the answers and tells the keys others hold; what it claims is let go at once.
                outcome = cache.claim(waiting, owner, lease_s=claim_lease_s())
                if outcome.claimed:
                    cache.release_claims(owner, outcome.claimed)
                hits.update(outcome.answered)
                waiting = outcome.held
                if not waiting or time.monotonic() >= deadline or self.halt_reason() is not None:
                    break
                time.sleep(poll_s)
        except CacheUnavailable:
            pass  # the errors not yet replaced stand; a rerun asks them again
        for index in failed:
            if keys[index] in hits:
                results[index] = hits[keys[index]]
                for target in followers[index]:
                    results[target] = dataclasses.replace(hits[keys[index]])

    def _trial_notes(self, requests: Sequence[GenerationRequest]) -> list[str]:
        trials = 1 + max((request.trial for request in requests), default=0)
        if trials < 2 or not self.trials_are_repeats():
            return []
        return [f"temperature 0: the {trials} trials per prompt repeat one request, they are not independent "
                "samples (their spread shows only the endpoint's nondeterminism); set a temperature above 0 to "
                "sample"]

    def score_continuations(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[float]:
        """Sum of log-probabilities of each continuation given its prompt (teacher forcing), if supported."""
        raise NotImplementedError(f"the {self.backend_name} backend cannot give log-probabilities")

    def scoring_identity(self) -> dict[str, Any]:
        """What distinguishes this backend's log-probabilities in the cache (default: the generation identity)."""
        return self.identity()

    def score(
        self,
        prompts: Sequence[str],
        continuations: Sequence[str],
        *,
        cache: Cache | None = None,
        progress: ProgressCallback | None = None,
        chunk_size: int = 64,
    ) -> list[tuple[float, bool]]:
        """`score_continuations` through the cache: (log-probability, whether it came from the cache) per pair.

        Pairs are computed in chunks and each chunk is stored at once, so an interrupted partition keeps what it
        computed; repeated pairs are computed once.
        """
        if len(prompts) != len(continuations):
            raise ValueError(f"{len(prompts)} prompts but {len(continuations)} continuations")
        identity = self.scoring_identity()
        keys = [score_key(identity, prompt, continuation) for prompt, continuation in zip(prompts, continuations)]
        known = cache.get_scores(list(dict.fromkeys(keys))) if cache is not None else {}
        cached = set(known)
        first_of_key: dict[str, int] = {}
        for index, key in enumerate(keys):
            if key not in known:
                first_of_key.setdefault(key, index)
        todo = list(first_of_key.values())
        total = len(keys)
        if progress is not None:
            progress(total - len(todo), total)
        for start in range(0, len(todo), chunk_size):
            chunk = todo[start : start + chunk_size]
            values = self.score_continuations([prompts[i] for i in chunk], [continuations[i] for i in chunk])
            for index, value in zip(chunk, values):
                known[keys[index]] = value
                if cache is not None and not math.isnan(value):
                    cache.put_score(keys[index], identity, prompts[index], continuations[index], value)
            if progress is not None:
                progress(total - len(todo) + start + len(chunk), total)
        return [(known[key], key in cached) for key in keys]
