"""A benchmark added from its pieces alone: the tiny benchmark of `sctc_assets_tests/tiny_benchmark/` (its spec,
library, assets and table schemas, nothing else) runs through `sctc run`, its summary, export, estimate and the
audit report, as a user's own package would through `$SCTC_BENCHMARK_MODULES`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
MODULE = "sctc_assets_tests.tiny_benchmark"


def _sctc(tmp_path: Path, *args: str, modules: str = MODULE) -> subprocess.CompletedProcess:
    registry = tmp_path / "models.yaml"
    if not registry.exists():
        answers = {"天空是什么颜色？": "蓝色", "草是什么颜色？": "红色", "雪是什么颜色？": "白色",
                   "天空是什麼顏色？": "藍色", "草是什麼顏色？": "綠色", "雪是什麼顏色？": "黑色"}
        registry.write_text("models:\n  fake: {backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: fake, "
                            f"calls_file: '{tmp_path / 'calls.log'}', answers: {json.dumps(answers)}}}\n",
                            encoding="utf-8")
    env = {**os.environ, "SCTC_BENCHMARK_MODULES": modules, "SCTC_MODELS": str(registry),
           "SCTC_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    env.pop("DAGSTER_HOME", None)
    env.pop("SCTC_NO_REPORT", None)
    return subprocess.run([sys.executable, "-m", "sctc_assets.cli", *args], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=600)


def _calls(tmp_path: Path) -> int:
    log = tmp_path / "calls.log"
    return len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0


@pytest.mark.slow
def test_a_benchmark_from_its_spec_library_assets_and_schemas_runs_through_sctc_run_and_the_report(tmp_path):
    out = tmp_path / "out"
    done = _sctc(tmp_path, "run", "--benchmarks", "tiny", "--models", "fake", "--out", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Tiny colours" in done.stdout and "fake zh_hans: 0.67" in done.stdout and "fake zh_hant: 0.67" in done.stdout
    assert _calls(tmp_path) == 6  # each question asked once, through the response cache

    summary = pd.read_parquet(out / "tiny_summary.parquet").sort_values("lang").reset_index(drop=True)
    assert summary.to_dict("records") == [{"model": "fake", "lang": "zh_hans", "n": 3, "share_right": 2 / 3},
                                          {"model": "fake", "lang": "zh_hant", "n": 3, "share_right": 2 / 3}]
    scores = pd.read_parquet(out / "tiny_scores.parquet")
    assert sorted(scores.loc[~scores["right"], "response"]) == ["红色", "黑色"]

    # The report counts the benchmark's answers in its provenance, under the benchmark's name.
    report = (out / "report" / "report.md").read_text(encoding="utf-8")
    assert any(line.startswith("| tiny | fake | 6 |") for line in report.splitlines()), report[-3000:]

    # Unchanged: a rerun materializes nothing and asks nothing.
    again = _sctc(tmp_path, "run", "--benchmarks", "tiny", "--models", "fake", "--out", str(out), "--no-report")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "unchanged since their last materialization" in again.stdout
    assert _calls(tmp_path) == 6

    # The estimate and the option list know it too.
    estimate = _sctc(tmp_path, "plan", "--benchmarks", "tiny", "--models", "fake")
    assert estimate.returncode == 0, estimate.stderr[-2000:]
    assert estimate.stdout.startswith("tiny:"), estimate.stdout
    rows = [[cell.strip() for cell in line.split("|")[1:6]] for line in estimate.stdout.splitlines()
            if line.startswith("| fake") and "zh_han" in line]
    # model, partition, calls, cached, to ask: the 3 questions of each script, all answered from the cache
    assert rows == [["fake", "zh_hans", "3", "3", "0"], ["fake", "zh_hant", "3", "3", "0"]], estimate.stdout
    assert "tiny" in _sctc(tmp_path, "run", "--help").stdout


def test_a_benchmark_module_without_a_spec_is_refused_by_name(tmp_path):
    done = _sctc(tmp_path, "run", "--help", modules="sctc_assets_tests.fakes")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "benchmark module 'sctc_assets_tests.fakes'" in done.stderr and "SPEC" in done.stderr
