"""The audit report opened in a real browser (headless Chromium from Debian's `chromium` package, which `.ci/run`
installs): no broken image or resource, no console error, one scorecard row per model, every figure the report
lists present and drawn, sorting works offline. Saves a screenshot (`$SCTC_REPORT_SCREENSHOT` to keep it)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from sctc_assets.benchmarks import REPORT_INPUTS, REPORT_TABLES, RESPONSE_TABLES, report_sections
from sctc_assets.lib.report import ReportInputs, build_report, read_tables, response_usage
from sctc_assets_tests.chromium import Browser, find_chromium
from sctc_assets_tests.report_tables import full_report, registry

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install "
                                                          "chromium; .ci/run installs it)")


IMAGES_SETTLED = ("Promise.all(Array.from(document.images).map(i => i.complete ? null : "
                  "new Promise(r => { i.onload = i.onerror = r; })))")


def _open(browser: Browser, html: Path) -> None:
    browser.open(html.resolve().as_uri())
    browser.evaluate(IMAGES_SETTLED)  # every image has loaded (or failed) once `complete` holds for all of them


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory):
    """The report over every benchmark (the one test_report.py reads, built once per session)."""
    return full_report(tmp_path_factory.getbasetemp() / "full-report")


@pytest.fixture(scope="module")
def page(report):
    result, _ = report
    with Browser(CHROMIUM) as browser:
        _open(browser, result.html)
        yield browser


def test_the_page_loads_without_errors_or_network(page, report):
    result, _ = report
    assert page.problems() == []
    assert page.evaluate("document.title").startswith("sctc-assets audit report")
    urls = page.requested_urls()
    assert urls and all(url.startswith(("file://", "data:")) for url in urls), urls
    assert not [url for url in urls if url.startswith("file://") and not Path(url[7:]).exists()]


def test_every_image_is_drawn(page):
    images = page.evaluate("Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, "
                           "i.naturalWidth, i.naturalHeight])")
    assert images
    broken = [src for src, complete, width, height in images if not (complete and width > 100 and height > 100)]
    assert broken == []


def test_one_scorecard_row_per_model(page, report):
    _, models = report
    rows = page.evaluate("Array.from(document.querySelectorAll('#scorecard tbody tr')).map(r => "
                         "r.cells[0].getAttribute('data-sort'))")
    assert sorted(rows) == sorted(models)
    # The Pro-study replay ran sovereignty only: its reviews cells say so.
    cells = page.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('#scorecard tbody tr')).map(r => "
                          "[r.cells[0].getAttribute('data-sort'), r.cells[r.cells.length - 1].innerText]))")
    assert cells["tsb-demo"] == "not run" and cells["my-gpt"] != "not run"


def test_every_listed_figure_is_on_the_page_with_its_svg(page, report):
    result, _ = report
    listed = json.loads(result.manifest.read_text())["figures"]
    assert listed == result.figures and len(listed) >= 20
    shown = page.evaluate("Array.from(document.querySelectorAll('figure[data-figure]')).map(f => "
                          "[f.dataset.figure, f.querySelector('img').naturalWidth > 0, "
                          "f.querySelector('a[href$=\".svg\"]').getAttribute('href')])")
    assert [name for name, _, _ in shown] == listed
    assert all(drawn for _, drawn, _ in shown)
    # The SVG files are real images too: load each one in the page.
    sizes = page.evaluate("Promise.all(Array.from(document.querySelectorAll('figure a[href$=\".svg\"]')).map(a => "
                          "new Promise(r => { const i = new Image(); i.onload = () => r(i.naturalWidth); "
                          "i.onerror = () => r(0); i.src = a.href; })))")
    assert len(sizes) == len(listed) and min(sizes) > 100


def test_the_scorecard_sorts_in_the_browser(page):
    column = page.evaluate("Array.from(document.querySelectorAll('#scorecard thead tr.columns th'))"
                           ".findIndex(h => h.innerText.startsWith('T correct'))")
    assert column > 0
    read = ("Array.from(document.querySelectorAll('#scorecard tbody tr')).map(r => "
            f"r.cells[{column}].getAttribute('data-sort'))")
    page.evaluate(f"document.querySelectorAll('#scorecard thead tr.columns th')[{column}].click()")
    ascending = page.evaluate(read)
    numbers = [float(value) for value in ascending if value]
    assert numbers == sorted(numbers) and ascending[len(numbers):] == [None] * (len(ascending) - len(numbers))
    page.evaluate(f"document.querySelectorAll('#scorecard thead tr.columns th')[{column}].click()")
    descending = [float(value) for value in page.evaluate(read) if value]
    assert descending == sorted(numbers, reverse=True)
    assert page.problems() == []


def test_a_screenshot_is_saved(page, tmp_path):
    target = tmp_path / "report.png"
    page.screenshot(target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and target.stat().st_size > 20_000
    keep = os.environ.get("SCTC_REPORT_SCREENSHOT")
    if keep:
        shutil.copyfile(target, keep)


def test_the_review_studies_are_drawn(page, tmp_path):
    """Figures 2–4, the per-pair scatter, the pilot's and the human ratings' tables as a person sees them: each
    figure drawn, each table titled, one screenshot per figure (`$SCTC_REPORT_SCREENSHOT_DIR` to keep them)."""
    figures = ("reviews_length_acc", "reviews_length_mse", "reviews_pair_scatter", "reviews_sentiment_pilot")
    widths = page.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('figure[data-figure]')).map(f => "
                           "[f.dataset.figure, f.querySelector('img').naturalWidth]))")
    assert all(widths.get(name, 0) > 300 for name in figures), widths
    text = page.evaluate("document.body.innerText")
    assert "Appendix E: three-class sentiment by review length" in text
    assert "Human ratings (Appendix B) against the stars and the models" in text
    keep = os.environ.get("SCTC_REPORT_SCREENSHOT_DIR")
    for name in figures:
        # the figure with its title, below the page's sticky navigation bar
        page.evaluate(f"document.querySelector('figure[data-figure=\"{name}\"]').scrollIntoView(); "
                      "window.scrollBy(0, -140)")
        target = tmp_path / f"{name}.png"
        page.screenshot(target)
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and target.stat().st_size > 20_000
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(target, Path(keep) / target.name)
    assert page.problems() == []


def test_a_missing_figure_file_is_caught(page, report, tmp_path):
    """The checks above can fail: the same page with one PNG deleted shows a failed load and a broken image."""
    result, _ = report
    copy = tmp_path / "report"
    shutil.copytree(result.folder, copy)
    (copy / "figures" / f"{result.figures[0]}.png").unlink()
    _open(page, copy / "index.html")
    assert any("failed load" in problem for problem in page.problems())
    assert page.evaluate("Array.from(document.images).filter(i => i.naturalWidth === 0).length") == 1


def test_an_empty_audit_says_what_is_missing_without_errors(page, report, tmp_path):
    """Nothing materialized: every section says which table is missing and the command that produces it; the page
    has no image and no error."""
    empty = build_report(ReportInputs(benchmark_tables=REPORT_INPUTS, sections=report_sections(),
                                      tables=read_tables(tmp_path / "nothing", REPORT_TABLES), registry=registry(),
                                      usage=response_usage(tmp_path / "nothing", RESPONSE_TABLES)), tmp_path / "out")
    _open(page, empty.html)
    assert page.problems() == []
    assert page.evaluate("document.images.length") == 0
    assert page.evaluate("document.querySelectorAll('#scorecard tbody tr').length") == 0
    assert "sctc run" in page.evaluate("document.querySelector('#scorecard-section .missing').innerText")
    missing = page.evaluate("document.querySelector('#reviews .missing').innerText")
    assert "review_metrics" in missing and "sctc run --benchmarks reviews" in missing
    for section in ("term", "name", "sovereignty"):
        assert page.evaluate(f"document.querySelector('#{section} .missing').innerText")
    _open(page, report[0].html)  # back to the full report for any test after this one


def test_the_registry_settings_keep_their_lines_whole(page):
    """Each registry entry's settings JSON is shown with no line broken (a long description squeezed its column
    to a few characters, breaking `"upstream_name": "qwen"` in two), and the table fits the page."""
    shown = page.evaluate("Array.from(document.querySelectorAll('#registry pre.settings')).map(pre => { "
                          "const range = document.createRange(); range.selectNodeContents(pre); "
                          "const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top))); "
                          "return [pre.innerText.split('\\n').length, tops.size]; })")
    assert len(shown) == 4
    assert [lines for lines, _ in shown] == [rows for _, rows in shown]
    width = page.evaluate("[document.querySelector('#registry').getBoundingClientRect().right, "
                          "document.querySelector('#registry').closest('.table-wrap').getBoundingClientRect().right]")
    assert width[0] <= width[1] + 0.5


def test_the_scorecard_marks_the_label_source_and_a_reduced_run_in_each_row(page):
    cells = page.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('#scorecard tbody tr')).map(r => "
                          "[r.cells[0].getAttribute('data-sort'), [r.cells[1].innerText, r.cells[1].className, "
                          "getComputedStyle(r.cells[1]).backgroundColor, r.cells[1].title]]))")
    text, css, background, title = cells["my-gpt"]
    assert text.splitlines() == ["rules", "reduced: 1 of 15 trials · n = 110"] and css == "reduced"
    assert background != cells["paper-qwen"][2] and "this platform's rules" in title
    assert cells["paper-qwen"][0].splitlines() == ["upstream", "n = 1,650"] and cells["paper-qwen"][1] == ""


def test_the_sovereignty_conditions_table_pairs_the_persona_with_none(page):
    """`sovereignty_condition_effects` in the sovereignty section: the live model's persona against none in each
    prompting language (the replay answers none only, so it has no row), with b/c and the exact p per row."""
    rows = page.evaluate("Array.from(document.querySelectorAll('#sovereignty table')).filter(t => "
                         "t.querySelector('caption').textContent.startsWith('Conditions against no system prompt'))"
                         ".flatMap(t => Array.from(t.querySelectorAll('tbody tr')).map(r => "
                         "Array.from(r.cells).map(c => c.innerText)))")
    assert [row[:3] for row in rows] == [["my-gpt", "taiwan-user", language] for language in
                                         ("Traditional Chinese", "Simplified Chinese", "English")]
    assert all("/" in row[5] and row[6] for row in rows)
def test_the_sovereignty_drift_and_origin_tables_show_their_numbers(page):
    """#42: one drift table per model (the fixture's three English prompts flipped to failing) and the origin test."""
    drift = page.evaluate("Array.from(document.querySelectorAll('#sovereignty-drift-my-gpt tbody tr')).map(r => "
                          "Array.from(r.cells).map(c => c.innerText))")
    english = [row for row in drift if row[0] == "English"]
    assert len(drift) == 2 and len(english) == 1
    assert english[0][2:8] == ["10/10", "7/10", "3/0", "0.250", "S1-002, S1-005, S1-009", "–"]
    origin = page.evaluate("document.querySelectorAll('#sovereignty-origin-code tbody tr').length")
    assert origin >= 3  # a pass rate per prompting language and the language gaps
    assert page.problems() == []

