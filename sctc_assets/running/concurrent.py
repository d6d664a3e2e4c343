"""Many models at once in `sctc run`: the partitions of API models behind different endpoints run concurrently.

Each API model (a backend whose class names an endpoint: `ModelBackend.endpoint_lane`, e.g. `openai`'s base URL)
gets a thread of its own, which runs that model's stages in order, as the
sequential path does (one in-process Dagster run at a time for that model). Before each partition stage that asks
the model, the thread takes a slot of the model's endpoint (its base URL): at most `$SCTC_STAGES_PER_ENDPOINT`
(default 1) such stages per endpoint at once, so two models behind one server never double its load, while the
backend's own `concurrency` setting still bounds the requests inside a stage. Local models and replays share one
more thread and run one after another, as before: one local model in memory at a time, and replays (CPU-bound)
do not compete with each other for the cores. `$SCTC_CONCURRENT_MODELS=0` runs every model on the calling thread,
one after another (the path before this module).

Why threads and not Dagster's multiprocess executor: a Dagster run has one partition key (or one range of one
asset), so partitions of different models are different runs either way, and a run in a new process pays the
import of the definitions and a step process per step (`bench/multi_endpoint.py` prints both costs). The stages
wait on the network, not on the CPU, so threads in one process overlap them at no extra cost, and everything
`sctc run` keeps across stages stays one object: the response cache and its claims, the budget ledger (its
scope is the run's, `$SCTC_BUDGET_SCOPE`), the stop request of Ctrl-C (`lib/interrupt.py`, process-wide) and the
run report, which is merged from the models' own reports in the order the models were given.

The calling thread only waits, in bounded joins, so Ctrl-C and SIGTERM still reach `sctc run`'s handlers: every
backend stops starting calls, what is in flight is stored, and no thread starts a new stage.
"""

from __future__ import annotations

import os
import threading
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, TypeVar

from sctc_assets.backends import backend_class

STAGES_PER_ENDPOINT_ENV = "SCTC_STAGES_PER_ENDPOINT"
CONCURRENT_ENV = "SCTC_CONCURRENT_MODELS"
DEFAULT_STAGES_PER_ENDPOINT = 1

T = TypeVar("T")
Slot = Callable[[], AbstractContextManager]


class ConcurrencyError(ValueError):
    """A concurrency setting in the environment is not what it must be."""


def endpoint_of(entry: Any) -> str | None:
    """Where an API model's calls go, as its backend class says from the entry's settings (`endpoint_lane`: the
    `openai` backend's base URL, without a trailing slash); None for local models and replays, and for a backend
    that cannot be loaded (its stage then fails with the registry's message)."""
    backend = getattr(entry, "backend", None)
    if backend is None:
        return None
    try:
        cls = backend_class(backend)
    except (ImportError, ValueError):
        return None
    return cls.endpoint_lane(getattr(entry, "settings", None) or {})


def stages_per_endpoint() -> int:
    raw = os.environ.get(STAGES_PER_ENDPOINT_ENV, "").strip()
    if not raw:
        return DEFAULT_STAGES_PER_ENDPOINT
    if not raw.isdigit() or int(raw) < 1:
        raise ConcurrencyError(f"${STAGES_PER_ENDPOINT_ENV}={raw!r}: expected a whole number of at least 1")
    return int(raw)


def concurrent_models_enabled() -> bool:
    return os.environ.get(CONCURRENT_ENV, "1").strip().lower() not in {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Lane:
    """Models run one after another on one thread; `endpoint` is None for the lane of local models and replays."""

    models: tuple[str, ...]
    endpoint: str | None


def plan_lanes(models: Sequence[str], endpoints: Mapping[str, str | None]) -> list[Lane]:
    """One lane per API model, and one for all the others (in the order given). `endpoints`: model → its endpoint
    (None, or absent: local or replay)."""
    local = tuple(model for model in models if endpoints.get(model) is None)
    lanes = [Lane((model,), endpoints[model]) for model in models if endpoints.get(model) is not None]
    return ([Lane(local, None)] if local else []) + lanes


def run_models(models: Sequence[str], endpoints: Mapping[str, str | None],
               work: Callable[[str, Slot], T]) -> list[T]:
    """`work(model, slot)` for every model, API models concurrently; the results in the order of `models`.

    `work` takes `slot()` (a context manager) around each stage that asks the model: for an API model it waits
    for a free slot of the model's endpoint. An exception raised by `work` for one model does not stop the others;
    the first one (in the order of `models`) is raised once every lane has ended.
    """
    if not concurrent_models_enabled() or not any(endpoints.get(model) for model in models):
        return [work(model, nullcontext) for model in models]
    limit = stages_per_endpoint()
    semaphores = {endpoint: threading.BoundedSemaphore(limit) for endpoint in set(endpoints.values()) if endpoint}
    results: dict[str, T] = {}
    errors: dict[str, BaseException] = {}

    def run_lane(lane: Lane) -> None:
        slot: Slot = (lambda: semaphores[lane.endpoint]) if lane.endpoint is not None else nullcontext
        for model in lane.models:
            try:
                results[model] = work(model, slot)
            except BaseException as exc:  # handed to the calling thread
                errors[model] = exc

    threads = [threading.Thread(target=run_lane, args=(lane,), name=f"sctc-models-{number}", daemon=True)
               for number, lane in enumerate(plan_lanes(models, endpoints))]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)  # a bounded wait lets the calling (main) thread run signal handlers promptly
    for model in models:
        if model in errors:
            raise errors[model]
    return [results[model] for model in models]


def share_yaml_log_handlers(instance: Any) -> None:
    """Build the instance's `python_logs` handlers once, here, instead of at the start of every run.

    Dagster 1.13 rebuilds them for each run with `logging.config.dictConfig` whenever the instance has a
    dagster.yaml (`sctc` always writes one), and dictConfig closes every handler of the process while holding
    logging's module lock; a run on another thread that is emitting an event holds its handler's lock and waits
    for the module lock (SQLAlchemy's `getLogger`): the two threads deadlock. Runs of one `sctc run` can share
    one set of handlers, so the instance returns the same list every time.
    """
    handlers = list(instance.get_yaml_python_handlers())
    instance.get_yaml_python_handlers = lambda: handlers
