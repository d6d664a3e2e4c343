"""Hands out the requests one `generate()` call still has to ask, claiming them in the response cache as it goes.

Keys are claimed a chunk at a time (about the backend's concurrency), not all up front, so two processes on one
model split the work between them instead of one waiting for the other's whole partition. A key another process
has claimed is not asked here: the queue waits for its answer and serves it from the cache, or takes the key over
when the claim lapses (the owner died, or released it after an error). Before each new call the queue asks
`halt()` (Ctrl-C, a budget) and reserves the call in the budget; once halted it hands out nothing more.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable, Sequence

from sctc_assets.lib.cache import Cache, CacheUnavailable
from sctc_assets.lib.generation import GenerationRequest, GenerationResult

# `take` returns WAIT when every key left is being asked by another process: call again after `poll_s`.
WAIT = "wait"

Item = tuple[int, GenerationRequest]
# How long a claim holds a key without renewal (it is renewed every third of it while its owner works): the longest
# another host waits for a key whose owner died without releasing it.
LEASE_ENV = "SCTC_CLAIM_LEASE_S"
DEFAULT_LEASE_S = 60.0


def claim_lease_s() -> float:
    """`$SCTC_CLAIM_LEASE_S` (seconds, > 0), else 60."""
    try:
        value = float(os.environ.get(LEASE_ENV) or DEFAULT_LEASE_S)
    except ValueError:
        return DEFAULT_LEASE_S
    return value if value > 0 else DEFAULT_LEASE_S


class WorkQueue:
    def __init__(
        self,
        indices: Sequence[int],
        requests: Sequence[GenerationRequest],
        keys: Sequence[str],
        *,
        cache: Cache | None,
        owner: str,
        on_cached: Callable[[int, GenerationResult], None],
        halt: Callable[[], str | None] = lambda: None,
        reserve: Callable[[int], int] | None = None,
        chunk_size: int = 64,
        lease_s: float = 60.0,
        poll_s: float = 0.25,
    ):
        self._requests, self._keys = requests, keys
        self._cache, self._owner = cache, owner
        self._on_cached, self._halt, self._reserve = on_cached, halt, reserve
        self.chunk_size = max(1, chunk_size)
        self.lease_s, self.poll_s = lease_s, poll_s
        self._todo: list[int] = list(indices)
        self._claimed: list[int] = []  # claimed here, not yet handed out
        self._waiting: list[int] = []  # claimed by another process
        self._handed: set[int] = set()  # handed out, no result yet
        self._last_poll = 0.0
        self._lock = threading.RLock()
        self.halted: str | None = None
        self.asked = 0  # calls handed out
        self.served_by_others = 0  # answers another process stored while this one waited
        self._stop_renewing = threading.Event()
        self._renewer: threading.Thread | None = None
        if cache is not None and self._todo:
            self._renewer = threading.Thread(target=self._renew, name="claim-renewal", daemon=True)
            self._renewer.start()

    # --- handing out work ------------------------------------------------------------------------------------------

    def take(self) -> Item | str | None:
        """The next request to ask, WAIT, or None when nothing is left (or the run is halted)."""
        chunk = self.take_chunk(1)
        return chunk[0] if isinstance(chunk, list) else chunk

    def take_chunk(self, size: int) -> list[Item] | str | None:
        """Up to `size` requests to ask now, WAIT, or None when nothing is left (or the run is halted)."""
        with self._lock:
            if self.halted is not None or not (self._claimed or self._todo or self._waiting):
                return None
            reason = self._halt()
            if reason is not None:
                self.halted = reason
                return None
            while True:
                if self._claimed:
                    return self._hand_out(size)
                if self._todo:
                    self._claim_next_chunk()
                    continue
                if self._waiting:
                    if not self._poll_waiting():
                        return WAIT
                    continue
                return None

    def _hand_out(self, size: int) -> list[Item] | None:
        wanted = min(size, len(self._claimed))
        granted = self._reserve(wanted) if self._reserve is not None else wanted
        if granted <= 0:
            self.halted = self._halt() or "the budget is spent"
            return None
        chosen, self._claimed = self._claimed[:granted], self._claimed[granted:]
        self._handed.update(chosen)
        self.asked += len(chosen)
        return [(index, self._requests[index]) for index in chosen]

    def _claim_next_chunk(self) -> None:
        chunk, self._todo = self._todo[: self.chunk_size], self._todo[self.chunk_size :]
        if self._cache is None:
            self._claimed.extend(chunk)
            return
        self._apply_claim(chunk)

    def _poll_waiting(self) -> bool:
        """Check the keys others are asking; True when any resolved (answered or taken over)."""
        now = time.monotonic()
        if now - self._last_poll < self.poll_s:
            return False
        self._last_poll = now
        waiting, self._waiting = self._waiting, []
        before = len(waiting)
        self._apply_claim(waiting, from_others=True)
        return len(self._waiting) < before

    def _apply_claim(self, indices: list[int], *, from_others: bool = False) -> None:
        by_key: dict[str, int] = {self._keys[index]: index for index in indices}
        outcome = self._cache.claim(list(by_key), self._owner, lease_s=self.lease_s)
        for key, result in outcome.answered.items():
            if from_others:
                self.served_by_others += 1
            self._on_cached(by_key[key], result)
        self._claimed.extend(by_key[key] for key in outcome.claimed)
        self._waiting.extend(by_key[key] for key in outcome.held)

    def stop(self, reason: str) -> None:
        """Hand out nothing more (the response cache went away: a new answer could not be stored)."""
        with self._lock:
            if self.halted is None:
                self.halted = reason

    # --- results ---------------------------------------------------------------------------------------------------

    def finished(self, index: int, stored: bool) -> None:
        """A handed-out request has its result; an unstored one (an error) is released for others to take over."""
        with self._lock:
            self._handed.discard(index)
        if not stored and self._cache is not None:
            try:
                self._cache.release_claims(self._owner, [self._keys[index]])
            except CacheUnavailable:
                pass  # the database is away: the claim lapses with its lease

    def unanswered(self) -> list[int]:
        """Handed out but without a result (the backend stopped early)."""
        with self._lock:
            return sorted(self._handed)

    def close(self) -> None:
        """Stop renewing and release every claim still held, so other processes take those keys over at once."""
        self._stop_renewing.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        if self._cache is not None:
            try:
                self._cache.release_claims(self._owner)
            except CacheUnavailable:
                pass  # the database is away: the claims lapse with their lease

    def _renew(self) -> None:
        while not self._stop_renewing.wait(self.lease_s / 3):
            try:
                self._cache.renew_claims(self._owner, lease_s=self.lease_s)
            except Exception:  # a locked or closed database: the next round tries again, the lease has slack
                continue
