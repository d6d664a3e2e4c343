"""Reading GGUF files through transformers without parsing each one several times."""

from __future__ import annotations

import contextlib
import os
from typing import Any


@contextlib.contextmanager
def gguf_parsed_once():
    """Within the block, each GGUF file is parsed once: transformers builds a new `gguf.GGUFReader` for the config,
    the tokenizer and the tensors, and each one parses every metadata field (the 151,936-token vocabulary and its
    merges, ~6 CPU-s for the embedded model) again. The readers are read-only memory maps, so sharing one is safe;
    they are dropped when the block ends."""
    try:
        import gguf
    except ImportError:
        yield
        return
    original = gguf.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def shared_reader(path: Any, mode: str = "r") -> Any:
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf.GGUFReader = shared_reader
    try:
        yield
    finally:
        gguf.GGUFReader = original
        readers.clear()
