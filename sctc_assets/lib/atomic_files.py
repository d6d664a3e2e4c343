"""Writing a file whole or not at all, safely when several processes write the same file (pure Python).

Each writer writes a temporary file of its own beside the target (its name carries the process, the thread and a
random part), then replaces the target with it in one `os.replace`: a reader sees the old file or the new one,
never half of one, and two processes writing one file at once each finish (the later replace wins) instead of one
renaming the other's temporary file away. A temporary file is removed when writing it fails.
"""

from __future__ import annotations

import os
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

TEMPORARY_SUFFIX = ".tmp"


def temporary_path(path: Path) -> Path:
    """A name of this writer's own beside `path`, hidden (a leading dot) and ending in `.tmp`, so no glob for the
    target's own suffix (`*.parquet`, `*.png`) picks it up."""
    return path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}"
                          f"{TEMPORARY_SUFFIX}")


@contextmanager
def replacing(path: str | os.PathLike) -> Iterator[Path]:
    """Yields a temporary path to write; when the block ends without an error, that file replaces `path`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = temporary_path(target)
    try:
        yield staging
        os.replace(staging, target)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """`Path.write_text`, whole or not at all."""
    with replacing(path) as staging:
        staging.write_text(text, encoding=encoding)
    return Path(path)
