"""De-quantized GGUF weights kept on disk, so a process start loads safetensors instead of converting the GGUF.

`transformers` de-quantizes a GGUF file into full-precision tensors at every `from_pretrained` and rebuilds the
tokenizer from the GGUF vocabulary (for the embedded 0.5B model about 40 CPU-s, with the file parsed once: see
`lib/gguf_reading.py`). The first start on a machine saves the converted model (safetensors) and tokenizer into
`weights/<folder>/` of the machine's download cache (`$SCTC_DOWNLOAD_CACHE`, beside the GGUF it comes from), named
after the GGUF file's verified sha256, the transformers version (its conversion code) and the dtype; later starts,
in any data folder, load that folder (memory-mapped, a few seconds). `sctc fetch` converts ahead of the run. A
folder an earlier version kept in `<data dir>/cache/weights/` is still read. The saved tensors are
the very ones the conversion produced (checked by loading the copy back once), so answers do not change. A folder
counts only once its manifest is written, last, and the folder is renamed into place atomically; a failure to write
the cache (a full disk) costs only the speed-up, never the run.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

from sctc_assets.lib.file_lock import file_lock
from sctc_assets.lib.paths import default_cache_path, download_dir

MANIFEST = "sctc-gguf-cache.json"
logger = logging.getLogger(__name__)


def default_weights_dir() -> Path:
    """`weights/` of the machine's download cache: one conversion per machine, shared by every data folder."""
    return download_dir("weights")


def legacy_weights_dir() -> Path:
    """`<data dir>/cache/weights`, where versions before the download cache kept the converted weights."""
    return default_cache_path().parent / "weights"


def cache_identity(gguf_sha256: str, gguf_name: str, dtype: str) -> dict[str, str]:
    import transformers

    return {"gguf_sha256": gguf_sha256.lower(), "gguf_file": gguf_name, "transformers": transformers.__version__,
            "dtype": dtype}


def folder_for(identity: dict[str, str], root: Path) -> Path:
    stem = Path(identity["gguf_file"]).stem
    return root / f"{stem}-{identity['gguf_sha256'][:16]}-transformers{identity['transformers']}-{identity['dtype']}"


def is_complete(folder: Path, identity: dict[str, str]) -> bool:
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and all(manifest.get(key) == value for key, value in identity.items())


def cached_folder(gguf_sha256: str, gguf_name: str, dtype: str, root: Optional[Path] = None) -> Optional[Path]:
    """The complete cache folder for this GGUF, transformers version and dtype, if one exists (without `root`: in
    the download cache, else in the data folder)."""
    identity = cache_identity(gguf_sha256, gguf_name, dtype)
    if root is not None:
        candidates = [root]
    else:
        try:
            candidates = [default_weights_dir(), legacy_weights_dir()]
        except ValueError:  # an unusable download cache costs the speed-up, never the run (`store` warns)
            candidates = [legacy_weights_dir()]
    for candidate in candidates:
        folder = folder_for(identity, candidate)
        if is_complete(folder, identity):
            return folder
    return None


def save_converted(model: Any, tokenizer: Any, folder: Path) -> None:
    """Write the model's tensors (safetensors), config, generation config and tokenizer to `folder`.

    `save_pretrained` refuses a model loaded from GGUF (transformers marks it GGUF-quantized even when every weight
    was unpacked), so the pieces are written here: tied weights share one tensor, stored once under its first name
    (the input embedding, which `from_pretrained` ties the output layer to), and the config loses its GGUF
    `quantization_config`, so the folder loads as the plain model it now is.
    """
    import copy

    from safetensors.torch import save_file

    tensors: dict[str, Any] = {}
    seen: set[tuple] = set()
    for name, tensor in model.state_dict().items():
        key = (tensor.data_ptr(), tuple(tensor.shape), tensor.stride())
        if key not in seen:
            seen.add(key)
            tensors[name] = tensor.detach().contiguous()
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(folder)
    model.generation_config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def same_model(model: Any, tokenizer: Any, other_model: Any, other_tokenizer: Any) -> Optional[str]:
    """None when both hold the same tensors, config and tokenizer; else what differs."""
    import torch

    mine, theirs = model.state_dict(), other_model.state_dict()
    if mine.keys() != theirs.keys():
        return f"parameter names differ: {sorted(set(mine) ^ set(theirs))[:5]}"
    for name, tensor in mine.items():
        if tensor.dtype != theirs[name].dtype or not torch.equal(tensor, theirs[name]):
            return f"parameter {name} differs"
    if other_model.config.to_diff_dict().get("quantization_config"):
        return "the saved config is still quantized"
    for attribute in ("chat_template", "eos_token_id", "pad_token_id", "bos_token_id", "all_special_tokens",
                      "clean_up_tokenization_spaces"):
        if getattr(tokenizer, attribute, None) != getattr(other_tokenizer, attribute, None):
            return f"tokenizer {attribute} differs"
    # The whole pipeline (normalizer, pre-tokenizer, vocabulary, merges, decoder, added tokens).
    if tokenizer.backend_tokenizer.to_str() != other_tokenizer.backend_tokenizer.to_str():
        return "the tokenizers differ"
    return None


def store(model: Any, tokenizer: Any, gguf_sha256: str, gguf_name: str, dtype: str,
          load_folder: Callable[[Path], tuple[Any, Any]], root: Optional[Path] = None) -> Optional[Path]:
    """Save a model converted from `gguf_name` (and its tokenizer) into the cache, checked by loading it back.

    Returns the folder, or None (with a warning) when it could not be written or did not load back identical.
    """
    identity = cache_identity(gguf_sha256, gguf_name, dtype)
    try:
        root = root or default_weights_dir()
        folder = folder_for(identity, root)
        root.mkdir(parents=True, exist_ok=True)
        with file_lock(root / f".{folder.name}.lock"):
            if is_complete(folder, identity):
                return folder
            staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".partial", dir=root))
            try:
                save_converted(model, tokenizer, staging)
                problem = same_model(model, tokenizer, *load_folder(staging))
                if problem:
                    raise ValueError(f"the saved copy does not load back identical ({problem})")
                record = {**identity, "created_at": time.time()}
                (staging / MANIFEST).write_text(json.dumps(record, indent=1), encoding="utf-8")
                if folder.exists():  # an unreadable folder from an earlier run
                    shutil.rmtree(folder)
                os.replace(staging, folder)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        return folder
    except (OSError, ValueError) as exc:
        logger.warning("could not keep the converted weights of %s in %s (%s: %s); the next start converts again",
                       gguf_name, root, type(exc).__name__, exc)
        return None


def load_through_cache(
    convert: Callable[[], tuple[Any, Any]],
    load_folder: Callable[[Path], tuple[Any, Any]],
    *,
    gguf_sha256: str,
    gguf_name: str,
    dtype: str,
    root: Optional[Path] = None,
) -> tuple[Any, Any, str]:
    """(model, tokenizer, where from): the cached folder when complete, else `convert()` then store the result."""
    folder = cached_folder(gguf_sha256, gguf_name, dtype, root)
    if folder is not None:
        try:
            model, tokenizer = load_folder(folder)
            return model, tokenizer, f"cached safetensors {folder}"
        except Exception as exc:  # noqa: BLE001 - any unreadable cache is rebuilt; the message says why
            logger.warning("the cached weights in %s cannot be read (%s: %s); converting %s again",
                           folder, type(exc).__name__, exc, gguf_name)
            (folder / MANIFEST).unlink(missing_ok=True)
    model, tokenizer = convert()
    stored = store(model, tokenizer, gguf_sha256, gguf_name, dtype, load_folder, root)
    return model, tokenizer, f"converted from GGUF{f', kept in {stored}' if stored else ''}"
