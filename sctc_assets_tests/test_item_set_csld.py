"""The csld four-region list (g0v/moedict-data-csld, read from `$SCTC_CSLD_UPSTREAM` at run time and never stored
here: its licence forbids derivatives) end to end: `sctc terms define` drafts its definitions through a fake model,
then `sctc run --term-items` asks it in zh-TW, zh-CN, zh-HK and zh-MO through the project's stub OpenAI server and
through the embedded model, and the audit report's heatmap is checked in headless Chromium."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from sctc_assets.cli import main
from sctc_assets.lib.term.items import CSLD_THREE_PLACES, from_csld, read_item_csv, write_item_csv
from sctc_assets.lib.term.variety_prompts import STATED, build_variety_prompts
from sctc_assets.lib.varieties import load_catalog
from sctc_assets_tests.chromium import Browser, find_chromium
from sctc_assets_tests.openai_stub_server import StubOpenAIServer, completion

VARIETIES = ["zh-TW", "zh-CN", "zh-HK", "zh-MO"]
CONCEPTS = 6  # the first concepts with a form in all four regions
KEY_ENV = "SCTC_TEST_STUB_KEY"
IMAGES_SETTLED = ("new Promise(resolve => { const wait = () => Array.from(document.images).every(i => i.complete) ? "
                  "resolve(true) : setTimeout(wait, 50); wait(); })")


@pytest.fixture
def defined_items(csld_location: Path, isolated_data_dir: Path, tmp_path: Path, monkeypatch) -> Path:
    """A few csld concepts in a temporary file, their definitions drafted by `sctc terms define` with a fake model."""
    full = from_csld(csld_location / CSLD_THREE_PLACES)
    assert len(full) == 987 and full.regions == ("tw", "cn", "hk", "mo")
    chosen = [concept for concept in full.concepts if all(concept.forms_of(region) for region in full.regions)]
    subset = tmp_path / "csld_four.csv"
    write_item_csv(replace(full, concepts=tuple(chosen[:CONCEPTS])), subset)
    registry = tmp_path / "drafter.yaml"
    registry.write_text("models:\n  drafter: {backend: 'sctc_assets_tests.fakes:DefinitionBackend'}\n",
                        encoding="utf-8")
    defined = tmp_path / "csld_four.defined.csv"
    assert main(["terms", "define", "--items", str(subset), "--model", "drafter", "--registry", str(registry)]) == 0
    items = read_item_csv(defined)
    assert len(items) == CONCEPTS and {c.definition_source for c in items.concepts} == {"model:drafter"}
    return defined


def _matrix(out: Path, name: str) -> dict[tuple[str, str], float]:
    matrix = pd.read_parquet(out / f"terms_{name}_matrix.parquet")
    return {(row.variety, row.answered_region): row.pct for row in matrix.itertuples()}


@pytest.mark.slow
def test_the_csld_list_through_the_stub_openai_server(defined_items, tmp_path, monkeypatch, capfd):
    """A model that always answers Hong Kong's first form, asked with the `stated` cue (each variety its own
    prompt): every answer is stored once, zh-HK is 100 % aligned, and every variety's answers hold Hong Kong's form."""
    items = read_item_csv(defined_items)
    prompts = build_variety_prompts(items, [load_catalog().variety(code) for code in VARIETIES], cue=STATED,
                                    variants=(1,), trials=1)
    hong_kong = {concept.concept_id: concept.forms_of("hk")[0] for concept in items.concepts}
    monkeypatch.setenv(KEY_ENV, "sk-test-not-a-real-key")
    with StubOpenAIServer() as server:
        for prompt, concept_id in zip(prompts.prompt, prompts.concept_id):
            server.script(prompt, completion(f"這叫「{hong_kong[concept_id]}」。"))
        registry = tmp_path / "models.yaml"
        registry.write_text(
            "models:\n  stub-api: {backend: openai, model: stub-model, base_url: '" + server.base_url + "', "
            f"api_key_env: {KEY_ENV}, max_retries: 1, backoff_initial_s: 0.01, timeout_s: 5}}\n", encoding="utf-8")
        monkeypatch.setenv("SCTC_MODELS", str(registry))
        out = tmp_path / "out"
        assert main(["run", "--benchmarks", "term", "--term-items", str(defined_items), "--item-set-name", "csld4",
                     "--varieties", *VARIETIES, "--cue", "stated", "--models", "stub-api", "--trials", "1",
                     "--prompt-variants", "1", "--out", str(out)]) == 0, capfd.readouterr()
        assert len(server.requests) == len(prompts) == len(set(prompts.prompt))
        assert len({request.body_key for request in server.requests}) == len(server.requests)  # none paid twice
    responses = pd.read_parquet(out / "terms_csld4_responses.parquet")
    assert len(responses) == len(prompts) and (responses.outcome == "ok").all()
    assert "sk-test-not-a-real-key" not in capfd.readouterr().out
    matrix = _matrix(out, "csld4")
    assert matrix[("zh-HK", "hk")] == 100 and all(matrix[(variety, "hk")] == 100 for variety in VARIETIES)
    rates = pd.read_parquet(out / "terms_csld4_rates.parquet").set_index(["variety", "definitions", "measure"])
    assert rates.loc[("zh-HK", "all", "correct"), "pct"] == 100
    assert rates.loc[("zh-HK", "model", "correct"), "n"] == CONCEPTS  # every definition here is model-written


@pytest.mark.slow
def test_the_csld_list_through_the_embedded_model_and_its_report_in_a_browser(defined_items, embedded_offline,
                                                                              tmp_path, capfd):
    out = tmp_path / "out"
    assert main(["run", "--benchmarks", "term", "--term-items", str(defined_items), "--item-set-name", "csld4",
                 "--varieties", *VARIETIES, "--models", "qwen2.5-coder-0.5b-instruct", "--trials", "1",
                 "--prompt-variants", "1", "--out", str(out)]) == 0, capfd.readouterr()
    responses = pd.read_parquet(out / "terms_csld4_responses.parquet")
    assert responses.groupby("variety").size().to_dict() == {variety: CONCEPTS for variety in VARIETIES}
    assert (responses.outcome == "ok").all()
    labels = pd.read_parquet(out / "terms_csld4_labels.parquet")
    assert len(labels) == len(responses) and labels.label.isin(["correct", "misaligned", "incorrect"]).all()
    matrix = _matrix(out, "csld4")
    assert {variety for variety, _ in matrix} == set(VARIETIES)
    # the report, built by a fresh process that reads the set from the run registry
    report_out = tmp_path / "report-out"
    built = subprocess.run([sys.executable, "-m", "sctc_assets.cli", "report", "--out", str(report_out)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    page = report_out / "report" / "index.html"
    text = page.read_text(encoding="utf-8")
    assert "Terms csld4</th>" in text and "aligned % (zh-HK)" in text  # the scorecard's group and its columns
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium)")
    with Browser(chromium) as browser:
        browser.open(page.resolve().as_uri())
        browser.evaluate(IMAGES_SETTLED)
        heatmaps = browser.evaluate("Array.from(document.querySelectorAll('figure[data-figure]'))"
                                    ".filter(f => f.dataset.figure.startsWith('terms_csld4_matrix'))"
                                    ".map(f => f.querySelector('img').naturalWidth)")
        assert heatmaps and all(width > 100 for width in heatmaps)
        headers = browser.evaluate("Array.from(document.querySelectorAll('#scorecard thead tr.columns th'))"
                                   ".map(th => th.textContent.trim())")
        assert any("zh-MO" in header for header in headers)
