"""The documentation site as a reader gets it: `sctc docs` builds it strictly (a broken link, a missing page or a
bad anchor fails) only when a source changed, serves it offline, and every page opens in headless Chromium with no
console error or failed load, every image drawn and every internal link (and its anchor) resolving."""

from __future__ import annotations

import html.parser
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from sctc_assets.cli import docs as docs_command
from sctc_assets_tests.chromium import Browser, find_chromium

pytest.importorskip("mkdocs", reason="the dev extra's mkdocs is not installed (pip install -e \".[dev]\")")
pytest.importorskip("material", reason="the dev extra's mkdocs-material is not installed")

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = find_chromium()
BROKEN_IMAGES = "Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
IMAGES = "Array.from(document.images).filter(i => i.naturalWidth > 0).length"
LINKS = "Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"


def _sctc(*arguments: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sctc_assets.cli", *arguments], cwd=REPO, capture_output=True,
                          text=True, timeout=600, **kwargs)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("site") / "site"
    built = _sctc("docs", "--build-only", "--site-dir", str(folder))
    assert built.returncode == 0, built.stderr + built.stdout
    return folder


def _nav_pages() -> list[str]:
    import yaml

    def walk(items):
        for item in items:
            for value in item.values():
                yield from walk(value) if isinstance(value, list) else [value]

    return list(walk(yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]))


def test_sctc_docs_builds_the_site_strictly_and_only_when_needed(site):
    pages = _nav_pages()
    assert len(pages) >= 20
    for page in pages:
        assert (site / page.replace(".md", ".html")).is_file(), page
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "Set up and run" in home and 'src="audit-report.png"' in home  # the README, its links made relative
    again = _sctc("docs", "--build-only", "--site-dir", str(site))
    assert again.returncode == 0 and "up to date" in again.stdout


def test_a_warning_fails_sctc_docs_as_it_fails_ci(tmp_path, monkeypatch):
    """A copy of the sources with one page linking to a page that does not exist: the build stops, naming it."""
    copy = tmp_path / "checkout"
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copytree(REPO / "scripts", copy / "scripts")
    for name in ("mkdocs.yml", "README.md"):
        shutil.copy2(REPO / name, copy / name)
    (copy / "docs" / "statistics.md").write_text("# Statistics\n\n[nowhere](no-such-page.md)\n", encoding="utf-8")
    monkeypatch.setattr(docs_command, "CHECKOUT", copy)
    monkeypatch.setattr(docs_command, "CONFIG", copy / "mkdocs.yml")
    with pytest.raises(SystemExit, match="no-such-page.md"):
        docs_command.build(tmp_path / "site")


def test_sctc_help_points_to_the_docs_command():
    shown = _sctc("--help")
    assert shown.returncode == 0 and "`sctc docs` builds it" in shown.stdout
    assert re.search(r"^ +docs +build the documentation site", shown.stdout, re.M), shown.stdout


class _Ids(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.ids.update(value for name, value in attrs if name == "id" and value)


def _ids(page: Path) -> set[str]:
    parser = _Ids()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.ids


@pytest.fixture(scope="module")
def served(site):
    """`sctc docs` serving the built site on a free port; yields its base URL."""
    process = subprocess.Popen([sys.executable, "-m", "sctc_assets.cli", "docs", "--site-dir", str(site),
                                "--port", "0"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        lines = []
        deadline = time.monotonic() + 120
        while not any(" at http://" in line for line in lines):
            assert time.monotonic() < deadline and process.poll() is None, (lines, process.stderr.read())
            lines.append(process.stdout.readline())
        url = next(line for line in lines if " at http://" in line).split(" at ")[1].split()[0]
        yield url
    finally:
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=30) == 0  # Ctrl-C stops it cleanly


def test_the_site_is_served_offline(served, site):
    with urllib.request.urlopen(served + "index.html", timeout=10) as response:
        assert response.status == 200 and b"sctc-assets" in response.read()
    with urllib.request.urlopen(served + "search/search_index.json", timeout=10) as response:
        assert b"getting-started" in response.read()
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(served + "no-such-page.html", timeout=10)
    assert missing.value.code == 404


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install chromium; "
                                             ".ci/run installs it)")
@pytest.mark.slow
def test_every_page_loads_draws_its_images_and_links_inside_the_site(served, site):
    pages = sorted(path.relative_to(site).as_posix() for path in site.rglob("*.html") if path.name != "404.html")
    assert len(pages) >= len(_nav_pages())
    problems, drawn, checked = [], 0, set()
    with Browser(CHROMIUM, width=1300, height=900) as browser:
        for page in pages:
            browser.open(served + page)
            # A request the previous page left in flight (its search index) is cancelled by the navigation: that
            # ERR_ABORTED is the browser's doing, not the page's.
            problems += [f"{page}: {problem}" for problem in browser.problems() if "ERR_ABORTED" not in problem]
            problems += [f"{page}: image not drawn: {src}" for src in browser.evaluate(BROKEN_IMAGES)]
            drawn += browser.evaluate(IMAGES)
            for link in browser.evaluate(LINKS):
                if not link.startswith(served) or link in checked:
                    continue  # links out of the site (papers, repositories) are not followed offline
                checked.add(link)
                target, _, anchor = urllib.parse.unquote(link[len(served):]).partition("#")
                file = site / (target or "index.html")
                if file.is_dir():
                    file = file / "index.html"
                if not file.is_file():
                    problems.append(f"{page}: link to a missing page: {link}")
                elif anchor and file.suffix == ".html" and anchor not in _ids(file):
                    problems.append(f"{page}: link to a missing anchor: {link}")
    assert not problems, "\n".join(problems)
    assert drawn >= 3  # the README's two screenshots on the home page, the report's on its page
    assert len(checked) > 100
