"""`sctc run`'s stage runner on a tiny asset graph: failed checks and failed models are reported, not lost."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.metadata import upstream_comparison_result
from sctc_assets.partitions import model_and_lang, model_lang_partitions
from sctc_assets.runner import BenchmarkPlan, Runner, stale_tables

PARTITIONS = model_lang_partitions(("zh_hans",))


@dg.asset
def tiny_inputs() -> int:
    return 1


@dg.asset_check(asset=tiny_inputs, description="Always fails, like prompts that differ from the upstream files.")
def tiny_inputs_match() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, metadata={"mismatches": 3})


@dg.asset(partitions_def=PARTITIONS, deps=[tiny_inputs])
def tiny_answers(context: dg.AssetExecutionContext) -> None:
    model, _ = model_and_lang(context)
    if model == "broken":
        raise RuntimeError("the endpoint is down")


@dg.asset_check(asset=tiny_inputs, description="Nothing to compare: the upstream copy lacks the files.")
def tiny_inputs_without_upstream_files() -> dg.AssetCheckResult:
    return upstream_comparison_result(0, [], ["prompt_1.csv"])


def _run(models: list[str], checks=(tiny_inputs_match,), log=lambda line: None) -> tuple[list, list[str]]:
    defs = dg.Definitions(assets=[tiny_inputs, tiny_answers], asset_checks=list(checks))
    plan = BenchmarkPlan(name="tiny", langs=("zh_hans",), inputs=("tiny_inputs",), per_model_lang=("tiny_answers",),
                         per_model=(), cross_model=())
    with dg.instance_for_test() as instance:
        report = Runner(defs, instance, {}, log=log).run(plan, models, {})
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
