"""Where the platform keeps its files.

Configuration shipped with the repository (model, corpus and tokenizer registries, the sample reviews) is read from
the repository's `data/`; everything written at run time lives under one data folder, `$SCTC_DATA_DIR` if set,
except what is downloaded (or joined from downloaded parts): that lives once per machine in the download cache,
`$SCTC_DOWNLOAD_CACHE`, so a fresh data folder starts its analysis without fetching anything again.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO_DATA_DIR = PACKAGE_DIR.parent / "data"


DOWNLOAD_CACHE_ENV_VAR = "SCTC_DOWNLOAD_CACHE"


class DownloadCacheError(ValueError):
    """The download cache folder cannot be used (a file in its place, no permission to write there)."""


def data_dir() -> Path:
    """`$SCTC_DATA_DIR`, else the repository's `data/` (editable installs), else `./data`."""
    configured = os.environ.get("SCTC_DATA_DIR")
    if configured:
        return Path(configured).expanduser().resolve()
    if REPO_DATA_DIR.is_dir():
        return REPO_DATA_DIR
    return Path.cwd() / "data"


def shipped_data_dir() -> Path:
    """The repository's `data/` (editable installs), else the run-time data folder."""
    return REPO_DATA_DIR if REPO_DATA_DIR.is_dir() else data_dir()


def default_registry_path() -> Path:
    configured = os.environ.get("SCTC_MODELS")
    return Path(configured).expanduser() if configured else shipped_data_dir() / "models.yaml"


def default_corpora_path() -> Path:
    configured = os.environ.get("SCTC_CORPORA")
    return Path(configured).expanduser() if configured else shipped_data_dir() / "corpora.yaml"


def default_tokenizers_path() -> Path:
    configured = os.environ.get("SCTC_TOKENIZERS")
    return Path(configured).expanduser() if configured else shipped_data_dir() / "tokenizers.yaml"


def default_cache_path() -> Path:
    return data_dir() / "cache" / "responses.sqlite"


def default_storage_dir() -> Path:
    return data_dir() / "storage"


def default_outputs_dir() -> Path:
    return data_dir() / "outputs"


def default_upstream_cache_dir() -> Path:
    return data_dir() / "upstream"


def download_cache_dir() -> Path:
    """`$SCTC_DOWNLOAD_CACHE`, else `$XDG_CACHE_HOME/sctc-assets`, else `~/.cache/sctc-assets`.

    Downloads are the same bytes for every data folder on the machine (verified where a hash is known), so they are
    kept outside any of them. A relative `$XDG_CACHE_HOME` is ignored, as the XDG specification asks.
    """
    configured = os.environ.get(DOWNLOAD_CACHE_ENV_VAR)
    if configured:
        return Path(configured).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "sctc-assets"


def download_dir(part: str) -> Path:
    """The folder `part` of the download cache, created; `DownloadCacheError` names the setting when it cannot be."""
    root = download_cache_dir()
    configured = os.environ.get(DOWNLOAD_CACHE_ENV_VAR)
    setting = (f"${DOWNLOAD_CACHE_ENV_VAR}={configured}" if configured
               else f"the download cache {root} (set ${DOWNLOAD_CACHE_ENV_VAR})")
    folder = root / part
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DownloadCacheError(f"{setting}: cannot create the folder {folder} ({exc.strerror or exc}); point "
                                 f"${DOWNLOAD_CACHE_ENV_VAR} at a writable folder") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise DownloadCacheError(f"{setting}: the folder {folder} is not writable; point ${DOWNLOAD_CACHE_ENV_VAR} "
                                 "at a writable folder")
    return folder


def default_models_dir() -> Path:
    """Embedded model files, joined and verified once per machine."""
    return download_dir("models")


def legacy_models_dir() -> Path:
    """Where data folders of earlier versions kept the joined embedded model (still used when verified there)."""
    return data_dir() / "models"


def default_dagster_home() -> Path:
    return data_dir() / "dagster_home"
