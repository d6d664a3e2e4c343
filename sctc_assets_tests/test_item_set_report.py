"""The report part of an item set (`lib/report/item_sets.for_item_set`), built through the report machinery
from the tables `lib/term/variety_metrics` writes: a heatmap per model, the aligned % per variety in the
scorecard, and (when Chromium is present) the same seen in a browser."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from sctc_assets.benchmarks import ReportSection
from sctc_assets.lib.report import ReportInputs, build_report
from sctc_assets.lib.report.item_sets import for_item_set
from sctc_assets.lib.term import variety_metrics as vm
from sctc_assets_tests.chromium import Browser, find_chromium
from sctc_assets_tests.test_variety_metrics import REGIONS, VARIETIES, always_taiwan

PREFIX, SET_NAME = "terms_demo", "demo"
CODES = list(VARIETIES)  # zh-TW, zh-CN, zh-HK, zh-MO
MODELS = ("model-a", "model.b/2")  # a model key that is no file name


def _tables(labels: pd.DataFrame) -> dict[str, pd.DataFrame]:
    concepts = vm.by_concept(labels)
    return {f"{PREFIX}_by_concept": concepts, f"{PREFIX}_rates": vm.variety_rates(labels),
            f"{PREFIX}_matrix": vm.variety_region_matrix(labels, REGIONS),
            f"{PREFIX}_contrasts": vm.variety_contrasts(concepts), f"{PREFIX}_power": vm.variety_power(concepts)}


def _labels() -> pd.DataFrame:
    first = always_taiwan(MODELS[0], (1, 2))
    # The second model answers the prompted region's form: always correct.
    second = always_taiwan(MODELS[1], (1,)).assign(label=lambda frame: frame["label"].where(
        frame["label"].isna(), "correct"), regions_found=lambda frame: frame["region"])
    return pd.concat([first, second], ignore_index=True)


def _inputs(tables: dict[str, pd.DataFrame], part) -> ReportInputs:
    return ReportInputs(tables=tables, sections=(ReportSection(f"terms-{SET_NAME}", part, PREFIX,
                                                               f"Terms {SET_NAME}"),),
                        benchmark_tables={f"terms-{SET_NAME}": tuple(tables)})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    part = for_item_set(PREFIX, SET_NAME, CODES)
    return build_report(_inputs(_tables(_labels()), part), tmp_path_factory.mktemp("variety-report")), part


def test_the_part_has_the_modules_shape():
    part = for_item_set(PREFIX, SET_NAME, CODES)
    assert part.HEADLINE_COLUMNS == [f"Terms demo: aligned % ({code})" for code in CODES]
    assert part.HOW == "sctc run --benchmarks term --term-items demo --varieties zh-TW zh-CN zh-HK zh-MO"
    section = part.section(_inputs(_tables(_labels()), part))
    assert section.key == PREFIX and not section.missing
    assert [figure.name for figure in section.figures] == ["terms_demo_matrix_model-a", "terms_demo_matrix_model.b-2"]
    titles = [table.title for table in section.tables]
    assert any("pairs of varieties" in title for title in titles)
    assert any("model-written definitions" in title for title in titles)  # c4's definition was drafted by a model


def test_a_heatmap_per_model_and_the_aligned_share_per_variety_in_the_scorecard(built):
    result, part = built
    assert result.figures == ["terms_demo_matrix_model-a", "terms_demo_matrix_model.b-2"]
    for name in result.figures:
        assert (result.folder / "figures" / f"{name}.png").stat().st_size > 1000
    # The cells are labelled with their percentage over its count (SVG text is text): model-a's zh-HK row holds
    # 33 %, 3 of its 9 answers; a percentage of a handful of answers says little without its n.
    svg = (result.folder / "figures" / f"{result.figures[0]}.svg").read_text()
    assert "100%" in svg and "33%" in svg and "25%" in svg
    assert "3/9" in svg and "3/12" in svg and "12/12" in svg
    assert json.loads(result.manifest.read_text())["figures"] == result.figures
    assert result.missing == []
    # Scorecard: prompt variant 1, all concepts. model-a: zh-TW 12/12, zh-CN 3/12, zh-HK 3/9, zh-MO 3/9.
    assert result.headline == pytest.approx({
        **{f"{MODELS[0]}/aligned % ({code})": value
           for code, value in zip(CODES, (100.0, 25.0, 100 / 3, 100 / 3))},
        **{f"{MODELS[1]}/aligned % ({code})": 100.0 for code in CODES}})
    markdown = result.markdown.read_text()
    row = next(line for line in markdown.splitlines() if line.startswith(f"| {MODELS[0]} "))
    assert " 25.0 [" in row and " 100.0 [" in row
    html = result.html.read_text()
    assert all(f"aligned % ({code})" in html for code in CODES)


def test_missing_tables_say_how_to_produce_them(tmp_path):
    part = for_item_set(PREFIX, SET_NAME, CODES[:2])
    result = build_report(_inputs({}, part), tmp_path)
    assert result.figures == [] and result.missing == [f"{PREFIX}: {PREFIX}_rates has no rows for the chosen models"]
    assert part.HOW in result.html.read_text()
    rates_only = {f"{PREFIX}_rates": _tables(_labels())[f"{PREFIX}_rates"]}
    section = part.section(_inputs(rates_only, part))
    assert section.figures == [] and len(section.missing) == 2


CHROMIUM = find_chromium()
IMAGES_SETTLED = ("Promise.all(Array.from(document.images).map(i => i.complete ? null : "
                  "new Promise(r => { i.onload = i.onerror = r; })))")


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install chromium; "
                                             ".ci/run installs it)")
def test_the_heatmaps_and_the_scorecard_in_a_browser(built):
    result, _ = built
    with Browser(CHROMIUM) as browser:
        browser.open(result.html.resolve().as_uri())
        browser.evaluate(IMAGES_SETTLED)
        assert browser.problems() == []
        shown = browser.evaluate("Array.from(document.querySelectorAll('figure[data-figure]')).map(f => "
                                 "[f.dataset.figure, f.querySelector('img').naturalWidth])")
        assert [name for name, _ in shown] == result.figures
        assert all(width > 100 for _, width in shown)
        headers = browser.evaluate("Array.from(document.querySelectorAll('#scorecard thead tr.columns th'))"
                                   ".map(h => h.innerText.trim())")
        cells = browser.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('#scorecard tbody tr'))"
                                 ".map(r => [r.cells[0].getAttribute('data-sort'), "
                                 "Array.from(r.cells).map(c => c.innerText)]))")
    columns = [headers.index(f"aligned % ({code})") for code in CODES]
    values = [re.match(r"[\d.]+", cells[MODELS[0]][index]).group(0) for index in columns]
    assert values == ["100.0", "25.0", "33.3", "33.3"]
    assert [re.match(r"[\d.]+", cells[MODELS[1]][index]).group(0) for index in columns] == ["100.0"] * 4
