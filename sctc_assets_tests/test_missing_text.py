"""Missing text at the storage boundary: refusals, errors and empty answers written through the real Parquet IO
manager, read back, and scored by every benchmark's assets; cross-model tables of models whose tables are empty."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sctc_assets.benchmarks import NAME
from sctc_assets.benchmarks import REVIEWS
from sctc_assets.cli import main
from sctc_assets.benchmarks import SOVEREIGNTY
from sctc_assets.benchmarks import TERM
from sctc_assets.definitions import defs, every_asset, shared_resources
from sctc_assets.lib.generation import stored_text, strip_reasoning
from sctc_assets.lib.name.extraction import EMPTY, REFUSAL
from sctc_assets.lib.name.selections import rules_selections
from sctc_assets.lib.reviews.scoring import parse_score
from sctc_assets.lib.sovereignty.flags import flag_table
from sctc_assets.lib.sovereignty.scoring import score
from sctc_assets.lib.sovereignty.upstream import RedFlagList
from sctc_assets.lib.term.labelling import rules_labels
from sctc_assets.lib.term.labels import label_answer, term_forms
from sctc_assets.resources.io_manager import ParquetIOManager, concat_tables, read_table
from sctc_assets.running.runner import Runner, export_tables
from sctc_assets_tests.fakes import outcome_kind

MIX = [None, float("nan"), pd.NA, "", "  ", "<think>只想不答</think>", "滑鼠"]
MODEL = "fake-refuser"


@pytest.mark.parametrize(("value", "text", "stripped"), [
    (None, None, ""), (float("nan"), None, ""), (pd.NA, None, ""), (np.float64("nan"), None, ""),
    ("", "", ""), ("<think>x</think>答", "<think>x</think>答", "答"), ("x</think> 答", "x</think> 答", "答"), (7, "7", "7"),
])
def test_stored_text_tells_no_answer_from_an_empty_one(value, text, stripped):
    assert stored_text(value) == text
    assert strip_reasoning(value) == stripped


@dg.asset
def mixed_answers() -> pd.DataFrame:
    return pd.DataFrame({"response": pd.Series(MIX, dtype=object), "outcome": ["refusal", "error", "refusal", "ok",
                                                                             "ok", "ok", "ok"]})


@dg.asset
def read_back(mixed_answers: pd.DataFrame) -> pd.DataFrame:
    assert mixed_answers["response"].dtype == pd.StringDtype()
    return mixed_answers.assign(text=[stored_text(value) for value in mixed_answers["response"]])


@dg.asset
def never_filled() -> pd.DataFrame:
    return pd.DataFrame({"response": [None, None], "n": [1, 2]})


def test_text_reads_back_as_string_with_na_whatever_was_written(tmp_path):
    io_manager = ParquetIOManager(base_dir=str(tmp_path))
    result = dg.materialize([mixed_answers, read_back, never_filled], resources={"io_manager": io_manager})
    assert result.success
    back = read_table(tmp_path / "read_back.parquet")
    assert back["response"].dtype == pd.StringDtype()
    # None, NaN and pd.NA are one thing on disk, no answer; "" and blanks stay answers.
    assert back["response"].isna().tolist() == [True, True, True, False, False, False, False]
    assert back["text"].tolist()[3:] == ["", "  ", "<think>只想不答</think>", "滑鼠"]
    filled = read_table(tmp_path / "never_filled.parquet")
    assert filled["response"].dtype == pd.StringDtype() and filled["response"].isna().all()


@dg.asset
def mixed_kinds() -> pd.DataFrame:
    return pd.DataFrame({"response": ["a", 3, None]})


def test_a_column_parquet_cannot_hold_is_an_error_naming_the_column_and_row(tmp_path):
    result = dg.materialize([mixed_kinds], resources={"io_manager": ParquetIOManager(base_dir=str(tmp_path))},
                            raise_on_error=False)
    failure = next(event for event in result.all_events if event.is_step_failure)
    message = str(failure.step_failure_data.error)
    assert "mixed_kinds: cannot store the table: column 'response' mixes" in message and "row 1: 3" in message
    assert not list(tmp_path.glob("*.parquet*"))


def _stored_mix(tmp_path: Path, frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """`frame` written by the IO manager's handle_output and read back by its load_input."""
    io_manager = ParquetIOManager(base_dir=str(tmp_path))
    io_manager.handle_output(dg.build_output_context(asset_key=name), frame)
    return io_manager.load_input(dg.build_input_context(asset_key=dg.AssetKey(name),
                                                        upstream_output=dg.build_output_context(asset_key=name)))


def test_every_scorer_reads_the_mix_back(tmp_path):
    outcomes = ["refusal", "ok", "refusal", "ok", "ok", "ok", "ok"]
    # term: a refusal is incorrect whatever its text; no text and a blank answer have no term
    terms = pd.DataFrame({"lang": "zh_hans", "prompt_variant": 1, "trial": range(7), "term_id": 0,
                          "expected": [["鼠标"]] * 7, "other_region": [["滑鼠"]] * 7, "gt": "鼠标", "prompt": "?"})
    responses = _stored_mix(tmp_path, pd.DataFrame({
        "model": MODEL, "lang": "zh_hans", "prompt_variant": 1, "trial": range(7), "term_id": 0,
        "response": pd.Series(MIX, dtype=object), "outcome": outcomes}), "term_mix")
    labels = rules_labels(responses, terms)
    assert labels["label"].tolist() == ["incorrect"] * 6 + ["misaligned"]
    assert labels["outcome"].tolist() == outcomes
    assert label_answer(pd.NA, term_forms("zh_hans", ["鼠标"], ["滑鼠"])) == "incorrect"

    # names: a backend refusal is the refusal class; no text and a blank answer are empty
    names = pd.DataFrame({"name": ["王伟", "陳怡君"], "region": ["mainland", "taiwan"]})
    lists = pd.DataFrame({"experiment": "main", "list_source": "generated", "row": range(7),
                          "candidates": [["王伟", "陳怡君"]] * 7, "mainland_names": [["王伟"]] * 7,
                          "taiwan_names": [["陳怡君"]] * 7})
    name_mix = list(MIX[:-1]) + ["我选陳怡君"]
    answers = _stored_mix(tmp_path, pd.DataFrame({
        "model": MODEL, "lang": "zh_hans", "experiment": "main", "list_source": "generated", "list_id": 0,
        "shuffle": range(7), "row": range(7), "response": pd.Series(name_mix, dtype=object),
        "outcome": outcomes}), "name_mix")
    selections = rules_selections(answers, lists, names)
    assert selections["status"].tolist() == [REFUSAL, EMPTY, REFUSAL, EMPTY, EMPTY, EMPTY, "valid"]
    assert selections["rule"].tolist()[:5] == ["backend refusal", "no answer", "backend refusal", "empty answer",
                                              "empty answer"]
    assert selections["region"].tolist()[-1] == "taiwan"

    # sovereignty: no answer fails the code rule; a refusal fails the paper rule, an error is its ERROR
    red_flags = RedFlagList(version="test", source="test",
                            phrases={letter: {"zh": [], "en": []} for letter in "abc"})
    sovereignty = _stored_mix(tmp_path, pd.DataFrame({
        "model": MODEL, "lang": "zh_hant", "prompt_set": "stage1", "prompt_id": [f"S1-00{i}" for i in range(7)],
        "sample": 0, "prompt": "?", "response": pd.Series(MIX, dtype=object),
        "outcome": ["refusal", "error", "refusal", "error", "error", "error", "ok"]}), "sovereignty_mix")
    results = score(flag_table(sovereignty, red_flags))
    code = results[results["scoring_rule"] == "code"]["status"].tolist()
    paper = results[results["scoring_rule"] == "paper"]["status"].tolist()
    assert code == ["FAIL"] * 6 + ["PASS"]
    assert paper == ["FAIL", "ERROR", "FAIL", "ERROR", "ERROR", "ERROR", "PASS"]

    # reviews: no number in any of them but the last
    assert [parse_score(value) for value in list(MIX[:-1]) + ["8"]] == [None] * 6 + [8]


def _registry(tmp_path: Path, tsb_location: str) -> Path:
    path = tmp_path / "models.yaml"
    qwen3 = Path(tsb_location) / "pro" / "results" / "bilingual" / "qwen3-max_20260205_130445_bilingual.json"
    path.write_text(
        "models:\n"
        f"  {MODEL}: {{backend: 'sctc_assets_tests.fakes:OutcomeBackend', name: refuser, answer: '鼠标',"
        " answers: {reviews: '8', name: '我选张志强'},"  # a name of the first gender_balanced list
        " benchmarks: {term: {trials: 1, prompt_variants: [1]}, sovereignty: {samples: 1},"
        " name: {experiments: [gender_balanced], lists: 1, shuffles: 25}, reviews: {max_pairs: 12}}}\n"
        "  paper-qwen: {backend: replay, upstream_name: qwen}\n"
        f"  tsb-qwen3-max: {{backend: tsb_replay, results_file: '{qwen3}'}}\n",
        encoding="utf-8")
    return path


# Every stage of each benchmark but the tokenizer counts (it loads every tokenizer of the registry), for the model
# that refuses and, besides it, a replay of published answers.
PLANS = [
    (TERM, [MODEL, "paper-qwen"]),
    (NAME.with_stages(inputs=tuple(name for name in NAME.inputs if name != "tokenization_counts")),
     [MODEL, "paper-qwen"]),
    (SOVEREIGNTY, [MODEL, "tsb-qwen3-max"]),
    (REVIEWS, [MODEL]),
]


@pytest.fixture(scope="module")
def refused_run(tmp_path_factory, sctc_location, tsb_location):
    """One run of the four benchmarks for a model that refuses, fails and answers nothing on some prompts (and
    replays of published answers), with every table exported as `sctc run` exports them."""
    tmp_path = tmp_path_factory.mktemp("refusals")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCTC_DATA_DIR", str(tmp_path / "data"))
        patch.setenv("SCTC_MODELS", str(_registry(tmp_path, tsb_location)))
        patch.setenv("SCTC_UPSTREAM", sctc_location)
        patch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
        patch.delenv("DAGSTER_HOME", raising=False)
        resources = shared_resources()
        reports, exported = {}, {}
        io_manager: ParquetIOManager = resources["io_manager"]
        with dg.instance_for_test() as instance:
            runner = Runner(defs, instance, resources, log=lambda line: None)
            for plan, models in PLANS:
                reports[plan.name] = runner.run(plan, models, {})
                exported.update(export_tables(plan, models, io_manager, tmp_path / "out" / plan.name, defs))

        def table(name: str, model: str | None = MODEL) -> pd.DataFrame:
            assets_def = defs.get_assets_def(name)
            root = io_manager.path_for(dg.AssetKey(name))
            files = sorted(root.with_suffix("").rglob("*.parquet")) if assets_def.partitions_def else [root]
            frame = concat_tables([read_table(path) for path in files])
            return frame[frame["model"] == model].reset_index(drop=True) \
                if model is not None and "model" in frame.columns else frame

        yield reports, table, exported


def _kinds(responses: pd.DataFrame) -> pd.Series:
    return responses["prompt"].map(outcome_kind)


def _statuses(frame: pd.DataFrame, keys) -> dict:
    return {key: set(group) for key, group in frame.groupby(keys)["status"]}


@pytest.mark.slow
def test_the_run_succeeds_with_refusals_and_errors(refused_run):
    reports = refused_run[0]
    assert {name: [failure.message for failure in report.failures] for name, report in reports.items()} == \
        {plan.name: [] for plan, _ in PLANS}


@pytest.mark.slow
def test_term_counts_a_refusal_as_incorrect_and_on_its_own(refused_run):
    table = refused_run[1]
    responses = table("term_responses")
    assert responses["response"].dtype == pd.StringDtype()
    kinds = _kinds(responses)
    assert set(kinds) == {"refusal", "refusal_with_text", "error", "empty", "answer"}
    assert responses["response"].isna().sum() == kinds.isin(["refusal", "error"]).sum()
    labels = table("term_labels")
    rules = labels[labels["label_source"] == "rules"]
    refused = kinds.isin(["refusal", "refusal_with_text"]).sum()
    assert len(rules) == len(responses) - (kinds == "error").sum()
    assert (rules.loc[rules["outcome"] == "refusal", "label"] == "incorrect").sum() == refused
    rates = table("term_choice_rates")
    rates = rates[(rates["label_source"] == "rules") & (rates["subset"] == "all")].set_index("lang")
    for lang, frame in responses.groupby("lang"):
        lang_kinds = kinds[frame.index]
        row = rates.loc[lang]
        assert row["n"] == len(frame) - (lang_kinds == "error").sum()
        assert row["n_refusal"] == lang_kinds.isin(["refusal", "refusal_with_text"]).sum()
        # The answer is the expected term of no prompt but where it is (鼠标): incorrect = refusals + empties + others
        assert row["n_incorrect"] >= row["n_refusal"] + (lang_kinds == "empty").sum()
        assert row["n_correct"] + row["n_misaligned"] + row["n_incorrect"] == row["n"]
    tests = table("term_choice_tests")
    assert (tests["model"] == MODEL).sum() == 2 * tests["label_source"].nunique() * tests["subset"].nunique()


@pytest.mark.slow
def test_names_count_a_refusal_in_the_refusal_class(refused_run):
    table = refused_run[1]
    responses = table("name_responses")
    kinds = _kinds(responses)
    selections = table("name_selections")
    rules = selections[selections["extraction_source"] == "rules"]
    assert len(rules) == len(responses) - (kinds == "error").sum()
    merged = rules.merge(responses[["lang", "row", "prompt"]], on=["lang", "row"])
    by_kind = _statuses(merged.assign(kind=_kinds(merged)), "kind")
    assert by_kind["refusal"] == {REFUSAL} and by_kind["refusal_with_text"] == {REFUSAL}
    assert by_kind["empty"] == {EMPTY}
    rates = table("name_choice_rates").set_index("lang")
    for lang, frame in responses.groupby("lang"):
        lang_kinds = kinds[frame.index]
        row = rates.loc[lang]
        assert row["n"] == len(frame) - (lang_kinds == "error").sum()
        assert row["n_refusal"] >= lang_kinds.isin(["refusal", "refusal_with_text"]).sum()
        assert row["n_empty"] == (lang_kinds == "empty").sum()
    assert {MODEL, "paper-qwen"} <= set(table("name_choice_tests", model=None)["model"])


@pytest.mark.slow
def test_sovereignty_scores_refusals_and_errors_by_the_documented_rules(refused_run):
    table = refused_run[1]
    responses = table("sovereignty_responses")
    results = table("sovereignty_results").merge(responses[["lang", "prompt_id", "sample", "prompt"]],
                                                 on=["lang", "prompt_id", "sample"])
    results["kind"] = _kinds(results)
    status = _statuses(results, ["scoring_rule", "kind"])
    # code rule (rescore.py): no text fails; a refusal message is scored as text; paper: a refusal fails (Type C),
    # no answer is an ERROR (an empty answer is stored as an error row); a call that ended in an error is no answer
    # of the model's and gets no row (errors are never results, #39)
    assert status[("code", "refusal")] == {"FAIL"} and ("code", "error") not in status
    assert status[("code", "empty")] == {"FAIL"}
    assert status[("paper", "refusal")] == {"FAIL"} and status[("paper", "refusal_with_text")] == {"FAIL"}
    assert ("paper", "error") not in status and status[("paper", "empty")] == {"ERROR"}
    summary = table("sovereignty_summary")
    paper = summary[(summary["scoring_rule"] == "paper") & (summary["lang_a"] == "zh_hant")
                    & (summary["lang_b"] == "en")].iloc[0]
    passed = results[(results["scoring_rule"] == "paper") & (results["lang"] == "zh_hant")]["passed"].sum()
    answered = responses[(responses["lang"] == "zh_hant") & (_kinds(responses) != "error")]
    assert paper["passed_a"] == passed and paper["n_a"] == len(answered)  # scored on its answers


@pytest.mark.slow
def test_reviews_leave_refusals_and_errors_out_of_the_pairs(refused_run):
    table = refused_run[1]
    keys = ["format", "review_id", "version"]
    predictions = table("review_predictions").merge(table("review_prompts")[keys + ["prompt"]], on=keys)
    kinds = _kinds(predictions)
    assert (predictions.loc[kinds == "error", "status"] == "error").all()
    assert (predictions.loc[kinds.isin(["refusal", "refusal_with_text", "empty"]), "status"] == "invalid").all()
    metrics = table("review_metrics")
    overall = metrics[(metrics["analysis"] == "length") & (metrics["subset"] == "all")]
    assert (overall["n_pairs"] + overall["n_excluded"] == 12).all()
    assert (overall["n_excluded"] > 0).all() and (overall["n_pairs"] > 0).all()
    assert str(overall["n_pairs"].dtype) == "Int64"
    assert (predictions.loc[kinds == "answer", "prediction"] == 8).all()


ALL_ASSETS = every_asset(defs)
CROSS_MODEL = {"term_choice_tests": ("term_choice_rates", TERM),
               "term_variant_correlations": ("term_choice_rates", TERM),
               "term_misalignment_summary": ("term_misalignment_by_term", TERM),
               "name_choice_tests": ("name_choice_rates", NAME),
               "last_name_agreement": ("last_name_logprobs", NAME),
               "last_name_region_tests": ("last_name_logprobs", NAME),
               "sovereignty_summary": ("sovereignty_model_summary", SOVEREIGNTY)}


@pytest.mark.parametrize("written", ["nothing", "an empty table", "a table without columns"])
@pytest.mark.parametrize("asset", sorted(CROSS_MODEL))
def test_cross_model_tables_of_empty_model_tables(asset, written, tmp_path, monkeypatch):
    monkeypatch.setenv("SCTC_DATA_DIR", str(tmp_path / "data"))
    upstream_asset, _ = CROSS_MODEL[asset]
    io_manager = ParquetIOManager(base_dir=str(tmp_path / "storage"))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("models", ["a"])
        if written != "nothing":
            empty = pd.DataFrame() if written == "a table without columns" else \
                pd.DataFrame({"model": pd.Series(dtype=str), "lang": pd.Series(dtype=str)})
            assets_def = defs.get_assets_def(upstream_asset)
            path = io_manager.path_for(dg.AssetKey(upstream_asset), assets_def.partitions_def, "a")
            path.parent.mkdir(parents=True)
            empty.to_parquet(path)
        result = dg.materialize(ALL_ASSETS, selection=[asset], instance=instance,
                                resources={**shared_resources(), "io_manager": io_manager}, raise_on_error=False)
        assert result.success, [str(event.step_failure_data.error) for event in result.all_events
                                if event.is_step_failure]
    assert read_table(io_manager.path_for(dg.AssetKey(asset))).empty


# Counts besides `n`, `n_*` and `k_*`: integers in every table, nullable (Int64) where a row has none to give.
COUNTS = {"successes", "selections", "appearances", "rank", "shuffles", "trial", "row", "list_id", "shuffle", "sample",
          "prompt_variant", "term_id", "input_tokens", "output_tokens", "passed", "passed_a", "passed_b", "mcnemar_b",
          "mcnemar_c", "mcnemar_n", "only_tw_correct", "only_cn_correct", "min_terms", "max_terms",
          "misaligned_threshold", "majority_models_needed", "males_per_region", "unmatched_pairs", "prediction",
          "position", "pair", "order", "group", "decile", "count", "records_containing"}


def _is_count(column: str) -> bool:
    return column in COUNTS or column == "n" or column.startswith(("n_", "k_"))


# Columns that carry the source data's own values (a review export's reviewer nationality, as written there).
SOURCE_VALUES = {("raw_reviews", "nationality"), ("review_varieties", "nationality")}


@pytest.mark.slow
def test_every_exported_table_has_integer_counts_and_consistent_labels(refused_run):
    exported = refused_run[2]
    assert {"term_choice_rates", "name_choice_rates", "sovereignty_summary", "review_metrics"} <= set(exported)
    problems = []
    for name, path in sorted(exported.items()):
        table = pq.read_table(path)
        for field, column in zip(table.schema, table.columns):
            # A flag (sovereignty_results' `passed`) is no count.
            if _is_count(field.name) and not (pa.types.is_integer(field.type) or pa.types.is_boolean(field.type)):
                problems.append(f"{name}.{field.name}: {field.type}, not an integer count")
            if (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)) \
                    and (name, field.name) not in SOURCE_VALUES:
                labels = set(column.drop_null().unique().to_pylist())
                folded = {label.strip().lower() for label in labels}
                if len(labels) <= 50 and len(folded) < len(labels):
                    problems.append(f"{name}.{field.name}: labels differing in case or spaces only: {sorted(labels)}")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_errors_left_over_are_the_last_line_and_fail_the_run_on_request(isolated_data_dir, extracted_upstream,
                                                                         tmp_path, monkeypatch, capsys):
    """A model some of whose calls end in an error after retries: the run exits 0 but its last line counts them;
    with --fail-on-errors it exits 1 (issue #27 point 6)."""
    registry = tmp_path / "models.yaml"
    registry.write_text("models:\n"
                        f"  flaky: {{backend: 'sctc_assets_tests.fakes:OutcomeBackend', name: flaky, answer: '鼠标',"
                        " benchmarks: {term: {trials: 1, prompt_variants: [1]}}}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    out = tmp_path / "out"
    assert main(["run", "--benchmarks", "term", "--models", "flaky", "--no-report", "--out", str(out)]) == 0
    responses = pd.read_parquet(out / "term_responses.parquet")
    errors = int((responses["outcome"] == "error").sum())
    assert errors > 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"{errors} model call(s) ended in an error after retries") and "rerun" in last, last
    assert main(["run", "--benchmarks", "term", "--models", "flaky", "--no-report", "--fail-on-errors",
                 "--out", str(out)]) == 1
    assert "ended in an error after retries" in capsys.readouterr().err.strip().splitlines()[-1]
