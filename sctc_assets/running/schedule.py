"""`sctc run`'s stages as tasks for worker processes, so the CPU-bound ones use every core.

Each benchmark of the run is four kinds of task: the inputs its models read (then its partitioned inputs), its
other inputs (`Runner.input_groups`: Table 37's tokenizers, say), one task per model (the model's partitions, then
its per-model stage), and its cross-model stage. The other inputs and the models' tasks are ready once the first
inputs are done, the cross-model task once all of those are. Ready tasks go to the forked workers of
`sctc_assets.running.processes`: inputs first (they unlock the most), then the other inputs (the longest tasks),
then cross-model tasks, then models, those of the benchmark closest to its cross-model stage first (on a tie, of the
benchmark named first). So one benchmark's models run while another computes its inputs, a cross-model stage runs
beside the next benchmark's models, and every core stays busy until the last cross-model stage.

Models whose backend class is `forkable` (the replays: published answers, pure CPU work) and the model-independent
stages go to the workers. Every other model stays in this process (a local model: one in memory at a time, and
torch's thread pools must not be forked; an API model: its stages wait on the network, which threads overlap), run
by one thread of this process, one benchmark after another, exactly as `Runner.run` runs them (`run_models`: API
models behind different endpoints concurrently, each endpoint's limit kept).

Each process keeps one staleness resolver per benchmark for its model tasks (`Runner.staleness`), made after the
benchmark's inputs (as `Runner.run` does); each cross-model task gets a fresh one. A stop request (Ctrl-C, SIGTERM)
hands out no further task; the tasks under way end as they would in `Runner.run`, and the benchmarks whose tasks
were left say they were interrupted. An exception a task raised (not a failed stage: that is in its report) is
raised once every task has ended, the first in the order of the run's benchmarks and stages.
"""

from __future__ import annotations

import os
import queue
import threading
from contextlib import nullcontext
from typing import Any, Callable, Sequence

import dagster as dg

from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.interrupt import stop_reason
from sctc_assets.running.runner import BenchmarkWork, Runner, RunReport
from sctc_assets.running.concurrent import concurrent_models_enabled, run_models
from sctc_assets.running.processes import (TaskFailed, WorkerPool, WorkerProcessError, in_forked_process,
                                            worker_processes)
from sctc_assets.running.unchanged import Staleness

_PRIORITY = {"inputs": 0, "side_inputs": 1, "cross": 2, "model": 3}


def workers_for(instance: dg.DagsterInstance) -> int:
    """How many worker processes a run on `instance` uses: none (0) where this process cannot fork, the instance
    lives in memory only (a child's runs would be lost with it) or concurrency is off (`$SCTC_CONCURRENT_MODELS`)."""
    if not hasattr(os, "fork") or not instance.is_persistent or not concurrent_models_enabled():
        return 0
    return worker_processes()


def run_in_workers(runner: Runner, works: Sequence[BenchmarkWork], processes: int,
                   before_cross: Callable[[BenchmarkWork], None] = lambda work: None) -> list[RunReport]:
    """The stages of `works` over `processes` forked workers and this process; one report per benchmark.
    `before_cross(work)` runs in this process once a benchmark's cross-model task is handed out (unless a stop
    was requested)."""
    runner.prepare_run(works)
    configs = [work.spec.config(work.options) for work in works]
    groups = [runner.input_groups(work.spec) for work in works]
    # the backends whose class says so (`forkable`: CPU work on published answers) run in the forked workers
    forkable = [[model for model in work.models if traits(runner.backend_of(model)).forkable] for work in works]

    def work(task: tuple[int, str, Any]) -> Any:
        index, kind, argument = task
        spec, config = works[index].spec, configs[index]
        if kind == "inputs":
            return runner.run_inputs(spec, works[index].options, groups[index][0])
        if kind == "side_inputs":  # materialized in a process of their own: what they load leaves with it
            return runner.run_side_inputs(spec, works[index].options, groups[index][1],
                                          isolate=lambda stage: in_forked_process(stage, runner.after_fork))
        if kind == "model":
            return runner.run_model(spec, argument, config, nullcontext, runner.staleness(spec.name))
        return runner.run_cross(spec, works[index].models, config, argument, Staleness(runner.defs, runner.instance))

    schedule = _Schedule(runner, works, configs, forkable, [bool(second) for _, second in groups], before_cross)
    return schedule.run(WorkerPool(processes, work, runner.after_fork))


class _Schedule:
    """The dispatcher: which task is ready, who runs it, and what each report holds."""

    def __init__(self, runner: Runner, works: Sequence[BenchmarkWork], configs: list[dict],
                 forkable: list[list[str]], side_inputs: list[bool], before_cross: Callable[[BenchmarkWork], None]):
        self.runner, self.works, self.configs, self.forkable = runner, works, configs, forkable
        self.before_cross = before_cross
        self.side_inputs = side_inputs  # whether a benchmark has inputs its models do not read
        self.reports = [RunReport() for _ in works]
        self.ready: list[tuple[int, int, int, str, Any]] = []  # (priority, order, benchmark index, kind, argument)
        self.order = 0
        self.left = [0] * len(works)  # tasks of each benchmark that its cross-model task waits for
        self.open = set(range(len(works)))  # benchmarks that may still add tasks (their cross-model one not yet)
        self.errors: dict[tuple[int, int, str], BaseException] = {}
        self.local: queue.Queue = queue.Queue()  # (order, index, report or exception) from the local models' thread
        self.local_batches: queue.Queue = queue.Queue()
        self.local_running = 0

    def _add(self, index: int, kind: str, argument: Any = None) -> None:
        self.ready.append((_PRIORITY[kind], self.order, index, kind, argument))
        self.order += 1
        if kind == "cross":
            self.open.discard(index)

    def run(self, pool: WorkerPool) -> list[RunReport]:
        thread = threading.Thread(target=self._local_models, name="sctc-local-models", daemon=True)
        thread.start()
        try:
            for index in range(len(self.works)):
                self._add(index, "inputs")
            while self.ready or pool.busy or self.local_running:
                if stop_reason() is not None:
                    self._drop_ready()
                crossing = []
                while self.ready and pool.idle:
                    self.ready.sort(key=self._urgency)
                    _, order, index, kind, argument = self.ready.pop(0)
                    pool.submit((order, index, kind, argument), (index, kind, argument))
                    if kind == "cross":
                        crossing.append(index)
                if self.ready and not pool.idle and not pool.busy:  # every worker died
                    for _, order, index, kind, argument in self.ready:
                        self.errors[(index, order, kind)] = WorkerProcessError("no worker process left")
                    self.ready.clear()
                if not self.ready and not self.open:
                    pool.release_idle()
                for index in crossing:
                    if stop_reason() is None:
                        self.before_cross(self.works[index])
                for (order, index, kind, argument), result in pool.wait(0.2):
                    self._done(order, index, kind, argument, result)
                while not self.local.empty():
                    self.local_running -= 1
                    order, index, result = self.local.get()
                    self._done(order, index, "model", None, result)
        finally:
            self.local_batches.put(None)
            pool.close()
        if self.errors:
            raise self.errors[min(self.errors)]
        return self.reports

    def _urgency(self, task: tuple[int, int, int, str, Any]) -> tuple[int, int, int, int]:
        """Which ready task goes first: by kind (see the module docstring); models of the benchmark with the fewest
        tasks left before its cross-model stage first (so that stage starts early and overlaps the other
        benchmarks' models instead of running alone at the end), of the benchmark named first on a tie; then in the
        order they became ready."""
        priority, order, index, kind, _ = task
        return (priority, self.left[index], index, order) if kind == "model" else (priority, 0, 0, order)

    def _drop_ready(self) -> None:
        for _, _, index, _, _ in self.ready:
            self.reports[index].interrupted = self.reports[index].interrupted or stop_reason()
        self.ready.clear()
        self.open.clear()  # nothing further is handed out

    def _done(self, order: int, index: int, kind: str, argument: Any, result: Any) -> None:
        if isinstance(result, BaseException | TaskFailed):
            self.errors[(index, order, kind)] = result if isinstance(result, BaseException) else WorkerProcessError(
                f"{self.works[index].spec.name} {kind}{f' {argument}' if kind == 'model' else ''}: {result.message}")
            if kind in ("model", "side_inputs"):
                self._before_cross_done(index)
            else:
                self.open.discard(index)
            return
        if kind == "inputs":
            report, go_on = result
            self.reports[index].merge(report)
            if go_on:
                self._models_ready(index)
            else:
                self.open.discard(index)
            return
        self.reports[index].merge(result)
        if kind in ("model", "side_inputs"):
            self._before_cross_done(index)

    def _models_ready(self, index: int) -> None:
        work = self.works[index]
        forked = [model for model in work.models if model in self.forkable[index]]
        kept = [model for model in work.models if model not in forked]
        self.left[index] = len(work.models) + self.side_inputs[index]
        if self.side_inputs[index]:
            self._add(index, "side_inputs")
        for model in forked:
            self._add(index, "model", model)
        if kept:
            self.local_running += len(kept)
            self.local_batches.put((self.order, index, kept))
            self.order += 1
        if not self.left[index]:
            self._add(index, "cross", set())

    def _before_cross_done(self, index: int) -> None:
        self.left[index] -= 1
        if self.left[index] == 0:
            self._add(index, "cross", set(self.reports[index].ran))

    def _local_models(self) -> None:
        """The models that stay in this process, a benchmark's at a time (see the module docstring)."""
        while True:
            batch = self.local_batches.get()
            if batch is None:
                return
            order, index, models = batch
            spec, config = self.works[index].spec, self.configs[index]
            runner = self.runner

            def one(model: str, slot: Any) -> RunReport:
                return runner.run_model(spec, model, config, slot, runner.staleness(spec.name))

            try:
                reports = run_models(models, runner.endpoints(models), one)
            except BaseException as exc:  # raised once every task has ended
                self.local.put((order, index, exc))
                reports = [RunReport() for _ in models[1:]]
            for report in reports:
                self.local.put((order, index, report))


def run_all(runner: Runner, works: Sequence[BenchmarkWork],
            before_cross: Callable[[BenchmarkWork], None] = lambda work: None) -> list[RunReport]:
    """Several benchmarks: their stages spread over worker processes where this process may fork them
    (`before_cross(work)` is called in this process when a benchmark's last stage, the cross-model one, starts: the
    export of its other tables then overlaps it), else one benchmark after another, stopping after an interrupted
    one."""
    processes = workers_for(runner.instance)
    if processes > 1:
        return run_in_workers(runner, works, processes, before_cross)
    reports = []
    for work in works:
        reports.append(runner.run(work.spec, work.models, work.options))
        if reports[-1].interrupted is not None:
            break
    return reports
