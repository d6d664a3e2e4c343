"""Reading GGUF files through transformers without parsing each one several times, or more of one than needed."""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Container
from pathlib import Path
from typing import Any

# The architectures whose GGUF tokenizer `gguf_tokenizer` builds without the model config. For these, the config
# transformers rebuilds from a GGUF file has the architecture as its `model_type` (no renaming, as `llama` files
# named `mistral` get), so the tokenizer class AutoTokenizer picks follows from the architecture alone. Each is
# checked byte for byte against AutoTokenizer in sctc_assets_tests/test_name_tokenization.py.
HEADER_TOKENIZER_ARCHITECTURES = frozenset({"falcon", "gpt2", "llama", "phi3", "qwen2", "starcoder2"})

# GGUF metadata value types of a fixed size: struct format and width in bytes (8 is a string, 9 an array).
_GGUF_FIXED = {0: ("B", 1), 1: ("b", 1), 7: ("?", 1), 2: ("H", 2), 3: ("h", 2), 4: ("I", 4), 5: ("i", 4),
               6: ("f", 4), 10: ("Q", 8), 11: ("q", 8), 12: ("d", 8)}


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


def read_gguf_header(path: str | os.PathLike, string_arrays: Container[str] = ()) -> tuple[dict, tuple[str, ...]]:
    """`(metadata, tensor names)` of a GGUF file (v2, v3) as transformers 5's `read_gguf_metadata` returns them:
    numbers, booleans and strings as Python values, numeric arrays as lists, string arrays as lists where their key
    is in `string_arrays`, else as their length. Read from the header only, through `mmap`: transformers slices a
    numpy memory map once per string (the embedded model's 151,936 tokens and 151,387 merges: 0.4 CPU-s, here
    0.1). Raises `ValueError` (or `struct.error`, `UnicodeDecodeError`) for a file that is not one."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as blob:
        unpack = struct.unpack_from

        def string(pos: int) -> tuple[str, int]:
            (length,) = unpack("<Q", blob, pos)
            return blob[pos + 8:pos + 8 + length].decode("utf-8"), pos + 8 + length

        if blob[:4] != b"GGUF":
            raise ValueError(f"{path} does not start with the GGUF magic bytes")
        version, tensor_count, metadata_count = unpack("<IQQ", blob, 4)
        if version not in (2, 3):
            raise ValueError(f"{path} is GGUF v{version}; only v2 and v3 are read")
        pos, metadata = 24, {}
        for _ in range(metadata_count):
            key, pos = string(pos)
            (value_type,) = unpack("<I", blob, pos)
            pos += 4
            if value_type in _GGUF_FIXED:
                form, width = _GGUF_FIXED[value_type]
                (value,) = unpack("<" + form, blob, pos)
                pos += width
            elif value_type == 8:
                value, pos = string(pos)
            elif value_type == 9:
                element_type, count = unpack("<IQ", blob, pos)
                pos += 12
                if element_type in _GGUF_FIXED:
                    form, width = _GGUF_FIXED[element_type]
                    value = list(unpack(f"<{count}{form}", blob, pos))
                    pos += count * width
                elif element_type != 8:
                    raise ValueError(f"{path}: {key} is an array of GGUF type {element_type}")
                elif key in string_arrays:
                    value = []
                    append = value.append
                    for _ in range(count):
                        (length,) = unpack("<Q", blob, pos)
                        append(blob[pos + 8:pos + 8 + length].decode("utf-8"))
                        pos += 8 + length
                else:
                    for _ in range(count):
                        pos += 8 + unpack("<Q", blob, pos)[0]
                    value = count
            else:
                raise ValueError(f"{path}: {key} has GGUF type {value_type}")
            metadata[key] = value
        if "general.architecture" not in metadata:
            raise ValueError(f"{path} has no `general.architecture` in its metadata")
        names = []
        for _ in range(tensor_count):
            name, pos = string(pos)
            (dimensions,) = unpack("<I", blob, pos)
            pos += 4 + 8 * dimensions + 12  # the dimensions, the ggml type (u32) and the data offset (u64)
            names.append(name)
    return metadata, tuple(names)


@contextlib.contextmanager
def gguf_headers_read_by_mmap():
    """Within the block, transformers' `read_gguf_metadata` (which its GGUF tokenizer reads the vocabulary with)
    is `read_gguf_header`, and falls back to the original for any file it refuses, so that transformers' own error
    is raised. Not per thread: another thread reading a GGUF header meanwhile reads it this way too, which is
    harmless, as both give the same values."""
    from transformers.integrations.gguf import reader

    original = reader.read_gguf_metadata

    def read(gguf_path: str, string_arrays: Container[str] = ()) -> tuple[dict, tuple[str, ...]]:
        try:
            return read_gguf_header(gguf_path, string_arrays)
        except (OSError, ValueError, struct.error):
            return original(gguf_path, string_arrays)

    reader.read_gguf_metadata = read
    try:
        yield
    finally:
        reader.read_gguf_metadata = original


def header_tokenizer_class(path: str | os.PathLike, **kwargs: Any) -> type | None:
    """The tokenizer class `AutoTokenizer.from_pretrained(<folder>, gguf_file=<name>, **kwargs)` would build for
    this GGUF file, found from its header alone; `None` where that needs more than the header: an architecture not
    in `HEADER_TOKENIZER_ARCHITECTURES`, a name transformers may read as Mistral, a `tokenizer_config.json` next to
    the file (AutoTokenizer takes the class from it), keyword arguments other than `trust_remote_code` (which
    AutoTokenizer keeps to itself), a file `read_gguf_header` refuses, a transformers without its own header reader
    (before 5: its tokenizer classes parse the whole file with `gguf.GGUFReader` anyway)."""
    try:
        from transformers.integrations.gguf import reader  # noqa: F401 (transformers 5's header reader)
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
        from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:
        return None

    path = Path(path)
    if set(kwargs) - {"trust_remote_code"} or (path.parent / "tokenizer_config.json").exists():
        return None
    try:
        metadata, _ = read_gguf_header(path)
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
    called as AutoTokenizer calls it, then reads the vocabulary (with `read_gguf_header`, the same values) and
    converts it. Any other file goes through AutoTokenizer."""
    path = Path(path)
    tokenizer_class = header_tokenizer_class(path, **kwargs)
    if tokenizer_class is None:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, **kwargs)
    with gguf_headers_read_by_mmap():
        return tokenizer_class.from_pretrained(str(path.parent), gguf_file=path.name, _from_auto=True)
