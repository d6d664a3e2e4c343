"""`sctc fetch`: every download a `sctc run` with the same options would make, done ahead of it, into the machine's
download cache, so the run itself (in this data folder or any other) fetches nothing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sctc_assets.backends import backend_class
from sctc_assets.backends.transformers_backend import TransformersBackend
from sctc_assets.benchmarks import SPECS
from sctc_assets.cli.selection import chosen_benchmarks, print_problems, select, specs_of
from sctc_assets.lib.fetching import fetch_all, model_downloads, unique
from sctc_assets.lib.generation import BackendUnavailable
from sctc_assets.lib.name.tokenization import TokenizerUnavailable
from sctc_assets.lib.paths import DownloadCacheError, download_cache_dir
from sctc_assets.lib.upstream_source import UpstreamError


def _transformers(entry) -> bool:
    """Whether the entry's backend class is (or extends) the transformers backend, which loads weights itself."""
    try:
        return entry is not None and issubclass(backend_class(entry.backend), TransformersBackend)
    except (ImportError, ValueError):
        return False


def _hub_models(entries: dict, keys: list[str]) -> list[str]:
    """Models the transformers backend loads from the Hugging Face hub (its own cache, `huggingface_hub`'s)."""
    hub = []
    for key in keys:
        settings = entries[key].settings if key in entries else {}
        model = str(settings.get("model") or "")
        if _transformers(entries.get(key)) and not settings.get("embedded") \
                and model and not Path(model).expanduser().exists():
            hub.append(f"{key} ({model})")
    return hub


def _conversions(entries: dict, keys: list[str]) -> list:
    """The weights the embedded model's first start would de-quantize: done here, once per machine."""
    found = []
    for key in keys:
        entry = entries.get(key)
        if _transformers(entry) and entry.settings.get("embedded"):
            download = TransformersBackend(**entry.settings).converted_weights_download(key)
            if download is not None:
                found.append(download)
    return found


def main(args: argparse.Namespace) -> int:
    args.benchmarks = chosen_benchmarks(args.benchmarks)
    selection = select(args, check_keys=False)
    if isinstance(selection, int):
        return selection
    options = vars(args)
    running = selection.running(specs_of(args.benchmarks))
    try:
        downloads = unique([*(item for name in args.benchmarks for item in SPECS[name].downloads(options)),
                            *model_downloads(selection.entries, running),
                            *_conversions(selection.entries, running)])
        fetched = fetch_all(downloads, emit=print)
    except DownloadCacheError as exc:
        return print_problems([str(exc)])
    except (UpstreamError, BackendUnavailable, TokenizerUnavailable, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    hub = _hub_models(selection.entries, running)
    if hub:
        print(f"not fetched here: {', '.join(hub)}: the Hugging Face hub's own cache, on the first run")
    print(f"{fetched} fetched, {len(downloads) - fetched} already there (download cache {download_cache_dir()})")
    return 0
