"""`audit_report` materialized through the code location's definitions, and `sctc report` / `sctc run` building it
from the tables in the storage, with some benchmarks absent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from sctc_assets import cli
from sctc_assets_tests.report_tables import LIVE, REGISTRY_YAML, TSB, write_benchmark_tables


@pytest.fixture
def audit_data(isolated_data_dir, tmp_path, monkeypatch):
    registry = tmp_path / "registry" / "models.yaml"
    registry.parent.mkdir()
    registry.write_text(REGISTRY_YAML)
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    # Sovereignty only (a per-model and a cross-model table): few figures, and three benchmarks missing.
    models = write_benchmark_tables(isolated_data_dir / "storage", benchmarks=("sovereignty",))
    return isolated_data_dir, models


def test_sctc_report_materializes_the_asset_and_links_the_page(audit_data, tmp_path, capsys):
    data, models = audit_data
    assert cli.main(["report", "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    html = tmp_path / "out" / "report" / "index.html"
    assert f"report: {html}" in printed and f"{len(models)} model(s)" in printed
    with dg.DagsterInstance.from_config(str(data / "dagster_home")) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("audit_report"))
    metadata = event.asset_materialization.metadata
    assert metadata["report"].value == str(html) and metadata["report_url"].value == html.resolve().as_uri()
    assert metadata["models"].value == len(models) == len([LIVE, TSB])
    assert metadata["figures"].value == 2  # the score chart per scoring rule
    assert sorted((html.parent / "figures").iterdir()) == sorted(
        html.parent / "figures" / f"sovereignty_scores_{rule}.{suffix}" for rule in ("code", "paper")
        for suffix in ("png", "svg"))
    missing = metadata["missing"].value
    for benchmark in ("term", "name", "reviews"):
        assert any(item.startswith(f"{benchmark}:") for item in missing), missing
        assert f"sctc run --benchmarks {benchmark}" in html.read_text()
    assert not any(item.startswith("sovereignty:") for item in missing)


def test_a_disabled_example_never_becomes_a_partition(audit_data, tmp_path):
    data, _ = audit_data
    registry = Path(os.environ["SCTC_MODELS"])
    registry.write_text(registry.read_text() + "  an-example: {backend: replay, upstream_name: qwen, enabled: false}\n")
    assert cli.main(["report", "--out", str(tmp_path / "out")]) == 0
    with dg.DagsterInstance.from_config(str(data / "dagster_home")) as instance:
        partitions = instance.get_dynamic_partitions("models")
    assert "an-example" not in partitions and "paper-qwen" in partitions


def test_sctc_report_for_chosen_models(audit_data, tmp_path):
    assert cli.main(["report", "--models", TSB, "--out", str(tmp_path / "out")]) == 0
    markdown = (tmp_path / "out" / "report" / "report.md").read_text()
    assert f"| {TSB} " in markdown and f"| {LIVE} " not in markdown


def test_sctc_run_ends_with_the_report(isolated_data_dir, tmp_path, capsys, monkeypatch):
    """The reviews benchmark without models runs its inputs only; the report still comes, saying what is missing;
    with --no-report it does not."""
    monkeypatch.delenv("SCTC_NO_REPORT")
    status = cli.main(["run", "--benchmarks", "reviews", "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert f"report: {tmp_path / 'out' / 'report' / 'index.html'}" in printed
    assert "0 model(s)" in printed
    assert cli.main(["run", "--benchmarks", "reviews", "--no-report", "--out", str(tmp_path / "quiet")]) == 0
    assert "report:" not in capsys.readouterr().out and not (tmp_path / "quiet" / "report").exists()


def test_per_model_tables_carry_numeric_headlines_and_link_their_chart_files(isolated_data_dir):
    """What the Plots tab charts: each materialization of a per-model table carries its headline numbers as float
    metadata; the cross-model chart is a PNG file the metadata links, not inline base64."""
    import numpy as np

    from sctc_assets.assets.sovereignty.summary import sovereignty_model_summary, sovereignty_summary
    from sctc_assets.definitions import shared_resources
    from sctc_assets.assets.partitions import MODELS_PARTITION_NAME, models_partitions
    from sctc_assets_tests.report_tables import TableWriter, sovereignty_results

    write = TableWriter(isolated_data_dir / "storage")
    results = sovereignty_results([LIVE, TSB], np.random.default_rng(3))
    for model in (LIVE, TSB):
        write("sovereignty_results", results[results["model"] == model], partitions_def=models_partitions, key=model)
    source = dg.SourceAsset(dg.AssetKey("sovereignty_results"), partitions_def=models_partitions)
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, [LIVE, TSB])
        for model in (LIVE, TSB, LIVE):  # LIVE twice: two points on its chart
            assert dg.materialize([source, sovereignty_model_summary], partition_key=model, instance=instance,
                                  resources=shared_resources()).success
        assert dg.materialize([source, sovereignty_model_summary, sovereignty_summary],
                              selection=[sovereignty_summary], instance=instance,
                              resources=shared_resources()).success
        events = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("sovereignty_model_summary"), asset_partitions=[LIVE]),
            limit=10).records
        summary = instance.get_latest_materialization_event(dg.AssetKey("sovereignty_summary"))
    assert len(events) == 2
    expected = results[(results["model"] == LIVE) & (results["scoring_rule"] == "code")
                       & (results["lang"] == "en")]["passed"].mean()
    for record in events:
        metadata = record.asset_materialization.metadata
        for key in ("code_score_zh_hant", "code_score_en", "code_lbs", "code_qac"):
            assert isinstance(metadata[key], dg.FloatMetadataValue), key
        assert metadata["code_score_en"].value == pytest.approx(expected)
    chart = summary.asset_materialization.metadata["chart"]
    assert isinstance(chart, dg.PathMetadataValue)
    path = Path(chart.value)
    assert path.is_relative_to(isolated_data_dir / "figures") and path.read_bytes()[:4] == b"\x89PNG"
    assert all(len(str(value.value)) < 20_000 for value in summary.asset_materialization.metadata.values())


@pytest.mark.slow
def test_a_models_kind_comes_from_its_stored_answers_not_todays_registry(isolated_data_dir, extracted_upstream,
                                                                        tmp_path, monkeypatch):
    """Answers made by a replay under one registry; the report built under another that lacks the entry still
    calls the model a replay (issue #27 point 2)."""
    first = tmp_path / "first.yaml"
    first.write_text("models:\n  paper-qwen: {backend: replay, upstream_name: qwen,"
                     " benchmarks: {term: {trials: 1, prompt_variants: [1]}}}\n")
    monkeypatch.setenv("SCTC_MODELS", str(first))
    out = tmp_path / "out"
    assert cli.main(["run", "--benchmarks", "term", "--models", "paper-qwen", "--no-report", "--out", str(out)]) == 0
    other = tmp_path / "other.yaml"
    other.write_text("models:\n  someone-else: {backend: openai, model: gpt-4o-mini, api_key_env: NO_SUCH_KEY}\n")
    # A new process, as a user's next command: the definitions read today's registry.
    env = {**os.environ, "SCTC_MODELS": str(other)}
    done = subprocess.run([sys.executable, "-m", "sctc_assets.cli", "report", "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    markdown = (out / "report" / "report.md").read_text()
    assert "replay (SC-TC-Bench)" in markdown and "1 replay model(s)" in markdown
    assert "live model(s) asked through this platform (paper-qwen" not in markdown
    assert "not in the registry" not in markdown


def _report_materializations(data: Path) -> int:
    with dg.DagsterInstance.from_config(str(data / "dagster_home")) as instance:
        return len(instance.fetch_materializations(dg.AssetKey("audit_report"), limit=100).records)


@pytest.mark.slow
def test_an_unchanged_report_is_skipped_and_a_changed_input_or_option_rebuilds_it(audit_data, tmp_path, capsys):
    data, _ = audit_data
    out = tmp_path / "out"
    html = out / "report" / "index.html"

    def report(*options: str) -> tuple[str, bytes, int]:
        assert cli.main(["report", "--out", str(out), *options]) == 0
        return capsys.readouterr().out, html.read_bytes(), html.stat().st_mtime_ns

    printed, first, first_time = report()
    assert f"report: {html}" in printed and _report_materializations(data) == 1
    printed, again, again_time = report()
    assert printed.startswith("report unchanged since ") and f": skipped ({html})" in printed, printed
    assert (again, again_time) == (first, first_time) and _report_materializations(data) == 1

    # Another option: built again, and the record follows the latest build.
    printed, chosen, chosen_time = report("--models", TSB)
    assert f"report: {html}" in printed and chosen_time != first_time and chosen != first
    assert "skipped" in report("--models", TSB)[0] and _report_materializations(data) == 2

    # A table of the storage changed (the sovereignty tables written again, from another seed).
    write_benchmark_tables(data / "storage", benchmarks=("sovereignty",), seed=11)
    printed, changed, _ = report("--models", TSB)
    assert f"report: {html}" in printed and changed != chosen and _report_materializations(data) == 3

    # A new materialization of an input (its metadata, e.g. the upstream commit, is quoted in the provenance).
    with dg.DagsterInstance.from_config(str(data / "dagster_home")) as instance:
        instance.report_runless_asset_event(dg.AssetMaterialization("sovereignty_prompts", metadata={"upstream": "x"}))
    assert f"report: {html}" in report("--models", TSB)[0]
    assert "skipped" in report("--models", TSB)[0] and _report_materializations(data) == 4

    # The HTML file edited by hand, or --force: built again although nothing it reads changed.
    html.write_text("edited")
    assert f"report: {html}" in report("--models", TSB)[0]
    assert f"report: {html}" in report("--models", TSB, "--force")[0] and _report_materializations(data) == 6


def test_the_report_of_another_folder_is_built_there(audit_data, tmp_path, capsys):
    assert cli.main(["report", "--out", str(tmp_path / "a")]) == 0
    assert cli.main(["report", "--out", str(tmp_path / "b")]) == 0
    assert "skipped" not in capsys.readouterr().out and (tmp_path / "b" / "report" / "index.html").exists()
