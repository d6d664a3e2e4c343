"""`audit_report` materialized through the code location's definitions, and `sctc report` / `sctc run` building it
from the tables in the storage, with some benchmarks absent."""

from __future__ import annotations

import dagster as dg
import pytest

from sctc_assets import cli
from sctc_assets_tests.report_tables import LIVE, REGISTRY_YAML, REPLAYS, TSB, write_benchmark_tables


@pytest.fixture
def audit_data(isolated_data_dir, tmp_path, monkeypatch):
    registry = tmp_path / "registry" / "models.yaml"
    registry.parent.mkdir()
    registry.write_text(REGISTRY_YAML)
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    models = write_benchmark_tables(isolated_data_dir / "storage", benchmarks=("term", "sovereignty"))
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
    assert metadata["models"].value == len(models) == len([*REPLAYS, LIVE, TSB])
    assert metadata["figures"].value == 8 + 2  # Figures 2, 5, 7, 8 for two label sources; two score charts
    missing = metadata["missing"].value
    assert any(item.startswith("name:") for item in missing) and any(item.startswith("reviews:") for item in missing)
    text = html.read_text()
    assert "sctc run --benchmarks name" in text and "sctc run --benchmarks reviews" in text


def test_sctc_report_for_chosen_models(audit_data, tmp_path):
    assert cli.main(["report", "--models", TSB, "--out", str(tmp_path / "out")]) == 0
    markdown = (tmp_path / "out" / "report" / "report.md").read_text()
    assert f"| {TSB} " in markdown and "| paper-qwen " not in markdown


def test_sctc_run_ends_with_the_report(isolated_data_dir, tmp_path, capsys):
    """The reviews benchmark without models runs its inputs only; the report still comes, saying what is missing."""
    status = cli.main(["run", "--benchmarks", "reviews", "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert f"report: {tmp_path / 'out' / 'report' / 'index.html'}" in printed
    assert "0 model(s)" in printed
