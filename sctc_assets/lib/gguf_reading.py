"""Reading GGUF files through transformers without parsing each one several times, or more of one than needed."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

# The architectures whose GGUF tokenizer `gguf_tokenizer` builds without the model config. For these, the config
# transformers rebuilds from a GGUF file has the architecture as its `model_type` (no renaming, as `llama` files
# named `mistral` get), so the tokenizer class AutoTokenizer picks follows from the architecture alone. Each is
# checked byte for byte against AutoTokenizer in sctc_assets_tests/test_name_tokenization.py.
HEADER_TOKENIZER_ARCHITECTURES = frozenset({"falcon", "gpt2", "llama", "phi3", "qwen2", "starcoder2"})


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


def header_tokenizer_class(path: str | os.PathLike, **kwargs: Any) -> type | None:
    """The tokenizer class `AutoTokenizer.from_pretrained(<folder>, gguf_file=<name>, **kwargs)` would build for
    this GGUF file, found from its header alone; `None` where that needs more than the header: an architecture not
    in `HEADER_TOKENIZER_ARCHITECTURES`, a name transformers may read as Mistral, a `tokenizer_config.json` next to
    the file (AutoTokenizer takes the class from it), keyword arguments other than `trust_remote_code` (which
    AutoTokenizer keeps to itself), a file transformers' header reader refuses, a transformers without that reader
    (before 5: its tokenizer classes parse the whole file again anyway)."""
    import struct

    try:
        from transformers.integrations.gguf import read_gguf_metadata
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
        from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:
        return None

    path = Path(path)
    if set(kwargs) - {"trust_remote_code"} or (path.parent / "tokenizer_config.json").exists():
        return None
    try:
        metadata, _ = read_gguf_metadata(str(path))
    except (OSError, ValueError, struct.error):
        return None
    architecture = metadata.get("general.architecture")
    if architecture not in HEADER_TOKENIZER_ARCHITECTURES or "mistral" in str(metadata.get("general.name")).lower():
        return None
    # AutoTokenizer's last resort, which a config rebuilt from a GGUF file (no tokenizer class, no name) reaches.
    tokenizer_class = TOKENIZER_MAPPING.get(CONFIG_MAPPING[architecture], TokenizersBackend)
    if not (isinstance(tokenizer_class, type) and issubclass(tokenizer_class, TokenizersBackend)):
        return None  # MistralCommonBackend, or a mapping this code does not know
    return tokenizer_class


def gguf_tokenizer(path: str | os.PathLike, **kwargs: Any) -> Any:
    """What `AutoTokenizer.from_pretrained(<folder>, gguf_file=<name>, **kwargs)` gives for a GGUF file, without
    the model config where the header names the tokenizer class (`header_tokenizer_class`). AutoTokenizer rebuilds
    the config with the legacy `gguf.GGUFReader`, which parses every metadata value (the embedded model's 151,936
    tokens and 151,387 merges: ~8 of its ~9 CPU-s), only to pick that class; the class's own `from_pretrained`,
    called as AutoTokenizer calls it, then reads the vocabulary with transformers' header reader and converts it.
    Any other file goes through AutoTokenizer."""
    path = Path(path)
    tokenizer_class = header_tokenizer_class(path, **kwargs)
    if tokenizer_class is None:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, **kwargs)
    return tokenizer_class.from_pretrained(str(path.parent), gguf_file=path.name, _from_auto=True)
