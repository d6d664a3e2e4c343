"""`sctc docs`: build the MkDocs site of this checkout when its sources changed, and serve it on 127.0.0.1.

Served by the standard library's HTTP server rather than opened as files: the site's search index is fetched by a web
worker, which browsers refuse to load from file:// URLs."""

from __future__ import annotations

import argparse
import functools
import http.server
import importlib.util
import os
import subprocess
import sys
import webbrowser
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
CONFIG = CHECKOUT / "mkdocs.yml"
SOURCES = (CONFIG, CHECKOUT / "docs", CHECKOUT / "README.md")


def _newest_source() -> float:
    newest = 0.0
    for source in SOURCES:
        paths = source.rglob("*") if source.is_dir() else [source]
        newest = max([newest, *(path.stat().st_mtime for path in paths if path.is_file())])
    return newest


def needs_build(site: Path) -> bool:
    index = site / "index.html"
    return not index.exists() or index.stat().st_mtime < _newest_source()


def build(site: Path) -> None:
    """`mkdocs build --strict` into `site`; raises SystemExit naming the problem (a warning fails, as in CI)."""
    if importlib.util.find_spec("mkdocs") is None:
        raise SystemExit("sctc docs: mkdocs is not installed; install the dev extra: pip install -e \".[dev]\"")
    print(f"building the documentation: mkdocs build --strict -d {site}", flush=True)
    # Not --quiet: it drops the warnings before --strict counts them, and the build would pass with them.
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(CONFIG),
                             "-d", str(site)], cwd=CHECKOUT, capture_output=True, text=True,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    if result.returncode != 0:
        output = (result.stderr + result.stdout).splitlines()
        problems = [line for line in output if line.startswith(("WARNING", "ERROR", "Aborted"))] or output
        raise SystemExit(f"sctc docs: mkdocs build failed (exit {result.returncode}):\n" + "\n".join(problems))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # one line per request would drown the URL
        pass


def serve(site: Path, port: int, open_browser: bool) -> int:
    handler = functools.partial(_QuietHandler, directory=str(site))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        print(f"sctc docs: cannot listen on 127.0.0.1:{port}: {exc.strerror}; choose another --port (0: any free "
              f"port)", file=sys.stderr)
        return 2
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    print(f"serving {site} at {url} (Ctrl-C stops)", flush=True)
    if open_browser:
        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def main(args: argparse.Namespace) -> int:
    if not CONFIG.exists():
        print(f"sctc docs: no mkdocs.yml at {CONFIG}: the documentation is built from a source checkout "
              f"(git clone, then pip install -e \".[dev]\")", file=sys.stderr)
        return 2
    site = (args.site_dir or CHECKOUT / "site").resolve()
    if args.rebuild or needs_build(site):
        build(site)
    else:
        print(f"the documentation in {site} is up to date with its sources", flush=True)
    if args.build_only:
        print(f"built: {site / 'index.html'}")
        return 0
    return serve(site, args.port, args.open)
