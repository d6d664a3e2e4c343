"""The one interface every model backend implements, and the cache logic they all share.

A backend is a Dagster `ConfigurableResource` whose fields are the settings of one registry entry. Subclasses
implement `identity()` (what distinguishes their answers in the cache) and `_generate_uncached()` (the real
calls); `generate()` serves cached answers first and stores each new answer the moment it arrives, so a crash or a
retried partition never pays twice.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from typing import Any, Callable, ClassVar, Sequence

import dagster as dg

from sctc_assets.lib.cache import ResponseCache, cache_key, score_key
from sctc_assets.lib.generation import GenerationRequest, GenerationResult

ProgressCallback = Callable[[int, int], None]
ResultCallback = Callable[[int, GenerationResult], None]


class BackendUnavailable(RuntimeError):
    """The backend cannot serve this request at all (missing API key, missing weights): a configuration problem."""


class ModelBackend(dg.ConfigurableResource):
    """Base class: subclasses set `backend_name` and implement `identity` and `_generate_uncached`."""

    backend_name: ClassVar[str] = "base"
    # Replay backends read published answers; caching them would only duplicate the upstream files.
    uses_cache: ClassVar[bool] = True
    # Whether `score_continuations` (teacher-forced log-probabilities) is implemented.
    supports_logprobs: ClassVar[bool] = False

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

    def generate(
        self,
        requests: Sequence[GenerationRequest],
        *,
        cache: ResponseCache | None = None,
        progress: ProgressCallback | None = None,
    ) -> list[GenerationResult]:
        results: list[GenerationResult | None] = [None] * len(requests)
        total, done = len(requests), 0
        identity = self.identity()
        keys: list[str] = []
        if cache is not None and self.uses_cache:
            keys = [cache_key(identity, request) for request in requests]
            hits = cache.get_many(list(dict.fromkeys(keys)))
            for index, key in enumerate(keys):
                if key in hits:
                    results[index] = hits[key]
                    done += 1
        if progress is not None:
            progress(done, total)
        pending = [index for index, result in enumerate(results) if result is None]
        if pending:
            # Repeated identical requests (same messages and trial) are asked once.
            unique: dict[str, int] = {}
            for index in pending:
                unique.setdefault(keys[index] if keys else str(index), index)
            to_ask = list(unique.values())
            followers: dict[int, list[int]] = {index: [] for index in to_ask}
            for index in pending:
                leader = unique[keys[index] if keys else str(index)]
                if leader != index:
                    followers[leader].append(index)

            lock = threading.Lock()  # backends may answer from worker threads

            def on_result(position: int, result: GenerationResult) -> None:
                nonlocal done
                index = to_ask[position]
                if cache is not None and self.uses_cache:
                    cache.put(keys[index], identity, requests[index], result)
                with lock:
                    results[index] = result
                    # Repeats were paid for once: report them as cached so usage is not counted twice.
                    for target in followers[index]:
                        results[target] = dataclasses.replace(result, cached=True)
                    done += 1 + len(followers[index])
                    if progress is not None:
                        progress(done, total)

            started = time.monotonic()
            self._generate_uncached([requests[index] for index in to_ask], on_result)
            missing = [index for index in to_ask if results[index] is None]
            if missing:
                raise RuntimeError(
                    f"{type(self).__name__} returned no result for {len(missing)} of {len(to_ask)} requests"
                    f" (after {time.monotonic() - started:.1f}s)"
                )
        return [result for result in results if result is not None]

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
        cache: ResponseCache | None = None,
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
