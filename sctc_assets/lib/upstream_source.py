"""Open published benchmark data from a directory, an archive (.tar.gz/.tar.xz/.tar/.zip) or a URL.

Archives are extracted once into a cache folder of the data folder, named after their content hash (the copy an
analysis reads); URLs are downloaded once per machine into the download cache (`$SCTC_DOWNLOAD_CACHE`, `upstream/`),
so a fresh data folder extracts them without fetching them again. Every read names the file at fault when it is
missing, unreadable or lacks a required column.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
import zlib
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from sctc_assets.lib.file_lock import file_lock
from sctc_assets.lib.paths import download_dir
from sctc_assets.lib.progress import download_lines
from sctc_assets.lib.text_files import check_utf8

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tar", ".zip")


class UpstreamError(Exception):
    """Base class for problems with the upstream data."""


class UpstreamFileMissing(UpstreamError):
    def __init__(self, source: "UpstreamSource", relative_path: str):
        self.relative_path = relative_path
        super().__init__(f"upstream file missing: {relative_path} (not in {source.origin})")


class UpstreamSchemaError(UpstreamError):
    pass


class UpstreamArchiveError(UpstreamError):
    pass


def is_url(location: str) -> bool:
    return urllib.parse.urlparse(location).scheme in {"http", "https", "ftp"}


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def shown_url(url: str) -> str:
    """`url` for a line a person or a log reads: without a user, a password or a query (a signed URL's token)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", "")) + ("?…" if parts.query else "")


def download_path(url: str, folder: Path | None = None) -> Path:
    """Where `download` keeps `url`: `folder` (default: the download cache's `upstream/`), named after the URL."""
    name = Path(urllib.parse.urlparse(url).path).name or "download"
    return (folder or download_dir("upstream")) / f"{hashlib.sha1(url.encode()).hexdigest()[:12]}-{name}"


def download(url: str, folder: Path | None = None, *, timeout_s: float = 120.0) -> Path:
    """Fetch `url` into `folder` (default: the machine's download cache) once; later calls reuse the file.

    The file gets its final name only once every byte announced by `Content-Length` has arrived, so a dropped
    connection is not cached as if it were the whole archive. Processes downloading the same URL at once each
    write a file of their own and rename it into place: the last complete one stays.
    """
    target = download_path(url, folder)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + f".part{os.getpid()}")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response, open(partial, "wb") as out:
            announced = response.headers.get("Content-Length")
            size = int(announced) if announced is not None and announced.strip().isdigit() else None
            with download_lines("downloading", "downloaded", shown_url(url), target, size=size) as progress:
                progress.path = partial
                shutil.copyfileobj(response, out)
                out.flush()
                received = out.tell()
                if size is not None and received != size:
                    raise UpstreamError(f"could not download {shown_url(url)}: incomplete transfer ({received} of "
                                        f"{size} bytes received)")
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise UpstreamError(f"could not download {shown_url(url)}: {exc}") from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(target)
    return target


def _extract(archive: Path, destination: Path) -> None:
    name = archive.name.lower()
    try:
        if name.endswith(".zip"):
            with zipfile.ZipFile(archive) as bundle:
                bad = bundle.testzip()
                if bad is not None:
                    raise UpstreamArchiveError(f"{archive}: corrupt member {bad}")
                bundle.extractall(destination)
        else:
            with tarfile.open(archive) as bundle:
                bundle.extractall(destination, filter="data")
                _check_tar_end(bundle, archive)
    except UpstreamArchiveError:
        raise
    except (tarfile.TarError, zipfile.BadZipFile, lzma.LZMAError, zlib.error, EOFError, OSError, ValueError) as exc:
        raise UpstreamArchiveError(f"{archive}: not a readable archive ({type(exc).__name__}: {exc})") from exc


def _check_tar_end(bundle: tarfile.TarFile, archive: Path) -> None:
    """Fail unless the tar stream ended where `tarfile` stopped reading.

    `tarfile` takes an unreadable header after the first for the end of the archive, so a corrupt archive would pass
    as a shorter one. Reading the rest of the stream makes xz/gzip verify their checksums, and anything but the
    zero padding of a tar end marker there means members were skipped.
    """
    bundle.fileobj.seek(bundle.offset)
    while block := bundle.fileobj.read(1 << 20):
        if block.count(0) != len(block):
            raise UpstreamArchiveError(
                f"{archive}: corrupt archive (unreadable tar header at byte {bundle.offset} of the unpacked stream,"
                f" after {len(bundle.getmembers())} members)"
            )


def extract_once(archive: Path, cache_dir: Path) -> Path:
    """Extract `archive` under `cache_dir/extracted/<digest>` unless an earlier run finished doing so.

    Processes that open the same archive at once take turns through a lock; the folder that one of them completed
    is never removed, since others may be reading it.
    """
    if not archive.is_file():
        raise UpstreamError(f"upstream archive not found: {archive}")
    target = cache_dir / "extracted" / _file_digest(archive)[:16]
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / f".{target.name}.lock"):
        if (target / ".complete").exists():  # another process finished while this one waited
            return target
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
        try:
            _extract(archive, staging)
            (staging / ".complete").write_text(str(archive))
            # A process without the lock (no fcntl) may have finished meanwhile: its copy stays, this one goes.
            if (target / ".complete").exists():
                return target
            if target.exists():  # a half-finished earlier attempt
                shutil.rmtree(target, ignore_errors=True)
            try:
                staging.rename(target)
            except OSError:
                if not (target / ".complete").exists():  # another process did not win the race either
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def candidate_roots(directory: Path) -> list[Path]:
    """Where a data root may sit: `directory` itself, then its folders (a GitHub archive adds one top folder)."""
    children = sorted(child for child in directory.iterdir() if child.is_dir() and not child.name.startswith("."))
    return [directory, *children]


def find_root(directory: Path, markers: Sequence[str]) -> Path:
    """The folder holding any of `markers`: `directory` itself or its single top-level folder (GitHub archives)."""
    for folder in candidate_roots(directory):
        if any((folder / marker).exists() for marker in markers):
            return folder
    raise UpstreamError(f"{directory}: none of {list(markers)} found here or one folder down")


def local_directory(location: str | os.PathLike, cache_dir: Path) -> Path:
    """A directory, archive path or URL as a local directory (URLs downloaded once into the download cache,
    archives extracted once under `cache_dir`)."""
    text = str(location)
    if not is_url(text):
        local = Path(text).expanduser()
        if not local.exists():
            raise UpstreamError(f"upstream location does not exist: {local}")
        return local if local.is_dir() else extract_once(local, cache_dir)
    downloaded = download(text)
    try:
        return extract_once(downloaded, cache_dir)
    except UpstreamArchiveError as exc:
        # A download that cannot be extracted would otherwise be reused as it is by every later run.
        downloaded.unlink(missing_ok=True)
        raise UpstreamArchiveError(f"{exc} (downloaded from {text}; removed, the next run downloads it again)") from exc


def resolve_location(location: str | os.PathLike, cache_dir: Path, markers: Sequence[str]) -> Path:
    """Turn a directory, archive path or URL into a local data root."""
    return find_root(local_directory(location, cache_dir), markers)


class UpstreamSource:
    """A local data root with reads that name the file and column at fault."""

    def __init__(self, root: Path, origin: str):
        self.root = Path(root)
        self.origin = origin

    @classmethod
    def open(cls, location: str | os.PathLike, cache_dir: Path, markers: Sequence[str]) -> "UpstreamSource":
        return cls(resolve_location(location, Path(cache_dir), markers), origin=str(location))

    def path(self, relative_path: str) -> Path:
        return self.root / relative_path

    def exists(self, relative_path: str) -> bool:
        return self.path(relative_path).is_file()

    def missing(self, relative_paths: Iterable[str]) -> list[str]:
        return [path for path in relative_paths if not self.exists(path)]

    def read_csv(self, relative_path: str, required_columns: Sequence[str] = (), **kwargs) -> pd.DataFrame:
        path = self.path(relative_path)
        if not path.is_file():
            raise UpstreamFileMissing(self, relative_path)
        try:
            frame = pd.read_csv(path, **kwargs)
        except UnicodeDecodeError as exc:
            check_utf8(path, name=relative_path, error=UpstreamSchemaError)
            raise UpstreamSchemaError(f"{relative_path}: unreadable CSV ({exc})") from exc
        except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
            raise UpstreamSchemaError(f"{relative_path}: unreadable CSV ({exc})") from exc
        # Some upstream files start with a UTF-8 byte-order mark that pandas keeps in the first header.
        frame.columns = [str(column).lstrip("\ufeff") for column in frame.columns]
        absent = [column for column in required_columns if column not in frame.columns]
        if absent:
            raise UpstreamSchemaError(
                f"{relative_path}: missing required column(s) {', '.join(map(repr, absent))}"
                f" (found {', '.join(map(repr, frame.columns))})"
            )
        return frame
