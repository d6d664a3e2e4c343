"""A second `sctc run` recomputes no model partition whose code, inputs, config, data settings and registry entry
are unchanged; it re-runs what changed (one model's entry, the upstream file, failed calls), still reports the
checks that failed, exports the same tables; and its event log is Dagster's own (the UI reads it)."""

import warnings

import dagster as dg
import pandas as pd
import pytest
from dagster._core.instance.ref import InstanceRef

from sctc_assets.assets.partitions import model_and_lang, model_lang_partitions, models_partitions
from sctc_assets.resources.io_manager import ParquetIOManager
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.benchmarks.spec import BenchmarkSpec
from sctc_assets.running.runner import Runner, export_tables
from sctc_assets.running.event_log import FastSqliteEventLogStorage
from sctc_assets.running.run_storage import FastSqliteRunStorage
from sctc_assets.running.instance import cli_instance

LANGS = model_lang_partitions(("zh_hans", "zh_hant"))
SCRIPT = {"errors": set(), "usable": True}  # partitions ("model/lang") answered with call errors; checks' verdict


@dg.asset(code_version="1")
def re_prompts() -> pd.DataFrame:
    return pd.DataFrame({"prompt": ["你好", "再見"]})


@dg.asset(partitions_def=LANGS, code_version="1")
def re_answers(context: dg.AssetExecutionContext, re_prompts: pd.DataFrame, models: ModelRegistryResource):
    model, lang = model_and_lang(context)
    answer = models.entry(model).settings.get("answer", "好")
    errors = len(re_prompts) if f"{model}/{lang}" in SCRIPT["errors"] else 0
    frame = pd.DataFrame({"model": model, "lang": lang, "answer": answer, "prompt": re_prompts["prompt"]})
    return dg.Output(frame, metadata={"outcomes": dg.MetadataValue.json(
        {"ok": len(frame) - errors, "refusal": 0, "error": errors})})


@dg.asset_check(asset=re_answers, description="ERROR when no answer is usable (scripted).")
def re_answers_usable() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=SCRIPT["usable"], severity=dg.AssetCheckSeverity.ERROR)


@dg.asset(partitions_def=LANGS, code_version="1")
def re_scores(re_answers: pd.DataFrame) -> pd.DataFrame:
    return re_answers.assign(score=re_answers["answer"].str.len())


with warnings.catch_warnings():  # partitioned check specs (what the answer checks use) are a preview feature
    warnings.simplefilter("ignore")
    SCORE_SPEC = dg.AssetCheckSpec("scored", asset=re_scores, partitions_def=LANGS)


@dg.multi_asset_check(specs=[SCORE_SPEC], description="ERROR per partition when nothing is scorable (scripted).")
def re_scores_checks(context: dg.AssetCheckExecutionContext):
    yield dg.AssetCheckResult(check_name="scored", asset_key=re_scores.key, passed=SCRIPT["usable"],
                              severity=dg.AssetCheckSeverity.ERROR)


@dg.asset(partitions_def=models_partitions, code_version="1")
def re_rates(context: dg.AssetExecutionContext, re_scores: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"model": [context.partition_key], "mean": [float(re_scores["score"].mean())]})


@dg.asset(code_version="1")
def re_tests(re_rates: pd.DataFrame) -> pd.DataFrame:
    return re_rates.assign(rank=re_rates["mean"].rank())


PLAN = BenchmarkSpec.of_stages(name="re", langs=("zh_hans", "zh_hant"), inputs=("re_prompts",),
                     per_model_lang=("re_answers", "re_scores"), per_model=("re_rates",), cross_model=("re_tests",),
                     jobs={"per_model_lang": "re_model_lang"}, skip_unchanged=True)
PER_MODEL = ("re_answers", "re_scores", "re_rates")


def _registry(path, answers: dict[str, str]) -> None:
    path.write_text("models:\n" + "".join(
        f"  {key}: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', answer: '{answer}', description: x}}\n"
        for key, answer in answers.items()), encoding="utf-8")


@pytest.fixture
def project(tmp_path, monkeypatch):
    upstream = tmp_path / "upstream.tar.xz"
    upstream.write_bytes(b"first archive")
    monkeypatch.setenv("SCTC_UPSTREAM", str(upstream))
    registry = tmp_path / "models.yaml"
    _registry(registry, {"m-a": "好", "m-b": "很好"})
    io_manager = ParquetIOManager(base_dir=str(tmp_path / "storage"))
    resources = {"io_manager": io_manager, "models": ModelRegistryResource(registry_path=str(registry),
                                                                           cache_path=str(tmp_path / "cache.sqlite"))}
    defs = dg.Definitions(assets=[re_prompts, re_answers, re_scores, re_rates, re_tests],
                          asset_checks=[re_answers_usable, re_scores_checks], resources=resources,
                          jobs=[dg.define_asset_job("re_model_lang", selection=[re_answers, re_scores])])
    SCRIPT.update(errors=set(), usable=True)
    home = tmp_path / "home"
    home.mkdir()
    instance = cli_instance(home)
    lines: list[str] = []

    def run(models=("m-a", "m-b")):
        before = _materializations(instance)
        lines.clear()
        report = Runner(defs, instance, resources, log=lines.append).run(PLAN, list(models), {})
        after = _materializations(instance)
        new = sorted(key for key in after if after[key] > before.get(key, 0))
        return report, new

    yield run, instance, io_manager, defs, registry, upstream, lines, tmp_path
    SCRIPT.update(errors=set(), usable=True)


def _materializations(instance: dg.DagsterInstance) -> dict[tuple[str, str | None], int]:
    """(asset, partition) → materializations recorded, read from the instance's event log."""
    counts: dict[tuple[str, str | None], int] = {}
    for name in PER_MODEL + ("re_prompts", "re_tests"):
        for record in instance.fetch_materializations(dg.AssetKey(name), limit=1000).records:
            key = (name, record.partition_key)
            counts[key] = counts.get(key, 0) + 1
    return counts


def _tables(io_manager, defs, folder):
    written = export_tables(PLAN, ["m-a", "m-b"], io_manager, folder, defs)
    return {name: pd.read_parquet(path) for name, path in written.items()}


def test_a_second_unchanged_run_materializes_nothing_and_exports_the_same_tables(project):
    run, instance, io_manager, defs, _, _, lines, tmp_path = project
    first, new = run()
    assert first.ok and len(new) == 4 * 2 + 2 + 2  # 4 partitions × answers, scores; 2 rates; prompts, tests
    cold = _tables(io_manager, defs, tmp_path / "cold")
    runs = instance.get_runs_count()

    second, new = run()
    assert second.ok and new == []
    assert instance.get_runs_count() == runs  # no stage launched a run (and there is no source to observe)
    assert len(second.unchanged) == 4 * 2 + 2 + 1 and second.skipped_inputs == ["re_prompts"]
    assert any(line.startswith("[re: m-a] unchanged since their last materialization") and
               "re_answers (zh_hans, zh_hant)" in line and "re_rates" in line for line in lines), lines
    warm = _tables(io_manager, defs, tmp_path / "warm")
    assert cold.keys() == warm.keys() == {"re_prompts", "re_answers", "re_scores", "re_rates", "re_tests"}
    for name in cold:
        pd.testing.assert_frame_equal(cold[name], warm[name])


def test_a_changed_registry_entry_re_runs_that_model_s_partitions_only(project):
    run, _, io_manager, defs, registry, _, _, tmp_path = project
    run()
    _registry(registry, {"m-a": "好", "m-b": "非常好"})
    report, new = run()
    assert report.ok
    assert new == sorted([("re_answers", "zh_hans|m-b"), ("re_answers", "zh_hant|m-b"), ("re_scores", "zh_hans|m-b"),
                          ("re_scores", "zh_hant|m-b"), ("re_rates", "m-b"), ("re_tests", None)])
    assert set(_tables(io_manager, defs, tmp_path / "out")["re_answers"].query("model == 'm-b'")["answer"]) == {"非常好"}

    # A description (or any field that cannot change an answer) is no reason to run anything again.
    registry.write_text(registry.read_text().replace("description: x", "description: y"), encoding="utf-8")
    assert run()[1] == []


def test_a_changed_upstream_file_re_runs_every_partition(project):
    run, _, _, _, _, upstream, _, _ = project
    run()
    assert run()[1] == []
    upstream.write_bytes(b"second archive, another size")
    report, new = run()
    assert report.ok
    assert {name for name, _ in new} == {"re_prompts", "re_answers", "re_scores", "re_rates", "re_tests"}
    assert len(new) == 4 * 2 + 2 + 2


def test_a_partition_whose_calls_failed_runs_again_and_a_check_that_failed_still_fails(project):
    run, _, _, _, registry, _, _, _ = project
    SCRIPT["errors"] = {"m-a/zh_hant"}
    run()
    SCRIPT["errors"] = set()
    report, new = run()
    # The failed calls are asked again; what depends on them follows; nothing else runs.
    assert new == [("re_answers", "zh_hant|m-a"), ("re_rates", "m-a"), ("re_scores", "zh_hant|m-a"),
                   ("re_tests", None)]
    assert report.ok

    SCRIPT["usable"] = False
    _registry(registry, {"m-a": "好", "m-b": "不好"})
    report, new = run(models=("m-b",))
    assert not report.ok and ("re_answers", "zh_hans|m-b") in new
    SCRIPT["usable"] = True  # would pass now, but the partition is unchanged: its last verdict stands
    report, new = run(models=("m-b",))
    assert new == [] and not report.ok
    # Partitioned checks: each partition's latest evaluation; a check without partitions: its evaluation in the
    # run that last materialized the partition.
    assert [failure.message for failure in report.failures] == [
        f"asset check {check} on {asset} {lang}|m-b did not pass at its last evaluation ({{}})"
        for lang in ("zh_hans", "zh_hant")
        for check, asset in (("scored", "re_scores"), ("re_answers_usable", "re_answers"))]
    assert report.failed_models == ["m-b"]


def _shard_schema(path):
    import sqlite3

    connection = sqlite3.connect(path)
    try:
        return (sorted(connection.execute("SELECT type, name, sql FROM sqlite_master").fetchall()),
                connection.execute("SELECT version_num FROM alembic_version").fetchall(),
                connection.execute("PRAGMA journal_mode").fetchall())
    finally:
        connection.close()


def test_sctc_run_writes_dagster_s_own_event_log_and_keeps_configured_storage(tmp_path):
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    cli = cli_instance(tmp_path)
    assert isinstance(cli.event_log_storage, FastSqliteEventLogStorage)
    assert isinstance(cli.run_storage, FastSqliteRunStorage)
    result = dg.materialize([re_prompts], instance=cli)
    ui = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path)))
    assert type(ui.event_log_storage).__name__ == "SqliteEventLogStorage"
    assert [run.run_id for run in ui.get_runs()] == [result.run_id]
    assert ui.get_run_by_id(result.run_id).status == dg.DagsterRunStatus.SUCCESS  # run storage: Dagster's file
    assert type(ui.run_storage).__name__ == "SqliteRunStorage"
    assert ui.get_latest_materialization_event(dg.AssetKey("re_prompts")).run_id == result.run_id
    assert len(ui.all_logs(result.run_id)) == len(cli.all_logs(result.run_id)) > 5
    # Later run shards are created from the first one's schema and stamp: the same as Dagster creates.
    second = dg.materialize([re_prompts], instance=cli)
    assert [len(ui.all_logs(run_id)) for run_id in (result.run_id, second.run_id)] == [len(cli.all_logs(result.run_id))] * 2
    schemas = [_shard_schema(tmp_path / "history" / "runs" / f"{run_id}.db") for run_id in (result.run_id, second.run_id)]
    assert schemas[0] == schemas[1] and len(schemas[0][0]) > 10 and schemas[0][2] == [("wal",)]

    configured = tmp_path / "configured"
    configured.mkdir()
    (configured / "dagster.yaml").write_text(f"storage:\n  sqlite:\n    base_dir: {configured / 'elsewhere'}\n")
    assert not isinstance(cli_instance(configured).event_log_storage, FastSqliteEventLogStorage)
    assert not isinstance(cli_instance(configured).run_storage, FastSqliteRunStorage)


def test_the_settings_digest_sees_every_file_below_an_upstream_folder_but_not_the_data_folder(tmp_path):
    from sctc_assets.running.unchanged import settings_digest

    upstream, data = tmp_path / "upstream", tmp_path / "data"
    (upstream / "response").mkdir(parents=True)
    data.mkdir()
    answers = upstream / "response" / "qwen.csv"
    answers.write_text("a,b\n")
    environ = {"SCTC_UPSTREAM": str(upstream), "SCTC_DATA_DIR": str(data), "SCTC_MAX_CALLS": "5"}
    first = settings_digest(environ)
    (data / "new-table.parquet").write_bytes(b"x")  # what every run writes is no new setting
    assert settings_digest({**environ, "SCTC_MAX_CALLS": "9"}) == first  # nor is a budget
    answers.write_text("a,b\n1,2\n")
    assert settings_digest(environ) != first
    assert settings_digest(environ, registry=False) == settings_digest({**environ, "SCTC_MODELS": "x.yaml"},
                                                                       registry=False)


def test_exports_already_current_stay_as_they_are(project):
    import os

    run, _, io_manager, defs, _, _, _, tmp_path = project
    folder = tmp_path / "out"
    run()
    written = export_tables(PLAN, ["m-a", "m-b"], io_manager, folder, defs)

    def states() -> dict[str, tuple[bytes, int]]:
        return {name: (path.read_bytes(), path.stat().st_mtime_ns) for name, path in written.items()}

    exported = states()
    assert len(exported) == 5
    run()  # unchanged: nothing materialized, nothing exported again
    assert export_tables(PLAN, ["m-a", "m-b"], io_manager, folder, defs) == written and states() == exported

    # Every stored file written again with the same content (as a stage run again writes it): read and compared,
    # not written.
    for path in (tmp_path / "storage").rglob("*.parquet"):
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert export_tables(PLAN, ["m-a", "m-b"], io_manager, folder, defs) == written and states() == exported

    # One stored table with other content: that export alone is written again.
    stored = io_manager.path_for(dg.AssetKey("re_tests"))
    pd.read_parquet(stored).assign(rank=0.0).to_parquet(stored, index=False)
    export_tables(PLAN, ["m-a", "m-b"], io_manager, folder, defs)
    now = states()
    assert [name for name in now if now[name] != exported[name]] == ["re_tests"]
    assert (pd.read_parquet(written["re_tests"])["rank"] == 0.0).all()
