"""The record of the last complete `sctc run` in a data folder, so that the same command on an unchanged folder can
say so in about a second instead of loading Dagster to find every stage unchanged one by one.

A run that ended with every stage done, no failed check, no failed call and its report built (or skipped as
unchanged) writes `<data folder>/.sctc-last-run.json`: a digest of the command and a digest of the state it left,
with the summary it printed. The state is cheap to take again without importing Dagster or pandas:

- the size and modification time of every file below the data folder, the Dagster home, the output folder and the
  shipped configuration (registries) — the tables, the response cache, the instance's SQLite files, the exports and
  the report all live there, and any write to them changes a size or a time;
- the same of every local path the command names: options, `SCTC_*` settings, and the chosen models' registry
  entries (replay files, local model files);
- the package's files, the Python executable and version, and the time of the site-packages folder (which changes
  whenever a distribution is installed or removed).

A later run compares the two digests before anything else. Equal means nothing the run reads or writes changed, so
every stage would be skipped and every export and the report left as they are; the run prints the stored summary
and exits 0. Anything that can change without touching a local file (a PostgreSQL database, an object store, a URL)
makes the run ineligible, and the record is not written. No secret is stored: settings enter only the digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

RECORD_NAME = ".sctc-last-run.json"
# Writers' temporaries, and SQLite's shared-memory index (rewritten by readers, not only by writers).
_TRANSIENT_SUFFIXES = (".tmp", ".partial", "-shm")
_PACKAGE_DIR = Path(__file__).resolve().parents[1]


def _walk(folder: Path, into: list) -> None:
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(name for name in dirs if name != "__pycache__")
        for name in sorted(files):
            if name == RECORD_NAME or name.endswith(_TRANSIENT_SUFFIXES):
                continue
            path = os.path.join(root, name)
            try:
                state = os.stat(path)
            except OSError:  # removed meanwhile
                continue
            if state.st_size == 0 and name.endswith("-wal"):
                continue  # an empty write-ahead log holds nothing; SQLite removes it when the last reader closes
            into.append((path, state.st_size, state.st_mtime_ns))


def file_states(folder: Path) -> list[tuple[str, int, int]]:
    """(path, size, modification time) of every file below `folder`, in order; writers' temporaries left out."""
    found: list = []
    _walk(folder, found)
    return found


def _checkpoint_databases(folders: Sequence[Path]) -> None:
    """Fold every SQLite write-ahead log below `folders` into its database. A reader that closes last (the UI, a
    script opening the instance) does this on its own, which would change the files without changing any data."""
    for folder in folders:
        for root, _, files in os.walk(folder):
            for name in files:
                if not name.endswith("-wal"):
                    continue
                database = os.path.join(root, name[:-len("-wal")])
                try:
                    if os.path.getsize(database + "-wal") == 0:
                        continue
                    connection = sqlite3.connect(database, timeout=5)
                    try:
                        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    finally:
                        connection.close()
                except (OSError, sqlite3.Error):  # gone, busy or not a database: its files count as they are
                    continue


def _leaves(value: Any) -> Iterable[Any]:
    """Every value inside `value` that is not a mapping, a sequence or a dataclass-like object (those are opened)."""
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _leaves(item)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            yield from _leaves(getattr(value, name))
    else:
        yield value


def _paths_in(value: Any) -> Iterable[str]:
    """Every string inside `value` (mappings, sequences, dataclass-like objects) that names an existing local path."""
    for leaf in _leaves(value):
        if isinstance(leaf, (str, os.PathLike)):
            text = os.fspath(leaf)
            if text and "://" not in text and len(text) < 4096 and os.path.exists(text):
                yield os.path.abspath(text)


def remote_values(values: Any) -> list[str]:
    """The values in `values` that name something outside this machine's files (a URL): their state cannot be
    taken cheaply, so a run naming one is never recorded as unchanged."""
    return [leaf for leaf in _leaves(values) if isinstance(leaf, str) and "://" in leaf]


def command_digest(argv: Sequence[str], environment: Mapping[str, str]) -> str:
    """The command as typed, where it was typed, and the settings it ran with (`SCTC_*`, `DAGSTER_HOME`)."""
    settings = {key: value for key, value in sorted(environment.items())
                if key.startswith("SCTC_") or key == "DAGSTER_HOME"}
    text = json.dumps({"argv": list(argv), "cwd": os.getcwd(), "settings": settings}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def state_digest(folders: Sequence[Path], watched: Sequence[str]) -> str:
    """The state of `folders` (every file below them), of the `watched` paths, and of the code that runs."""
    files: list = []
    walked = sorted({os.path.abspath(folder) for folder in folders})
    for folder in walked:
        if os.path.isdir(folder):
            _walk(Path(folder), files)
    inside = tuple(folder.rstrip(os.sep) + os.sep for folder in walked)
    for path in sorted(set(watched)):
        if path in walked or path.startswith(inside):  # its files are below a folder walked above
            continue
        if os.path.isdir(path):
            _walk(Path(path), files)
        else:
            try:
                state = os.stat(path)
                files.append((path, state.st_size, state.st_mtime_ns))
            except OSError:
                files.append((path, None, None))
    _walk(_PACKAGE_DIR, files)
    try:
        packages = os.stat(sysconfig.get_paths()["purelib"]).st_mtime_ns
    except OSError:
        packages = None
    digest = hashlib.sha256()
    digest.update(json.dumps([sys.executable, sys.version, packages]).encode())
    for entry in sorted(set(files)):
        digest.update(repr(entry).encode())
    return digest.hexdigest()


def watched_paths(*values: Any) -> list[str]:
    """The local paths named anywhere in `values`, for `state_digest`."""
    return sorted({path for value in values for path in _paths_in(value)})


def save(record_path: Path, *, command: str, folders: Sequence[Path], watched: Sequence[str],
         summary: str) -> None:
    """Record a complete run (call it last: the state is taken now, and nothing may be written after it)."""
    record = {"command": command, "folders": [str(folder) for folder in folders], "watched": list(watched),
              "finished_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "summary": summary}
    record_path.parent.mkdir(parents=True, exist_ok=True)
    temporary = record_path.with_name(record_path.name + ".tmp")
    # the digest is taken after the folders are final; the record itself is left out of it
    _checkpoint_databases(folders)
    record["state"] = state_digest(folders, watched)
    temporary.write_text(json.dumps(record, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(temporary, record_path)


def forget(record_path: Path) -> None:
    """Drop the record (a run that did not complete, or one not eligible, must not leave an older one standing)."""
    try:
        record_path.unlink()
    except OSError:
        pass


def unchanged(record_path: Path, command: str) -> dict[str, Any] | None:
    """The record of the last complete run if it was this command and nothing it reads or writes changed since."""
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        if record.get("command") != command:
            return None
        folders, watched = [Path(folder) for folder in record["folders"]], list(record["watched"])
        expected = record["state"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if state_digest(folders, watched) == expected else None
