"""The Dagster UI's Runs page as a person sees it (headless Chromium at 1,400 px, a real `dagster-webserver` on the
instance `sctc run` wrote): every run shows its target and status without horizontal scrolling, and the process
bookkeeping (host, pid, process start, settings digest) is kept out of the visible tags (issue #27, point 4)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sctc_assets.cli import main
from sctc_assets.running.instance import HOST_TAG, PID_TAG, PROCESS_START_TAG, cli_instance
from sctc_assets.running.unchanged import SETTINGS_TAG
from sctc_assets_tests.chromium import Browser, find_chromium
from sctc_assets_tests.servers import free_port, wait_until_answers

CHROMIUM = find_chromium()
REPO = Path(__file__).resolve().parents[1]
ITEMS = """concept_id,definition_zh_hans,term_cn,term_tw
k1,一种两人并排骑的车,双座车,雙座車
k2,用来擦桌子的布,抹桌布,抹布
"""
TARGETS = ("_inputs", "_model_lang", "_per_model", "_cross_model")
# Every text node that names a run's target or its status, with its box.
BOXES = """(() => { const found = []; const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) { const text = walker.currentNode.textContent.trim();
    if (text === 'Success' || (text.startsWith('terms_') && (%s))) { const box = walker.currentNode.parentElement.getBoundingClientRect();
      found.push([text, box.left, box.right, box.top]); } }
  return found; })()""" % " || ".join(f"text.endsWith('{suffix}')" for suffix in TARGETS)






@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install chromium; "
                                             ".ci/run installs it)")
def test_the_runs_page_shows_target_and_status_of_every_run_at_1400_px(isolated_data_dir, tmp_path, monkeypatch):
    items = tmp_path / "two_words.csv"
    items.write_text(ITEMS, encoding="utf-8")
    registry = tmp_path / "models.yaml"
    registry.write_text("models:\n  fake: {backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: fake, "
                        "default_answer: '雙座車'}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    assert main(["run", "--benchmarks", "term", "--term-items", str(items), "--models", "fake", "--trials", "1",
                 "--prompt-variants", "1", "--no-report"]) == 0
    home = isolated_data_dir / "dagster_home"
    runs = cli_instance(home).get_runs()
    assert len(runs) == 5  # inputs, two model × variety partitions, per model, across models
    for run in runs:  # the bookkeeping is still there, under keys the UI hides
        assert {HOST_TAG, PID_TAG, SETTINGS_TAG} <= set(run.tags) and not any(
            key.startswith("sctc/") and key.split("/")[1] in ("host", "pid", "process_start", "settings")
            for key in run.tags)
    assert PROCESS_START_TAG in runs[0].tags or sys.platform != "linux"

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "dagster_webserver", "-h", "127.0.0.1", "-p", str(port),
                               "-w", str(REPO / "workspace.yaml")], cwd=REPO,
                              env={**os.environ, "DAGSTER_HOME": str(home)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until_answers(f"http://127.0.0.1:{port}/server_info", server)
        with Browser(CHROMIUM, width=1400, height=1000) as browser:
            browser.open(f"http://127.0.0.1:{port}/runs")
            deadline = time.monotonic() + 120
            while browser.evaluate("document.body.innerText.split('Success').length - 1") < len(runs):
                assert time.monotonic() < deadline, "the Runs page never listed the runs"
                time.sleep(0.5)
            boxes = browser.evaluate(BOXES)
            width, page_width = browser.evaluate("[window.innerWidth, document.documentElement.scrollWidth]")
            text = browser.evaluate("document.body.innerText")
    finally:
        os.killpg(server.pid, 15)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait(timeout=30)
    statuses = [box for box in boxes if box[0] == "Success"]
    targets = [box for box in boxes if box[0] != "Success"]
    assert len(statuses) == len(runs) and len(targets) == len(runs), boxes
    assert page_width <= width == 1400  # no horizontal scrolling
    assert all(0 <= left and right <= width for _, left, right, _ in boxes), boxes
    first = min(top for *_, top in statuses)
    assert first < 1000  # the newest run's status on the first screen
    for hidden in ("sctc/host", "sctc/pid", "sctc/process_start", "sctc/settings", "sctc_settings"):
        assert hidden not in text
    assert "sctc/benchmark: terms_two_words" in text and "sctc/stage: per_model" in text
