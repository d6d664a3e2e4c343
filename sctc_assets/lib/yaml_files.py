"""Reading the platform's YAML configuration files with errors that name the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sctc_assets.lib.text_files import read_utf8

# libyaml's safe loader where PyYAML was built with it (the wheels are): the same documents, parsed ~10× faster.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: str | Path, *, what: str, error: type[Exception]) -> Any:
    """The parsed document of `path`; an unreadable file, a file that is not UTF-8 or invalid YAML raises `error`
    naming the file."""
    path = Path(path)
    try:
        text = read_utf8(path, error=error)  # a file in another encoding is named with the encoding it looks like
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc})") from exc
    try:
        return yaml.load(text, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise error(f"{path}: invalid YAML ({exc})") from exc
