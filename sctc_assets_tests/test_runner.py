"""`sctc run`'s stage runner on tiny asset graphs: failed checks and failed models are reported, not lost; stages run
as named jobs with tags; unchanged inputs are skipped; Ctrl-C, SIGTERM and SIGKILL leave a consistent instance."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from dagster._core.instance.ref import InstanceRef

from sctc_assets.assets.metadata import upstream_comparison_result
from sctc_assets.lib.interrupt import clear_stop, request_stop
from sctc_assets.assets.partitions import model_and_lang, model_lang_partitions, models_partitions
from sctc_assets.resources.io_manager import ParquetIOManager
from sctc_assets.benchmarks.spec import BenchmarkSpec
from sctc_assets.running.runner import RunReport, Runner, export_tables
from sctc_assets.running.instance import HOST_TAG, PID_TAG, cli_instance, sweep_dead_runs
from sctc_assets.running.logs import RunLog

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = model_lang_partitions(("zh_hans",))


@dg.asset
def tiny_inputs() -> int:
    return 1


@dg.asset_check(asset=tiny_inputs, description="Always fails, like prompts that differ from the upstream files.")
def tiny_inputs_match() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, metadata={"mismatches": 3})


def _deep_failure(depth: int) -> None:
    if depth:
        _deep_failure(depth - 1)
    raise RuntimeError("the endpoint is down") from ConnectionError("socket closed")


@dg.asset(partitions_def=PARTITIONS, deps=[tiny_inputs])
def tiny_answers(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    model, _ = model_and_lang(context)
    if model == "broken":
        _deep_failure(5)
    # "unreachable" answers every call with an error row, as a backend does for an endpoint that never answers.
    outcomes = {"ok": 0, "refusal": 0, "error": 3} if model == "unreachable" else {"ok": 2, "refusal": 1, "error": 1}
    return dg.MaterializeResult(metadata={"outcomes": dg.MetadataValue.json(outcomes)})


@dg.asset_check(asset=tiny_inputs, description="Nothing to compare: the upstream copy lacks the files.")
def tiny_inputs_without_upstream_files() -> dg.AssetCheckResult:
    return upstream_comparison_result(0, [], ["prompt_1.csv"])


TINY_PLAN = BenchmarkSpec.of_stages(name="tiny", langs=("zh_hans",), inputs=("tiny_inputs",), per_model_lang=("tiny_answers",),
                          per_model=(), cross_model=())


def _report(models: list[str], checks=(tiny_inputs_match,), log=lambda line: None, inputs=tiny_inputs,
            run_log=None) -> RunReport:
    defs = dg.Definitions(assets=[inputs, tiny_answers], asset_checks=list(checks))
    with dg.instance_for_test() as instance:
        return Runner(defs, instance, {}, log=log, run_log=run_log).run(TINY_PLAN, models, {})


def _run(models: list[str], checks=(tiny_inputs_match,), log=lambda line: None) -> tuple[list, list[str]]:
    report = _report(models, checks, log)
    return report.failures, report.failed_models


def test_a_failed_asset_check_fails_the_run_and_names_the_check():
    failures, failed_models = _run(["fine"])

    assert [failure.stage for failure in failures] == ["tiny: inputs"]
    assert "asset check tiny_inputs_match on tiny_inputs did not pass" in failures[0].message
    assert "'mismatches': 3" in failures[0].message
    assert failed_models == []


def test_models_whose_stages_failed_are_named():
    failures, failed_models = _run(["fine", "broken"])

    assert failed_models == ["broken"]
    assert _report(["fine", "broken"], checks=()).stale_models == ["broken"]
    assert [failure.stage for failure in failures if failure.model] == ["tiny: broken/zh_hans"]


def test_a_check_with_no_upstream_files_to_compare_warns_without_failing_the_run():
    lines = []
    failures, _ = _run(["fine"], checks=(tiny_inputs_without_upstream_files,), log=lines.append)

    assert failures == []
    assert any("check warning: asset check tiny_inputs_without_upstream_files" in line and "prompt_1.csv" in line
               for line in lines)


def test_upstream_comparison_result_fails_on_mismatches_and_warns_on_nothing_compared():
    mismatch = upstream_comparison_result(2, ["prompt_1.csv row 4"], [])
    clean = upstream_comparison_result(2, [], ["prompt_3.csv"])
    nothing = upstream_comparison_result(0, [], ["prompt_1.csv", "prompt_2.csv"])

    assert (mismatch.passed, mismatch.severity) == (False, dg.AssetCheckSeverity.ERROR)
    assert (clean.passed, clean.severity) == (True, dg.AssetCheckSeverity.ERROR)
    assert (nothing.passed, nothing.severity) == (False, dg.AssetCheckSeverity.WARN)


def test_a_failure_is_one_line_on_the_terminal_and_its_stack_trace_is_in_the_log_file(tmp_path):
    lines = []
    log_file = tmp_path / "run.log"
    run_log = RunLog(log_file, lines.append)
    report = _report(["broken"], checks=(), log=lines.append, run_log=run_log)
    run_log.close()

    assert report.failures[0].message == "tiny_answers: RuntimeError: the endpoint is down"
    printed = "\n".join(lines)
    assert "[tiny: broken/zh_hans] FAILED: tiny_answers: RuntimeError: the endpoint is down" in printed
    assert "Traceback" not in printed and "_deep_failure" not in printed and "Stack Trace" not in printed
    assert len(lines) == 3, lines  # the inputs stage, the partition stage, its failure, nothing from Dagster
    logged = log_file.read_text()
    assert logged.count("_deep_failure") >= 5 and "socket closed" in logged and "STEP_FAILURE" in logged


def test_debug_shows_dagster_s_events_and_the_trace_on_the_terminal():
    lines = []
    _report(["broken"], checks=(), log=lines.append, run_log=RunLog(None, lines.append, debug=True))

    assert any("_deep_failure" in line for line in lines) and any("STEP_START" in line for line in lines)


def test_a_partition_whose_every_call_failed_fails_the_run_but_keeps_its_rows():
    report = _report(["fine", "unreachable"], checks=())

    assert report.failed_models == ["unreachable"]
    assert report.stale_models == []  # its error rows are this run's, not an earlier run's
    assert "all 3 model calls ended in an error" in report.failures[0].message
    assert not report.inputs_failed


@dg.asset(name="tiny_inputs")
def unreadable_inputs() -> int:
    raise FileNotFoundError("upstream location does not exist: /nowhere")


def test_when_the_inputs_fail_nothing_else_runs():
    lines = []
    report = _report(["fine"], checks=(), log=lines.append, inputs=unreadable_inputs)

    assert report.inputs_failed
    assert [failure.stage for failure in report.failures] == ["tiny: inputs"]
    assert "does not exist: /nowhere" in report.failures[0].message
    assert not any("tiny: fine/zh_hans" in line for line in lines)


@dg.asset(io_manager_key="io_manager")
def empty_table() -> pd.DataFrame:
    return pd.DataFrame({"model": pd.Series(dtype=str), "label": pd.Series(dtype=str)})


def test_an_empty_table_is_exported_with_its_columns_over_an_older_file(tmp_path):
    io_manager = ParquetIOManager(base_dir=str(tmp_path / "storage"))
    defs = dg.Definitions(assets=[empty_table], resources={"io_manager": io_manager})
    plan = BenchmarkSpec.of_stages(name="tiny", langs=("zh_hans",), inputs=("empty_table",), per_model_lang=(), per_model=(),
                         cross_model=())
    out = tmp_path / "out"
    out.mkdir()
    pd.DataFrame({"model": ["from an earlier run"], "label": ["correct"]}).to_parquet(out / "empty_table.parquet")
    with dg.instance_for_test() as instance:
        assert Runner(defs, instance, {"io_manager": io_manager}).run(plan, [], {}).ok

    written = export_tables(plan, [], io_manager, out, defs)

    assert list(written) == ["empty_table"]
    exported = pd.read_parquet(out / "empty_table.parquet")
    assert exported.empty and list(exported.columns) == ["model", "label"]


# A benchmark with every stage, written through the real IO manager: named jobs, tags, op config, failure listing.
TWO_LANGS = model_lang_partitions(("zh_hans", "zh_hant"))
FAILING = {"langs": set()}  # "model/lang" partitions whose answers fail in the current run


class AnswersConfig(dg.Config):
    trials: int = 1


@dg.asset(code_version="1")
def mini_prompts() -> pd.DataFrame:
    return pd.DataFrame({"prompt": ["你好"]})


@dg.asset(partitions_def=TWO_LANGS, code_version="1")
def mini_answers(context: dg.AssetExecutionContext, config: AnswersConfig, mini_prompts: pd.DataFrame) -> pd.DataFrame:
    model, lang = model_and_lang(context)
    if f"{model}/{lang}" in FAILING["langs"]:
        raise RuntimeError(f"{model}/{lang} failed")
    return pd.DataFrame({"model": [model] * config.trials, "lang": [lang] * config.trials, "answer": ["好"] * config.trials})


@dg.asset(partitions_def=models_partitions, code_version="1")
def mini_rates(context: dg.AssetExecutionContext, mini_answers: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"model": [context.partition_key], "n": [len(mini_answers)]})


@dg.asset(code_version="1")
def mini_tests(mini_rates: pd.DataFrame) -> pd.DataFrame:
    return mini_rates.assign(significant=False)


MINI_JOBS = [dg.define_asset_job("mini_inputs", selection=[mini_prompts]),
             dg.define_asset_job("mini_model_lang", selection=[mini_answers]),
             dg.define_asset_job("mini_per_model", selection=[mini_rates]),
             dg.define_asset_job("mini_cross_model", selection=[mini_prompts, mini_tests])]
MINI_PLAN = BenchmarkSpec.of_stages(name="mini", langs=("zh_hans", "zh_hant"), inputs=("mini_prompts",),
                          per_model_lang=("mini_answers",), per_model=("mini_rates",), cross_model=("mini_tests",),
                          config=lambda options: {"mini_answers": {"trials": options.get("trials", 1)}},
                          skip_unchanged=True)


@pytest.fixture
def mini(tmp_path):
    io_manager = ParquetIOManager(base_dir=str(tmp_path / "storage"))
    defs = dg.Definitions(assets=[mini_prompts, mini_answers, mini_rates, mini_tests], jobs=MINI_JOBS,
                          resources={"io_manager": io_manager})
    FAILING["langs"] = set()
    with dg.instance_for_test() as instance:
        yield defs, instance, io_manager
    FAILING["langs"] = set()


def test_stages_run_as_the_benchmark_s_named_jobs_with_model_and_lang_tags(mini):
    defs, instance, io_manager = mini
    report = Runner(defs, instance, {"io_manager": io_manager}, log=lambda line: None).run(MINI_PLAN, ["a", "b"],
                                                                                          {"trials": 2})
    assert report.ok, report.failures

    runs = list(reversed(instance.get_runs()))  # newest first
    assert [run.job_name for run in runs] == ["mini_inputs"] + ["mini_model_lang", "mini_model_lang",
                                                                  "mini_per_model"] * 2 + ["mini_cross_model"]
    assert len(report.run_ids) == len(runs) == 8
    assert all(run.tags["sctc/benchmark"] == "mini" and run.tags[PID_TAG] == str(os.getpid()) for run in runs)
    assert [(run.tags.get("sctc/model"), run.tags.get("sctc/lang")) for run in runs[1:4]] == [
        ("a", "zh_hans"), ("a", "zh_hant"), ("a", None)]
    cross = runs[-1]
    # The cross-model job also selects the inputs (for the UI); sctc run's stage materializes its own assets only.
    assert {key.to_user_string() for key in cross.asset_selection} == {"mini_tests"}
    answers = pd.read_parquet(io_manager.path_for(dg.AssetKey("mini_answers"), TWO_LANGS, "zh_hant|b"))
    assert len(answers) == 2  # the op config reached the asset


@pytest.mark.slow
def test_rows_this_run_wrote_are_never_called_an_earlier_run_s(mini, tmp_path):
    defs, instance, io_manager = mini
    runner = Runner(defs, instance, {"io_manager": io_manager}, log=lambda line: None)

    def tables(report_models):
        written = export_tables(MINI_PLAN, report_models, io_manager, tmp_path / "out", defs)
        return {name: pd.read_parquet(path) for name, path in written.items()}

    # First run: a's zh_hant fails, so its zh_hans rows are this run's and its per-model stage never ran.
    FAILING["langs"] = {"a/zh_hant"}
    first = runner.run(MINI_PLAN, ["a", "b"], {})
    assert first.failed_models == ["a"]
    assert first.earlier_rows(MINI_PLAN, tables(["a", "b"])) == {}

    # Second run: both of a's languages fail; its zh_hans rows on disk are the first run's. (A new op config makes
    # the unchanged partitions run again; unchanged, they would be left as they are.)
    FAILING["langs"] = {"a/zh_hans", "a/zh_hant"}
    second = runner.run(MINI_PLAN, ["a"], {"trials": 2})
    assert second.earlier_rows(MINI_PLAN, tables(["a"])) == {"a": ["mini_answers"]}

    # After a clean run, a's zh_hant fails: its zh_hant rows, its rates and the cross-model rows from them are older.
    FAILING["langs"] = set()
    assert runner.run(MINI_PLAN, ["a", "b"], {"trials": 3}).ok
    FAILING["langs"] = {"a/zh_hant"}
    fourth = runner.run(MINI_PLAN, ["a", "b"], {"trials": 4})
    assert fourth.earlier_rows(MINI_PLAN, tables(["a", "b"])) == {"a": ["mini_answers", "mini_rates", "mini_tests"]}


def test_cross_model_tables_skip_models_without_any_result_silently_and_name_them_in_metadata(mini):
    defs, instance, io_manager = mini
    instance.add_dynamic_partitions("models", ["other-benchmark-only"])
    lines = []
    report = Runner(defs, instance, {"io_manager": io_manager}, log=lines.append).run(MINI_PLAN, ["a"], {})

    assert report.ok
    assert not any("skipping" in line or "never materialized" in line for line in lines), lines
    event = instance.get_latest_materialization_event(dg.AssetKey("mini_tests"))
    assert event.asset_materialization.metadata["models_without_results"].value == ["other-benchmark-only"]

    # A real gap in a model that has results still warns.
    Runner(defs, instance, {"io_manager": io_manager}, log=lines.append).run(MINI_PLAN, ["b"], {})
    job = defs.resolve_job_def("mini_per_model")
    io_manager.path_for(dg.AssetKey("mini_answers"), TWO_LANGS, "zh_hant|b").unlink()
    result = job.execute_in_process(instance=instance, partition_key="b", raise_on_error=False)
    warnings = [entry.user_message for entry in instance.all_logs(result.run_id)
                if "never materialized" in entry.user_message]
    assert warnings and "zh_hant|b" in warnings[0]


def test_an_unchanged_input_whose_stored_table_is_gone_is_materialized_again(mini):
    defs, instance, io_manager = mini
    runner = Runner(defs, instance, {"io_manager": io_manager}, log=lambda line: None)
    assert runner.run(MINI_PLAN, [], {}).skipped_inputs == []
    assert runner.run(MINI_PLAN, [], {}).skipped_inputs == ["mini_prompts"]

    io_manager.path_for(dg.AssetKey("mini_prompts")).unlink()
    assert runner.run(MINI_PLAN, [], {}).skipped_inputs == []
    assert io_manager.path_for(dg.AssetKey("mini_prompts")).exists()


# Unchanged inputs are skipped (Dagster's staleness plus op config and data settings).
VERSIONS = {"source": "1", "root": "1", "derived": "1", "check_passes": True, "data": "a"}


def _versioned_defs():
    @dg.observable_source_asset
    def vsource() -> dg.DataVersion:
        return dg.DataVersion(VERSIONS["data"])

    class RootConfig(dg.Config):
        seed: int = 0

    @dg.asset(code_version=VERSIONS["root"], deps=[vsource])
    def vroot(config: RootConfig) -> int:
        return config.seed

    @dg.asset(code_version=VERSIONS["derived"])
    def vderived(vroot: int) -> int:
        return vroot + 1

    @dg.asset_check(asset=vderived)
    def vderived_ok() -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=VERSIONS["check_passes"], metadata={"rows": 3})

    @dg.asset
    def vunversioned() -> int:
        return 1

    return dg.Definitions(assets=[vsource, vroot, vderived, vunversioned], asset_checks=[vderived_ok],
                          jobs=[dg.define_asset_job("v_inputs", selection=[vroot, vderived, vunversioned])])


V_PLAN = BenchmarkSpec.of_stages(name="v", langs=(), inputs=("vroot", "vderived", "vunversioned"), per_model_lang=(),
                       per_model=(), cross_model=(), config=lambda options: {"vroot": {"seed": options.get("seed", 0)}})


@pytest.mark.slow
def test_unchanged_inputs_are_skipped_and_changed_ones_run_with_what_depends_on_them(monkeypatch, tmp_path):
    monkeypatch.setitem(VERSIONS, "root", "1")
    monkeypatch.setenv("SCTC_SOMETHING_UPSTREAM", str(tmp_path))

    def run(options=None, **versions):
        for key, value in versions.items():
            monkeypatch.setitem(VERSIONS, key, value)
        lines = []
        before = _materialization_counts(instance)
        report = Runner(_versioned_defs(), instance, {}, log=lines.append).run(V_PLAN, [], options or {})
        after = _materialization_counts(instance)
        return report, sorted(name for name in after if after[name] > before[name]), lines

    with dg.instance_for_test() as instance:
        report, materialized, _ = run()
        assert materialized == ["vderived", "vroot", "vunversioned"] and report.ok

        report, materialized, lines = run()
        assert materialized == ["vunversioned"]  # no code version: always run
        assert report.skipped_inputs == ["vroot", "vderived"]
        assert any("unchanged since their last materialization" in line and "vroot, vderived" in line for line in lines)

        assert run(derived="2")[1] == ["vderived", "vunversioned"]
        assert run(root="2")[1] == ["vderived", "vroot", "vunversioned"]  # and what is computed from it
        assert run({"seed": 5})[1] == ["vderived", "vroot", "vunversioned"]  # a new op config
        assert run({"seed": 5}, data="b")[1] == ["vderived", "vroot", "vunversioned"]  # new upstream data version
        monkeypatch.setenv("SCTC_SOMETHING_UPSTREAM", str(tmp_path / "elsewhere"))
        assert run({"seed": 5})[1] == ["vderived", "vroot", "vunversioned"]  # the inputs read other data
        assert run({"seed": 5})[1] == ["vunversioned"]

        # A check that failed when its asset was last materialized still fails the run while the asset is skipped.
        assert not run({"seed": 5}, derived="3", check_passes=False)[0].ok
        report, materialized, _ = run({"seed": 5})
        assert materialized == ["vunversioned"]
        assert [failure.message for failure in report.failures] == [
            "asset check vderived_ok on vderived did not pass at its last evaluation ({'rows': 3})"]


def _materialization_counts(instance: dg.DagsterInstance) -> dict[str, int]:
    return {name: len(instance.fetch_materializations(dg.AssetKey(name), limit=1000).records)
            for name in ("vroot", "vderived", "vunversioned")}


# The instance sctc run uses, and the signals it handles; real subprocesses, bounded in time.
def test_sctc_run_s_instance_shares_storage_with_the_ui_but_captures_no_compute_logs(tmp_path):
    from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager
    from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager

    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    cli = cli_instance(tmp_path)
    ui = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path)))
    assert isinstance(cli.compute_log_manager, NoOpComputeLogManager)
    assert isinstance(ui.compute_log_manager, LocalComputeLogManager)
    defs = dg.Definitions(assets=[tiny_inputs])
    Runner(defs, cli, {}, log=lambda line: None).run(TINY_PLAN, [], {})
    assert [run.tags["sctc/stage"] for run in ui.get_runs()] == ["inputs"]


def _start_target(tmp_path: Path, mode: str, models: list[str], *extra: str) -> tuple[subprocess.Popen, Path]:
    marker = tmp_path / "marker.txt"
    env = {**os.environ, "SCTC_DATA_DIR": str(tmp_path / "data"), "DAGSTER_HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    command = [sys.executable, "-m", "sctc_assets_tests.runner_target", mode, str(marker), *models, *extra]
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return process, marker


def _wait_for(marker: Path, text: str, process: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if marker.exists() and text in marker.read_text():
            return
        if process.poll() is not None:
            raise AssertionError(f"exited early ({process.returncode}): {process.communicate()}")
        time.sleep(0.1)
    process.kill()
    raise AssertionError(f"{text!r} never appeared: {process.communicate()}")


def _runs_by_status(home: Path) -> dict[str, list[dg.DagsterRun]]:
    instance = cli_instance(home)
    found: dict[str, list] = {}
    for run in instance.get_runs():
        found.setdefault(run.status.value, []).append(run)
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_sctc_run_after_the_calls_under_way_are_stored_and_runs_nothing_more(tmp_path, signum):
    process, marker = _start_target(tmp_path, "halting", ["first", "second"])
    _wait_for(marker, "started first/zh_hans", process)
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)

    assert process.returncode == 130, (out, err)
    assert err.strip().splitlines()[-1] == "interrupted; 3 answers stored, rerun to continue"
    assert "Traceback" not in out + err
    assert marker.read_text().splitlines() == ["started first/zh_hans"]  # no further partition started
    runs = _runs_by_status(tmp_path / "home")
    assert set(runs) == {"SUCCESS", "FAILURE"}  # the inputs, and the halted partition: nothing left STARTED
    assert [run.tags.get("sctc/lang") for run in runs["FAILURE"]] == ["zh_hans"]


def test_a_second_ctrl_c_quits_at_once_and_the_next_run_marks_the_abandoned_run_failed(tmp_path):
    process, marker = _start_target(tmp_path, "stubborn", ["first"])
    _wait_for(marker, "started first/zh_hans", process)
    process.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert process.poll() is None  # the call under way is waited for
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=10)

    assert process.returncode == 130, (out, err)
    assert "quitting now" in err
    assert [run.tags["sctc/lang"] for run in _runs_by_status(tmp_path / "home")["STARTED"]] == ["zh_hans"]
    assert len(sweep_dead_runs(cli_instance(tmp_path / "home"))) == 1
    assert "STARTED" not in _runs_by_status(tmp_path / "home")


def test_after_kill_9_the_dead_run_is_marked_failed_and_a_live_one_is_left_alone(tmp_path):
    process, marker = _start_target(tmp_path, "hang", ["first"])
    try:
        _wait_for(marker, "started first/zh_hans", process)
        home = tmp_path / "home"
        assert sweep_dead_runs(cli_instance(home)) == []  # its process is alive
        assert len(_runs_by_status(home)["STARTED"]) == 1
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
    finally:
        process.kill()

    swept = sweep_dead_runs(cli_instance(home))
    runs = _runs_by_status(home)
    assert [run.run_id for run in runs["FAILURE"]] == swept and len(swept) == 1
    assert "STARTED" not in runs
    failure = cli_instance(home).all_logs(swept[0], of_type=dg.DagsterEventType.RUN_FAILURE)
    assert "ended without finishing this run" in failure[0].message


def test_a_stop_request_before_a_stage_starts_runs_no_stage(mini):
    defs, instance, io_manager = mini
    request_stop("interrupted (test)")
    try:
        report = Runner(defs, instance, {"io_manager": io_manager}, log=lambda line: None).run(MINI_PLAN, ["a"], {})
    finally:
        clear_stop()
    assert report.interrupted == "interrupted (test)" and not report.ok and not report.inputs_failed
    assert instance.get_runs() == []


@pytest.mark.slow
def test_ctrl_c_stops_the_real_sctc_run_between_partitions(isolated_data_dir, extracted_upstream):
    """The replay backend does not poll the stop request: its partition finishes, then nothing else starts. One
    worker process: with two, the second may already hold the next model's partition when the signal comes (it
    was busy with the inputs beside the models only while term_incorrect_types was one)."""
    command = [sys.executable, "-m", "sctc_assets.cli", "run", "--models", "paper-qwen", "paper-gpt4",
               "--out", str(isolated_data_dir / "out")]
    process = subprocess.Popen(command, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1",
                                                       "SCTC_WORKER_PROCESSES": "1"}, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("[term: paper-qwen/zh_hans]"):
                process.send_signal(signal.SIGINT)
                break
        rest, err = process.communicate(timeout=300)
    finally:
        process.kill()

    assert process.returncode == 130, "".join(lines) + rest + err
    assert err.strip().splitlines()[-1] == "interrupted; 0 answers stored, rerun to continue"
    assert "paper-gpt4" not in rest and "Traceback" not in err
    home = isolated_data_dir / "dagster_home"
    runs = cli_instance(home).get_runs()
    assert {run.tags.get("sctc/model") for run in runs} == {None, "paper-qwen"}
    assert all(run.status.value in ("SUCCESS", "FAILURE") for run in runs)


def test_sctc_ui_marks_runs_of_a_dead_sctc_run_failed_before_starting_dagster(tmp_path, monkeypatch):
    import socket

    from sctc_assets import cli
    from sctc_assets.cli import ui

    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = finished.stdout.strip()
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    instance = cli_instance(tmp_path)
    tags = {HOST_TAG: socket.gethostname(), PID_TAG: dead_pid}
    instance.add_run(dg.DagsterRun(job_name="term_model_lang", run_id="dead-run", status=dg.DagsterRunStatus.STARTED,
                                   tags=tags))
    # a run an earlier version started carries the same bookkeeping under `sctc/`
    legacy = {"sctc/host": socket.gethostname(), "sctc/pid": dead_pid}
    instance.add_run(dg.DagsterRun(job_name="term_model_lang", run_id="dead-legacy-run",
                                   status=dg.DagsterRunStatus.STARTED, tags=legacy))
    instance.add_run(dg.DagsterRun(job_name="term_model_lang", run_id="ui-run", status=dg.DagsterRunStatus.STARTED))
    started = []
    monkeypatch.setattr(ui, "run_forwarding_signals", lambda command, env=None: started.append(command) or 0)

    assert cli.main(["ui"]) == 0

    assert started and "dev" in started[0]
    statuses = {run.run_id: run.status for run in cli_instance(tmp_path).get_runs()}
    assert statuses == {"dead-run": dg.DagsterRunStatus.FAILURE, "dead-legacy-run": dg.DagsterRunStatus.FAILURE,
                        "ui-run": dg.DagsterRunStatus.STARTED}


def test_model_stages_read_a_model_independent_table_once_per_process(mini, monkeypatch):
    """The runs of model partitions write no unpartitioned table, so the prompts the first one read serve the
    others (four answer runs, one read); the tables come out as before."""
    import sctc_assets.resources.io_manager as io

    if not io._COPY_ON_WRITE:
        pytest.skip("the memo is kept only where pandas copies on write (pandas 3)")
    defs, instance, io_manager = mini
    prompts = io_manager.path_for(dg.AssetKey("mini_prompts"))
    reads = []
    real_read = io.read_table
    monkeypatch.setattr(io, "read_table", lambda path: reads.append(str(path)) or real_read(path))
    report = Runner(defs, instance, {"io_manager": io_manager}, log=lambda line: None).run(MINI_PLAN, ["a", "b"], {})
    assert report.ok, report.failures
    assert reads.count(str(prompts)) == 1
    answers = [pd.read_parquet(io_manager.path_for(dg.AssetKey("mini_answers"), TWO_LANGS, key))
               for key in ("zh_hans|a", "zh_hant|a", "zh_hans|b", "zh_hant|b")]
    assert [len(frame) for frame in answers] == [1, 1, 1, 1]
    io.forget_reads()
