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
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Optional, Sequence

import dagster as dg
from pydantic import PrivateAttr

from sctc_assets.lib.budget import Budget
from sctc_assets.lib.cache import Cache, CacheUnavailable, cache_key, new_claim_owner, score_key
# BackendUnavailable is defined in lib so that the embedded model's files (lib/embedded_model) can raise it without
# Dagster; backends import it from here.
from sctc_assets.lib.generation import (CACHEABLE_OUTCOMES, BackendUnavailable, GenerationRequest, GenerationResult,
                                        truncation_notes)
from sctc_assets.lib.interrupt import stop_reason
from sctc_assets.lib.work_queue import WAIT, WorkQueue, claim_lease_s

if TYPE_CHECKING:
    from sctc_assets.lib.estimate import TokenCounter

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
    _budget: Optional[Budget] = PrivateAttr(default=None)
    _notes: list = PrivateAttr(default_factory=list)

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

        queue = WorkQueue(
            list(leaders.values()), requests, keys, cache=cache if use_cache else None, owner=new_claim_owner(),
            on_cached=settle, halt=self.halt_reason, reserve=budget.reserve if budget is not None else None,
            chunk_size=self.claim_chunk_size() if use_cache else len(pending), lease_s=claim_lease_s(),
        )

        def on_result(index: int, result: GenerationResult) -> None:
            if result.seed is None and requests[index].seed is not None:
                result = dataclasses.replace(result, seed=requests[index].seed)
            try:
                if budget is not None:
                    budget.record(requests[index], result)
                stored = cache.store(keys[index], identity, requests[index], result) if use_cache else None
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

        started = time.monotonic()
        returned = False
        try:
            self._generate_from(queue, on_result)
            returned = True
        finally:
            queue.close()
            never_asked = queue.unanswered()
            if budget is not None and returned and never_asked:
                budget.refund(len(never_asked))  # counted when handed out, but the backend stopped before them
        if use_cache:
            self._answered_meanwhile(cache, keys, results, followers, queue.poll_s)
        if budget is not None:
            self._notes += budget.notes()
        reason = queue.halted or (self.halt_reason() if any(result is None for result in results) else None)
        missing = [index for index in leaders.values() if results[index] is None]
        if reason is not None and (missing or queue.halted):
            answered = sum(result is not None and result.outcome in CACHEABLE_OUTCOMES for result in results)
            raise GenerationHalted(reason, answered=answered, remaining=total - answered)
        if missing:
            raise RuntimeError(
                f"{type(self).__name__} returned no result for {len(missing)} of {len(leaders)} requests"
                f" (after {time.monotonic() - started:.1f}s)"
            )
        self._notes += truncation_notes(results)  # type: ignore[arg-type]
        return results  # type: ignore[return-value]

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
