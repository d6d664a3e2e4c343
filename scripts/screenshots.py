"""Re-take the screenshots the README and the documentation site show, from the real report and the real UI.

    python scripts/screenshots.py [--data-dir DIR] [--keep DIR] [--out docs]

Without --data-dir it fills a scratch data folder first, offline, from the published answers: the term benchmark
on the 11 SC-TC-Bench replays and the sovereignty benchmark on the Pro study's published files (`--tsb-results`),
with `$SCTC_UPSTREAM` / `$SCTC_TSB_UPSTREAM` as `sctc run` reads them. Then:

- `sctc report` builds the audit report from that folder, and headless Chromium photographs its first screen
  (OUT/audit-report.png);
- `sctc ui` starts on that folder's instance (dagster dev: the webserver and the daemon) and Chromium
  photographs the term benchmark's asset lineage (OUT/dagster-ui.png) and the Runs page (OUT/dagster-ui-runs.png).

Each picture is reduced to 256 colours, which keeps it under 300 KB (the script fails if one is not).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sctc_assets_tests.servers import free_port, wait_until_answers  # noqa: E402

MAX_BYTES = 300 * 1024
# The SC-TC-Bench replays' registry keys, as data/models.yaml names them.
REPLAYS = re.compile(r"^  (paper-[a-z0-9.\-]+):", re.M)
LINEAGE_PATH = "/locations/__repository__@sctc_assets/asset-groups/term"
# A first visit to the UI opens a "Join the Dagster community" dialog over the page; its Skip button closes it.
SKIP_DIALOG = """(() => { const skip = Array.from(document.querySelectorAll('button'))
  .find(button => button.innerText.trim() === 'Skip'); if (skip) { skip.click(); } return Boolean(skip); })()"""


def _environment(data_dir: Path, registry: Path) -> dict[str, str]:
    environment = {**os.environ, "SCTC_DATA_DIR": str(data_dir), "SCTC_MODELS": str(registry),
                   "DAGSTER_HOME": str(data_dir / "dagster_home"), "SCTC_NO_REPORT": "1", "PYTHONPATH": str(REPO)}
    return environment


def _scratch_registry(data_dir: Path) -> Path:
    """The shipped registry with only the replays as default models: no model is asked, nothing is paid."""
    text = (REPO / "data" / "models.yaml").read_text(encoding="utf-8")
    replays = set(REPLAYS.findall(text))
    if len(replays) != 11:
        raise SystemExit(f"data/models.yaml: expected the 11 paper-* replays, found {sorted(replays)}")
    text = re.sub(r"^(\s+)default: true\n", r"\1default: false\n", text, flags=re.M)
    registry = data_dir / "models.yaml"
    registry.write_text(text, encoding="utf-8")
    return registry


def fill(data_dir: Path) -> Path:
    registry = _scratch_registry(data_dir)
    replays = sorted(set(REPLAYS.findall(registry.read_text(encoding="utf-8"))))
    environment = _environment(data_dir, registry)
    for arguments in (["--benchmarks", "term", "--models", *replays],
                      ["--benchmarks", "sovereignty", "--tsb-results"]):
        command = [sys.executable, "-m", "sctc_assets.cli", "run", *arguments, "--no-report",
                   "--out", str(data_dir / "outputs")]
        print("$", " ".join(command[1:]), flush=True)
        subprocess.run(command, cwd=REPO, env=environment, check=True)
    return registry


def _shrink(png: bytes, target: Path) -> None:
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    image.save(target, optimize=True)
    size = target.stat().st_size
    print(f"{target}: {image.width}×{image.height}, {size // 1024} KB")
    if size > MAX_BYTES:
        raise SystemExit(f"{target} is {size // 1024} KB, over the {MAX_BYTES // 1024} KB limit")


def _viewport(browser, width: int, height: int) -> None:
    """The page laid out at exactly width × height CSS pixels (the window's own size includes its frame)."""
    browser.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
    browser.call("Emulation.setScrollbarsHidden", hidden=True)


def _capture(browser, width: int, height: int) -> bytes:
    import base64

    shot = browser.call("Page.captureScreenshot", format="png",
                        clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
    return base64.b64decode(shot["data"])


def report_screenshot(data_dir: Path, registry: Path, target: Path, chromium: str) -> None:
    from sctc_assets_tests.chromium import Browser

    out = data_dir / "screenshot-report"
    subprocess.run([sys.executable, "-m", "sctc_assets.cli", "report", "--out", str(out)], cwd=REPO,
                   env=_environment(data_dir, registry), check=True, stdout=subprocess.DEVNULL)
    page = out / "report" / "index.html"
    width, height = 1600, 1000
    with Browser(chromium, width=width, height=height) as browser:
        _viewport(browser, width, height)
        browser.open(page.resolve().as_uri())
        problems = browser.problems()
        if problems:
            raise SystemExit(f"{page}: {problems}")
        _shrink(_capture(browser, width, height), target)






def ui_screenshot(data_dir: Path, registry: Path, target: Path, chromium: str) -> None:
    from sctc_assets_tests.chromium import Browser

    port = free_port()
    # `sctc ui` as a user starts it (dagster dev: the webserver and the daemon on this data folder's instance)
    server = subprocess.Popen([sys.executable, "-m", "sctc_assets.cli", "ui", "--port", str(port)],
                              cwd=REPO, env=_environment(data_dir, registry),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until_answers(f"http://127.0.0.1:{port}/server_info", server)
        width, height = 1600, 1000
        with Browser(chromium, width=width, height=height, timeout=120) as browser:
            _viewport(browser, width, height)
            browser.open(f"http://127.0.0.1:{port}{LINEAGE_PATH}")
            deadline = time.monotonic() + 180
            # The graph is drawn once the code location has loaded: wait for its first and a last asset (long names
            # are shortened on the nodes, these two are not).
            while not all(name in (browser.evaluate("document.body.innerText") or "")
                          for name in ("regional_terms", "term_choice_tests")) or browser.evaluate(SKIP_DIALOG):
                if time.monotonic() > deadline:
                    raise SystemExit(f"the lineage page never showed the term assets: "
                                     f"{(browser.evaluate('document.body.innerText') or '')[:300]!r}")
                time.sleep(1)
            time.sleep(5)  # the graph's layout and zoom-to-fit animation
            browser.evaluate(SKIP_DIALOG)
            _shrink(_capture(browser, width, height), target)
            browser.open(f"http://127.0.0.1:{port}/runs")
            while "Success" not in (browser.evaluate("document.body.innerText") or ""):
                if time.monotonic() > deadline:
                    raise SystemExit("the Runs page never listed a successful run")
                time.sleep(1)
            time.sleep(2)
            browser.evaluate(SKIP_DIALOG)
            time.sleep(1)
            _shrink(_capture(browser, width, height), target.with_name(target.stem + "-runs.png"))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path,
                        help="a $SCTC_DATA_DIR that `sctc run` filled (default: fill a scratch one from the replays)")
    parser.add_argument("--keep", type=Path, help="fill this folder instead of a temporary one, and keep it")
    parser.add_argument("--out", type=Path, default=REPO / "docs", help="where the PNG files go (default docs/)")
    parser.add_argument("--only", choices=("report", "ui"), help="take one of the two")
    args = parser.parse_args()

    from sctc_assets_tests.chromium import find_chromium

    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("no Chromium on this machine (Debian: apt-get install chromium)")
    scratch = None
    if args.data_dir:
        data_dir = args.data_dir.resolve()
        registry = Path(os.environ.get("SCTC_MODELS") or REPO / "data" / "models.yaml")
    else:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            data_dir = args.keep.resolve()
        else:
            scratch = tempfile.mkdtemp(prefix="sctc-screenshots-")
            data_dir = Path(scratch)
        registry = fill(data_dir)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        if args.only in (None, "report"):
            report_screenshot(data_dir, registry, args.out / "audit-report.png", chromium)
        if args.only in (None, "ui"):
            ui_screenshot(data_dir, registry, args.out / "dagster-ui.png", chromium)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
