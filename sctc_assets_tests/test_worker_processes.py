"""`sctc run`'s worker processes: the pool forwards results, failures and printed lines and survives a dead worker;
the schedule spreads replayed models' stages over the workers, keeps the other models in this process, and gives
the reports, runs and tables that one process gives."""

import os
import signal
import threading
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.lib.interrupt import clear_stop, request_stop
from sctc_assets.resources.io_manager import ParquetIOManager
from sctc_assets.running.runner import BenchmarkWork, Runner, export_tables
from sctc_assets.running.schedule import run_all
from sctc_assets.running.instance import PID_TAG, cli_instance
from sctc_assets.running.processes import PROCESSES_ENV, TaskFailed, WorkerPool, in_forked_process
from sctc_assets.running.schedule import workers_for
from sctc_assets.cli.validation import option_problems
from sctc_assets_tests.test_runner import (FAILING, MINI_JOBS, MINI_PLAN, _runs_by_status, _start_target, _wait_for,
                                           mini_answers, mini_prompts, mini_rates, mini_tests)


def _drain(pool: WorkerPool, expected: int) -> dict:
    results = {}
    while len(results) < expected:
        results.update(pool.wait(1.0))
    return results


def _task(task):
    kind, value = task
    if kind == "square":
        print(f"squaring {value} in {os.getpid()}")
        return value * value, os.getpid()
    if kind == "raise":
        raise ValueError(f"bad value {value}")
    os._exit(3)  # "die": the worker ends without reporting


def test_the_pool_runs_tasks_in_children_and_forwards_results_failures_and_printed_lines(capsys):
    pool = WorkerPool(2, _task)
    try:
        assert pool.idle == 2
        pool.submit("a", ("square", 3))
        pool.submit("b", ("raise", 7))
        results = _drain(pool, 2)
        pool.submit("c", ("square", 4))
        results.update(_drain(pool, 1))
    finally:
        pool.close()

    assert results["a"][0] == 9 and results["c"][0] == 16
    assert {results["a"][1], results["c"][1]} - {os.getpid()} == {results["a"][1], results["c"][1]}
    assert isinstance(results["b"], TaskFailed) and "ValueError: bad value 7" in results["b"].message
    printed = capsys.readouterr().out
    assert f"squaring 3 in {results['a'][1]}" in printed and f"squaring 4 in {results['c'][1]}" in printed


def _isolated(task):
    return in_forked_process(lambda: _task(task))


def test_a_task_s_forked_process_runs_its_work_and_the_worker_goes_on(capsys):
    pool = WorkerPool(1, lambda task: _isolated(task[1]) if task[0] == "isolated" else _task(task))
    try:
        pool.submit("worker", ("square", 2))
        results = _drain(pool, 1)
        for name, task in (("isolated", ("square", 3)), ("raises", ("raise", 8)), ("dies", ("die", 0))):
            pool.submit(name, ("isolated", task))
            results.update(_drain(pool, 1))
        pool.submit("after", ("square", 4))
        results.update(_drain(pool, 1))
    finally:
        pool.close()

    worker = results["worker"][1]
    assert results["isolated"][0] == 9 and results["isolated"][1] not in (worker, os.getpid())
    assert f"squaring 3 in {results['isolated'][1]}" in capsys.readouterr().out
    assert isinstance(results["raises"], TaskFailed) and "ValueError: bad value 8" in results["raises"].message
    assert isinstance(results["dies"], TaskFailed) and "(exit status 3)" in results["dies"].message
    assert results["after"] == (16, worker)  # the worker itself lived on


def test_a_dead_worker_fails_its_task_and_the_others_go_on():
    pool = WorkerPool(2, _task)
    try:
        pool.submit("dies", ("die", 0))
        pool.submit("lives", ("square", 5))
        results = _drain(pool, 2)
        assert pool.idle == 1  # the dead one takes no further task
        pool.submit("after", ("square", 6))
        results.update(_drain(pool, 1))
    finally:
        pool.close()

    assert isinstance(results["dies"], TaskFailed)
    assert "ended before reporting it (exit status 3)" in results["dies"].message
    assert results["lives"][0] == 25 and results["after"][0] == 36


class _Registry:
    """The registry's entries as the runner reads them: replays run in workers, the API model in this process."""

    def entries(self):
        return {"r1": SimpleNamespace(backend="replay", settings={}, benchmarks={}),
                "r2": SimpleNamespace(backend="replay", settings={}, benchmarks={}),
                "r3": SimpleNamespace(backend="replay", settings={}, benchmarks={}),
                "api": SimpleNamespace(backend="openai", settings={"base_url": "http://127.0.0.1:9/v1"},
                                       benchmarks={})}


MODELS = ["r1", "api", "r2", "r3"]


@pytest.fixture
def persistent(tmp_path, monkeypatch):
    io_manager = ParquetIOManager(base_dir=str(tmp_path / "storage"))
    defs = dg.Definitions(assets=[mini_prompts, mini_answers, mini_rates, mini_tests], jobs=MINI_JOBS,
                          resources={"io_manager": io_manager})
    FAILING["langs"] = set()
    clear_stop()
    monkeypatch.setenv(PROCESSES_ENV, "2")
    (tmp_path / "home").mkdir()
    instance = cli_instance(tmp_path / "home")
    yield defs, instance, io_manager, tmp_path
    FAILING["langs"] = set()
    clear_stop()
    instance.dispose()


def _runner(defs, instance, io_manager, lines=None):
    return Runner(defs, instance, {"io_manager": io_manager, "models": _Registry()},
                  log=(lines.append if lines is not None else lambda line: None))


def test_a_process_forked_from_a_worker_keeps_every_ancestor_s_instance(persistent):
    """`after_fork` in a worker and again in a process forked from it: both ancestors' instances stay referenced (a
    copied SQLite connection closed there would drop that process's locks on the file), and each process gets an
    instance of its own on the same files."""
    defs, instance, io_manager, _ = persistent
    runner = _runner(defs, instance, io_manager)
    assert instance.get_runs() == []  # the run storage's connection is open now
    runner.after_fork()
    worker = runner.instance
    runner.after_fork()
    assert [id(kept) for kept in runner._inherited_instances] == [id(instance), id(worker)]
    assert runner.instance not in (instance, worker) and runner.instance.get_runs() == []


def test_replayed_models_run_in_worker_processes_and_the_others_in_this_one(persistent):
    defs, instance, io_manager, tmp_path = persistent
    assert workers_for(instance) == 2
    FAILING["langs"] = {"r2/zh_hant"}

    [report] = run_all(_runner(defs, instance, io_manager), [BenchmarkWork(MINI_PLAN, MODELS, {"trials": 2})])

    assert report.failed_models == ["r2"]
    assert [failure.stage for failure in report.failures] == ["mini: r2/zh_hant"]
    runs = instance.get_runs()
    assert len(report.run_ids) == len(runs) == 1 + 2 * 4 + 3 + 1  # inputs, 4 × 2 langs, 3 per-model (r2 failed), cross
    pids = {(run.tags.get("sctc/model"), run.tags.get("sctc/lang")): run.tags[PID_TAG] for run in runs}
    assert pids[("api", "zh_hans")] == pids[("api", None)] == str(os.getpid())
    workers = {pids[(model, "zh_hans")] for model in ("r1", "r2", "r3")} | {pids[(None, None)]}
    assert str(os.getpid()) not in workers
    assert all(run.status == dg.DagsterRunStatus.SUCCESS for run in runs
               if (run.tags.get("sctc/model"), run.tags.get("sctc/lang")) != ("r2", "zh_hant"))
    rates = pd.read_parquet(io_manager.path_for(dg.AssetKey("mini_tests")))
    assert sorted(rates["model"]) == ["api", "r1", "r3"] and set(rates["n"]) == {4}


class _ThirdPartyRegistry:
    """Entries whose backends are defined only in the test tree, named as a package's backend is (`module:Class`)."""

    def entries(self):
        def entry(backend: str, **settings):
            return SimpleNamespace(backend=f"sctc_assets_tests.fakes:{backend}", settings=settings, benchmarks={})

        return {"f1": entry("ForkableFake"), "f2": entry("ForkableFake"),
                "e1": entry("EndpointFake", endpoint="http://lane-a.invalid/api"),
                "e2": entry("EndpointFake", endpoint="http://lane-b.invalid/api")}


def test_a_backend_of_one_s_own_gets_worker_placement_and_endpoint_lanes_from_its_class(persistent, monkeypatch):
    """No edit to the package: a `forkable` class's models run in the workers, and an `endpoint_lane` class's
    models each get a lane (a thread of their own, per endpoint) in this process."""
    defs, instance, io_manager, _ = persistent
    runner = Runner(defs, instance, {"io_manager": io_manager, "models": _ThirdPartyRegistry()},
                    log=lambda line: None)
    threads: dict[str, str] = {}
    run_model = Runner.run_model

    def recording(self, spec, model, *args, **kwargs):
        threads[model] = threading.current_thread().name  # only this process's calls reach this dictionary
        return run_model(self, spec, model, *args, **kwargs)

    monkeypatch.setattr(Runner, "run_model", recording)
    [report] = run_all(runner, [BenchmarkWork(MINI_PLAN, ["f1", "e1", "f2", "e2"], {})])

    assert report.ok, report.failures
    assert runner.endpoints(["e1", "e2", "f1"]) == {"e1": "http://lane-a.invalid/api",
                                                    "e2": "http://lane-b.invalid/api", "f1": None}
    pids = {(run.tags.get("sctc/model"), run.tags.get("sctc/lang")): run.tags[PID_TAG] for run in instance.get_runs()}
    assert pids[("e1", "zh_hans")] == pids[("e2", "zh_hant")] == str(os.getpid())
    assert str(os.getpid()) not in {pids[(model, lang)] for model in ("f1", "f2") for lang in ("zh_hans", "zh_hant")}
    assert set(threads) == {"e1", "e2"}  # the forkable models ran in the workers
    assert threads["e1"] != threads["e2"] and all(name.startswith("sctc-models-") for name in threads.values())


def test_workers_write_the_tables_one_process_writes(persistent, monkeypatch):
    defs, instance, io_manager, tmp_path = persistent
    work = [BenchmarkWork(MINI_PLAN, MODELS, {"trials": 3})]
    [spread] = run_all(_runner(defs, instance, io_manager), work)
    spread_tables = {name: pd.read_parquet(path) for name, path in
                     export_tables(MINI_PLAN, MODELS, io_manager, tmp_path / "spread", defs).items()}

    monkeypatch.setenv(PROCESSES_ENV, "1")
    other = ParquetIOManager(base_dir=str(tmp_path / "storage-one"))
    one_defs = dg.Definitions(assets=[mini_prompts, mini_answers, mini_rates, mini_tests], jobs=MINI_JOBS,
                              resources={"io_manager": other})
    (tmp_path / "home-one").mkdir()
    one_instance = cli_instance(tmp_path / "home-one")
    [single] = run_all(_runner(one_defs, one_instance, other), work)
    one_tables = {name: pd.read_parquet(path) for name, path in
                  export_tables(MINI_PLAN, MODELS, other, tmp_path / "one", one_defs).items()}
    one_runs = {run.tags[PID_TAG] for run in one_instance.get_runs()}
    one_instance.dispose()

    assert spread.ok and single.ok
    assert one_runs == {str(os.getpid())}  # one process: no worker forked
    assert sorted(spread.materialized) == sorted(single.materialized)
    assert spread_tables.keys() == one_tables.keys()
    for name in spread_tables:
        pd.testing.assert_frame_equal(spread_tables[name].sort_values(list(spread_tables[name].columns))
                                      .reset_index(drop=True),
                                      one_tables[name].sort_values(list(one_tables[name].columns))
                                      .reset_index(drop=True))

    # Unchanged, a second run materializes nothing, in workers too.
    [again] = run_all(_runner(defs, instance, io_manager), work)
    assert again.ok and again.materialized == set() and again.run_ids == []


def test_the_workers_lines_reach_this_process_s_output(persistent, capsys):
    defs, instance, io_manager, _ = persistent
    run_all(Runner(defs, instance, {"io_manager": io_manager, "models": _Registry()}), 
        [BenchmarkWork(MINI_PLAN, ["r1", "r2"], {})])

    printed = capsys.readouterr().out
    assert "[mini: r1/zh_hans] mini_model_lang: mini_answers" in printed
    assert "[mini: r2] mini_per_model: mini_rates" in printed
    assert "[mini: across models] mini_cross_model: mini_tests" in printed


def test_a_stop_before_the_run_starts_no_stage_and_says_interrupted(persistent):
    defs, instance, io_manager, _ = persistent
    request_stop("interrupted (SIGINT)")
    [report] = run_all(_runner(defs, instance, io_manager), [BenchmarkWork(MINI_PLAN, MODELS, {})])

    assert report.interrupted == "interrupted (SIGINT)"
    assert instance.get_runs() == []


def test_an_error_raised_by_a_model_s_stages_in_a_worker_names_the_model(persistent, monkeypatch):
    defs, instance, io_manager, _ = persistent
    original = Runner.run_model

    def run_model(self, plan, model, *args):
        if model == "r3":
            raise KeyError("no such column: outcome")
        return original(self, plan, model, *args)

    monkeypatch.setattr(Runner, "run_model", run_model)
    with pytest.raises(Exception, match=r"mini model r3: KeyError: 'no such column: outcome'"):
        run_all(_runner(defs, instance, io_manager), [BenchmarkWork(MINI_PLAN, MODELS, {})])
    # The other models finished their stages before the error was raised.
    done = {run.tags.get("sctc/model") for run in instance.get_runs()}
    assert {"r1", "r2", "api"} <= done


def test_a_bad_worker_count_is_refused_before_anything_runs(monkeypatch):
    monkeypatch.setenv(PROCESSES_ENV, "two")
    assert option_problems({}) == [f"${PROCESSES_ENV}='two': expected a whole number of at least 1"]
    monkeypatch.setenv(PROCESSES_ENV, "3")
    assert option_problems({}) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_workers_stages_as_it_stops_this_process_s(tmp_path, monkeypatch, signum):
    """The real `sctc run` code with two replayed models in two workers: a signal to the main process alone (as
    `kill` sends it) reaches both workers; each stores its answers, starts nothing more and exits."""
    monkeypatch.setenv(PROCESSES_ENV, "2")
    process, marker = _start_target(tmp_path, "halting", ["first", "second", "third"], "--replay")
    _wait_for(marker, "started first/zh_hans", process)
    _wait_for(marker, "started second/zh_hans", process)
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)

    assert process.returncode == 130, (out, err)
    assert err.strip().splitlines()[-1] == "interrupted; 6 answers stored, rerun to continue"
    assert "Traceback" not in out + err
    assert sorted(marker.read_text().splitlines()) == ["started first/zh_hans", "started second/zh_hans"]
    runs = _runs_by_status(tmp_path / "home")
    assert set(runs) == {"SUCCESS", "FAILURE"}  # the inputs, and the halted partitions: nothing left STARTED
    workers = {run.tags[PID_TAG] for run in runs["FAILURE"]}
    assert len(workers) == 2 and str(process.pid) not in workers
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)  # both ended with the run


SIDE = {"fail": False}


@dg.asset(code_version="1")
def mini_notes(mini_prompts: pd.DataFrame) -> pd.DataFrame:
    """An input no model stage reads (like Table 37's tokenizers): slow, and failing when told to."""
    import time

    time.sleep(3)
    if SIDE["fail"]:
        raise RuntimeError("the tokenizer download failed")
    return mini_prompts.assign(note="x")


SIDE_PLAN = MINI_PLAN.with_stages(inputs=("mini_prompts", "mini_notes"))


def test_inputs_no_model_reads_run_beside_the_models_and_their_failure_fails_only_their_stage(persistent):
    defs, instance, io_manager, _ = persistent
    defs = dg.Definitions(assets=[mini_prompts, mini_notes, mini_answers, mini_rates, mini_tests],
                          jobs=[dg.define_asset_job("mini_inputs", selection=[mini_prompts, mini_notes]),
                                *MINI_JOBS[1:]],
                          resources={"io_manager": io_manager})
    runner = _runner(defs, instance, io_manager)
    assert runner.input_groups(SIDE_PLAN) == (("mini_prompts",), ("mini_notes",))
    assert runner.input_groups(MINI_PLAN) == (("mini_prompts",), ())

    SIDE["fail"] = True
    try:
        [report] = run_all(runner, [BenchmarkWork(SIDE_PLAN, ["r1", "r2"], {})])
    finally:
        SIDE["fail"] = False

    assert not report.inputs_failed
    assert [failure.stage for failure in report.failures] == ["mini: inputs beside the models"]
    assert "RuntimeError: the tokenizer download failed" in report.failures[0].message
    records = {(record.dagster_run.tags.get("sctc/model"), record.dagster_run.tags.get("sctc/lang"),
                tuple(sorted(key.to_user_string() for key in record.dagster_run.asset_selection or ()))): record
               for record in instance.get_run_records()}
    side = records[(None, None, ("mini_notes",))]
    first_model = min(record.start_time for (model, _, _), record in records.items() if model is not None)
    assert first_model < side.end_time  # the models did not wait for it
    assert records[(None, None, ("mini_tests",))].dagster_run.status == dg.DagsterRunStatus.SUCCESS


def test_the_name_benchmark_s_tokenizers_and_explanation_words_run_beside_its_models():
    from sctc_assets.benchmarks import SPECS
    from sctc_assets.definitions import defs

    runner = Runner(defs, dg.DagsterInstance.ephemeral(), {})
    first, second = runner.input_groups(SPECS["name"])
    assert {"name_prompts", "name_candidate_lists", "regional_names"} <= set(first)
    assert {"tokenization_counts", "name_explanation_words"} <= set(second)
    assert runner.input_groups(SPECS["corpus"]) == (SPECS["corpus"].inputs, ())


def test_before_cross_is_called_once_per_benchmark_when_every_model_stage_is_done(persistent):
    defs, instance, io_manager, _ = persistent
    seen = []

    def before_cross(work):
        stored = [io_manager.path_for(dg.AssetKey("mini_rates"), defs.get_assets_def("mini_rates").partitions_def,
                                      model).exists() for model in work.models]
        seen.append((work.spec.name, all(stored)))

    [report] = run_all(_runner(defs, instance, io_manager), [BenchmarkWork(MINI_PLAN, MODELS, {})], before_cross)

    assert report.ok
    assert seen == [("mini", True)]


def test_the_export_before_a_cross_stage_leaves_the_dispatcher_free_and_runs_one_at_a_time():
    """`sctc run` exports a benchmark's model tables while its cross-model stage runs, on a thread: `start`
    returns at once, two exports never overlap (they share the folder's manifest), a failed one is left to the
    export after the run, and `join` waits for all."""
    import threading
    import time

    from sctc_assets.running.cli_run import BackgroundExports

    release, events, running = threading.Event(), [], [0]

    def export(work):
        running[0] += 1
        events.append((work, "start", running[0]))
        if work == "term":
            assert release.wait(30)
        if work == "broken":
            running[0] -= 1
            raise OSError("disk full")
        time.sleep(0.05)
        running[0] -= 1
        events.append((work, "end"))

    exports = BackgroundExports(export)
    started = time.perf_counter()
    exports.start("term")
    deadline = time.monotonic() + 30
    while not events and time.monotonic() < deadline:  # the term export holds the turn
        time.sleep(0.01)
    exports.start("broken")
    exports.start("name")
    assert time.perf_counter() - started < 5  # the dispatcher was not held by the term export
    assert [event for event in events if event[0] != "term"] == []  # the others wait for it
    release.set()
    exports.join()
    assert {event[0] for event in events} == {"term", "broken", "name"}
    assert all(event[2] == 1 for event in events if event[1] == "start")  # never two at once
    assert ("name", "end") in events
