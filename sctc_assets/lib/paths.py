"""Where the platform keeps its files.

Configuration shipped with the repository (model, corpus and tokenizer registries, the sample reviews) is read from
the repository's `data/`; everything written at run time lives under one data folder, `$SCTC_DATA_DIR` if set.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO_DATA_DIR = PACKAGE_DIR.parent / "data"


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


def default_models_dir() -> Path:
    return data_dir() / "models"


def default_dagster_home() -> Path:
    return data_dir() / "dagster_home"
