"""Where the stored tables live: the local data folder, a shared mount, or any fsspec URL (`$SCTC_TABLE_STORE`).

A plain path or a `file://` URL is a local `pathlib.Path`: written with `atomic_files.replacing` (a staging file
beside the target, then one `os.replace`, atomic on local disks and on NFS/EFS mounts alike) and read by Arrow
directly, as before this module existed. Any other URL (`s3://`, `gs://`, `az://`, `memory://`, ...) is a
`upath.UPath` on its fsspec filesystem, written whole or not at all:

- object stores (S3, GCS, Azure, memory): the file is built in memory and sent in one `pipe_file` under its final
  key. An object PUT (or a multipart upload, which publishes only when completed) is atomic: a reader sees the old
  object or the new one. A staging key and a move would be a copy plus a delete on these stores, twice the
  traffic, and not atomic either. Streaming through `fs.open(..., "wb")` is avoided on purpose: fsspec's buffered
  file commits on `close()` even when the `with` block raised, which would publish a half-written table;
- other filesystems (SFTP, SMB, HDFS, ...): the bytes go to a staging name beside the target, then `fs.mv`, their
  rename.

The URL's user and password, if any, are never shown (`shown`); credentials belong in the filesystem's own
settings (AWS_* variables, a service account), not in the URL.
"""

from __future__ import annotations

import io
import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Iterator, Union
from urllib.parse import urlsplit, urlunsplit
from urllib.request import url2pathname

from sctc_assets.lib.atomic_files import replacing, temporary_path
from sctc_assets.lib.paths import default_storage_dir

TABLE_STORE_ENV = "SCTC_TABLE_STORE"
# Filesystems whose single put is atomic (see above): written in one `pipe_file`, never through a staging key.
ATOMIC_PUT_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oci", "memory"})

if TYPE_CHECKING:  # upath is imported where a URL is used: a local store never needs it
    from upath import UPath

StorePath = Union[Path, "UPath"]


def is_url(value: str | os.PathLike) -> bool:
    return isinstance(value, str) and "://" in value


def shown(value: str | os.PathLike) -> str:
    """`value` for a message: a URL without its user and password."""
    text = str(value)
    if not is_url(text):
        return text
    parts = urlsplit(text)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def location(value: str | os.PathLike) -> StorePath:
    """A local folder or file as `Path` (a plain path, `~/…`, or a `file://` URL); any other URL as a `UPath`."""
    if not isinstance(value, str):
        return value  # a Path or a UPath already
    if not is_url(value):
        return Path(value).expanduser()
    parts = urlsplit(value)
    if parts.scheme in ("file", "local"):
        return Path(url2pathname(parts.path))
    from upath import UPath

    return UPath(value)


def table_store() -> StorePath:
    """`$SCTC_TABLE_STORE` (a folder or URL), else `<data folder>/storage`."""
    configured = os.environ.get(TABLE_STORE_ENV, "").strip()
    return location(configured) if configured else default_storage_dir()


def is_local(path: StorePath) -> bool:
    return isinstance(path, Path)


def missing_filesystem(value: str) -> str | None:
    """For a URL whose fsspec filesystem cannot be loaded: why, naming the package to install; else None."""
    if not is_url(value):
        return None
    protocol = urlsplit(value).scheme
    if protocol in ("file", "local"):
        return None
    import fsspec
    from fsspec.registry import known_implementations

    try:
        fsspec.get_filesystem_class(protocol)
    except ImportError:
        known = known_implementations.get(protocol, {})
        package = str(known.get("class", protocol)).split(".")[0]
        return f"the {protocol}:// filesystem needs the package {package} (pip install {package})"
    except ValueError:
        return f"{protocol}:// is no filesystem fsspec knows"
    return None


def store_problem(value: str, setting: str) -> str | None:
    """One line for a table store setting that cannot work, naming the setting; None when it can."""
    problem = missing_filesystem(value)
    return f"{setting}={shown(value)}: {problem}" if problem else None


def arrow_source(path: StorePath) -> tuple[str, Any]:
    """`(where, filesystem)` for `pyarrow.parquet.read_table`/`read_schema` and `pandas.read_parquet` on `path`:
    the path itself and no filesystem on local disk, else its key on its fsspec filesystem (which Arrow wraps)."""
    if is_local(path):
        return str(path), None
    return path.path, path.fs


def change_marker(path: StorePath) -> tuple | None:
    """What changes when the file at `path` is replaced (inode, size, time; a remote object's ETag or generation),
    or None where the filesystem tells nothing that changes (such a file is not memoized)."""
    if is_local(path):
        status = path.stat()
        return (str(path), status.st_ino, status.st_size, status.st_mtime_ns)
    info = path.fs.info(path.path)
    for field in ("ETag", "etag", "generation", "md5Hash", "mtime", "LastModified", "last_modified", "created"):
        if info.get(field) is not None:
            return (str(path), info.get("size"), str(info[field]))
    return None


@contextmanager
def writing(path: StorePath) -> Iterator[Path | BinaryIO]:
    """Yields where to write `path`'s new content: a local staging path (`atomic_files.replacing`) or, for a URL,
    an in-memory binary file stored whole when the block ends without an error (see the module's note)."""
    if is_local(path):
        with replacing(path) as staging:
            yield staging
        return
    buffer = io.BytesIO()
    yield buffer
    put_whole(path, buffer.getvalue())


def put_whole(path: "UPath", data: bytes) -> None:
    """`data` at `path` on its filesystem, whole or not at all."""
    fs, key = path.fs, path.path
    protocols = {path.protocol, *(fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))}
    if ATOMIC_PUT_PROTOCOLS.intersection(protocols):
        # No folders to make: an object store has none, and s3fs's makedirs would create a missing bucket.
        fs.pipe_file(key, data)
        return
    parent = path.parent.path
    if parent and parent != key:
        fs.makedirs(parent, exist_ok=True)
    staging = temporary_path(path).path
    try:
        fs.pipe_file(staging, data)
        fs.mv(staging, key)
    except BaseException:
        if fs.exists(staging):
            fs.rm_file(staging)
        raise


def write_bytes(path: StorePath, data: bytes) -> None:
    """`data` at `path` (local or URL), whole or not at all."""
    with writing(path) as target:
        if isinstance(target, Path):
            target.write_bytes(data)
        else:
            target.write(data)
