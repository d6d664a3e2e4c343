"""Reading the platform's YAML configuration files with errors that name the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def load_yaml(path: str | Path, *, what: str, error: type[Exception]) -> Any:
    """The parsed document of `path`; an unreadable file or invalid YAML raises `error` naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc})") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"{path}: invalid YAML ({exc})") from exc
