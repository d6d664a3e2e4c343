"""`audit_report` materialized through the code location's definitions, and `sctc report` / `sctc run` building it
from the tables in the storage, with some benchmarks absent."""

from __future__ import annotations

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


def test_sctc_report_for_chosen_models(audit_data, tmp_path):
    assert cli.main(["report", "--models", TSB, "--out", str(tmp_path / "out")]) == 0
    markdown = (tmp_path / "out" / "report" / "report.md").read_text()
    assert f"| {TSB} " in markdown and f"| {LIVE} " not in markdown


def test_sctc_run_ends_with_the_report(isolated_data_dir, tmp_path, capsys):
    """The reviews benchmark without models runs its inputs only; the report still comes, saying what is missing."""
    status = cli.main(["run", "--benchmarks", "reviews", "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert f"report: {tmp_path / 'out' / 'report' / 'index.html'}" in printed
    assert "0 model(s)" in printed
