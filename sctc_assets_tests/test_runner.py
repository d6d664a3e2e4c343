"""`sctc run`'s stage runner on a tiny asset graph: failed checks and failed models are reported, not lost."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.metadata import upstream_comparison_result
from sctc_assets.partitions import model_and_lang, model_lang_partitions
from sctc_assets.resources.io_manager import ParquetIOManager
from sctc_assets.runner import BenchmarkPlan, Runner, export_tables, stale_tables

PARTITIONS = model_lang_partitions(("zh_hans",))


@dg.asset
def tiny_inputs() -> int:
    return 1


@dg.asset_check(asset=tiny_inputs, description="Always fails, like prompts that differ from the upstream files.")
def tiny_inputs_match() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, metadata={"mismatches": 3})


@dg.asset(partitions_def=PARTITIONS, deps=[tiny_inputs])
def tiny_answers(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    model, _ = model_and_lang(context)
    if model == "broken":
        raise RuntimeError("the endpoint is down") from ConnectionError("socket closed")
    # "unreachable" answers every call with an error row, as a backend does for an endpoint that never answers.
    outcomes = {"ok": 0, "refusal": 0, "error": 3} if model == "unreachable" else {"ok": 2, "refusal": 1, "error": 1}
    return dg.MaterializeResult(metadata={"outcomes": dg.MetadataValue.json(outcomes)})


@dg.asset_check(asset=tiny_inputs, description="Nothing to compare: the upstream copy lacks the files.")
def tiny_inputs_without_upstream_files() -> dg.AssetCheckResult:
    return upstream_comparison_result(0, [], ["prompt_1.csv"])


def _report(models: list[str], checks=(tiny_inputs_match,), log=lambda line: None, inputs=tiny_inputs):
    defs = dg.Definitions(assets=[inputs, tiny_answers], asset_checks=list(checks))
    plan = BenchmarkPlan(name="tiny", langs=("zh_hans",), inputs=("tiny_inputs",), per_model_lang=("tiny_answers",),
                         per_model=(), cross_model=())
    with dg.instance_for_test() as instance:
        return Runner(defs, instance, {}, log=log).run(plan, models, {})


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


def test_stale_tables_lists_where_a_failed_model_still_has_rows():
    tables = {"rates": pd.DataFrame({"model": ["a", "broken"]}), "tests": pd.DataFrame({"model": ["a"]}),
              "terms": pd.DataFrame({"term": ["滑鼠"]})}

    assert stale_tables(tables, ["broken", "gone"]) == {"broken": ["rates"]}


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


def test_a_failure_is_reported_with_the_error_the_asset_raised_not_dagsters_wrapper():
    failures, _ = _run(["broken"], checks=())

    assert failures[0].message == "tiny_answers: RuntimeError: the endpoint is down"


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
    plan = BenchmarkPlan(name="tiny", langs=("zh_hans",), inputs=("empty_table",), per_model_lang=(), per_model=(),
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
