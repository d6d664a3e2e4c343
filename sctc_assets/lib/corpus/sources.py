"""Read one shard of a corpus as a stream of texts: local JSON-lines, Parquet or plain-text files (optionally
gzip/bz2/xz-compressed), or a `datasets` source in streaming mode. Nothing is downloaded or held whole.

Shards: an uncompressed line file is cut into `shards` byte ranges (a line belongs to the range holding its first
byte), so one large file spreads over every shard; compressed files and Parquet row groups are dealt out whole,
round robin. A `datasets` stream is split by its file shards when it has at least as many as the corpus has
shards, else record by record (every shard then reads the whole stream and keeps its share).
"""

from __future__ import annotations

import bz2
import glob
import gzip
import json
import lzma
from pathlib import Path
from typing import Any, Iterable, Iterator

import pyarrow.parquet as pq

from sctc_assets.lib.corpus.corpus_registry import ALL_FIELDS, CorpusEntry, FileSource, HubSource

COMPRESSIONS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
EXTENSIONS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".txt": "text",
              ".text": "text"}


class CorpusReadError(ValueError):
    pass


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)


def record_text(record: Any, fields: tuple[str, ...] | str, where: str) -> str:
    """The searched text of a record. Fields are joined by a newline, which no pattern contains, so no match
    spans two fields; lists and nested mappings (chat turns) contribute every string inside them."""
    if isinstance(record, str):
        return record
    if not isinstance(record, dict):
        raise CorpusReadError(f"{where}: expected a JSON object, got {type(record).__name__}")
    if fields == ALL_FIELDS:
        return "\n".join(_leaves(record))
    parts = []
    for name in fields:
        if name not in record:
            raise CorpusReadError(f"{where}: no field {name!r} (the record has {sorted(record)})")
        parts.extend(_leaves(record[name]))
    return "\n".join(parts)


def _globbed(source: FileSource) -> Iterator[tuple[str, str, list[Path]]]:
    """Per pattern: the pattern, where it looks, and the files it matches, sorted."""
    for pattern in source.patterns:
        full = pattern if Path(pattern).is_absolute() else str(Path(source.base_dir) / pattern)
        yield pattern, full, [Path(path) for path in sorted(glob.glob(full, recursive=True))]


def _unique(paths: Iterable[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))


def source_files(source: FileSource, corpus: str) -> list[Path]:
    files: list[Path] = []
    for pattern, full, matched in _globbed(source):
        if not matched:
            raise CorpusReadError(f"corpus {corpus!r}: no file matches {pattern!r} (looked for {full})")
        files += matched
    return _unique(files)


def file_format(path: Path, configured: str | None) -> tuple[str, Any]:
    """(format, opener or None): the compression comes from the suffix, the format from the registry or the name."""
    suffix = path.suffix.lower()
    opener = COMPRESSIONS.get(suffix)
    inner = Path(path.stem).suffix.lower() if opener else suffix
    fmt = configured or EXTENSIONS.get(inner)
    if fmt is None:
        raise CorpusReadError(f"{path}: cannot tell the format from the name; set `format` in the corpus registry")
    if fmt == "parquet" and opener:
        raise CorpusReadError(f"{path}: compressed Parquet files are not supported (Parquet compresses inside)")
    return fmt, opener


def _line_range(path: Path, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    with open(path, "rb") as handle:
        if start > 0:
            handle.seek(start - 1)
            handle.readline()  # the line that began before this range belongs to the previous one
        position = handle.tell()
        while position < end:
            line = handle.readline()
            if not line:
                return
            yield position, line
            position += len(line)


def _compressed_lines(path: Path, opener: Any) -> Iterator[tuple[int, bytes]]:
    position = 0
    try:
        with opener(path, "rb") as handle:
            for line in handle:
                yield position, line
                position += len(line)
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise CorpusReadError(f"{path}: unreadable compressed file after {position} bytes ({exc})") from exc


def _line_records(path: Path, fmt: str, lines: Iterator[tuple[int, bytes]]) -> Iterator[tuple[str, Any]]:
    for offset, line in lines:
        if not line.strip():
            continue
        where = f"{path}: record at byte {offset}"
        if fmt == "jsonl":
            try:
                yield where, json.loads(line)
            except ValueError as exc:
                raise CorpusReadError(f"{where}: not valid JSON ({exc})") from exc
        else:
            try:
                yield where, line.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                raise CorpusReadError(f"{where}: not UTF-8 ({exc})") from exc


def _parquet_records(path: Path, row_group: int, fields: tuple[str, ...] | str) -> Iterator[tuple[str, Any]]:
    parquet = pq.ParquetFile(path)
    columns = None if fields == ALL_FIELDS else list(fields)
    absent = [name for name in columns or [] if name not in parquet.schema_arrow.names]
    if absent:
        raise CorpusReadError(f"{path}: no column(s) {absent} (the file has {parquet.schema_arrow.names})")
    row = 0
    for batch in parquet.iter_batches(row_groups=[row_group], columns=columns, batch_size=4096):
        for record in batch.to_pylist():
            yield f"{path}: row group {row_group}, row {row}", record
            row += 1


def _row_group_count(path: Path) -> int:
    try:
        return pq.ParquetFile(path).num_row_groups
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise CorpusReadError(f"{path}: not a readable Parquet file ({exc})") from exc


def _units(source: FileSource, files: list[Path], *,
           tolerant: bool = False) -> Iterator[tuple[Path, str | None, Any, int | None, int | None]]:
    """The files in reading order as `(path, format, opener, row group, unit)`.

    Parquet row groups and whole compressed files are units, dealt round robin over the shards (shard
    `unit % shards` reads it); an uncompressed line file is none (`unit` None): every shard reads a byte range of
    it. `tolerant`: a file whose format or row groups cannot be read comes as `(path, None, None, None, None)`
    instead of raising (a fingerprint only needs to tell that something changed).
    """
    unit = 0
    for path in files:
        try:
            fmt, opener = file_format(path, source.format)
            groups = _row_group_count(path) if fmt == "parquet" else 0
        except CorpusReadError:
            if not tolerant:
                raise
            yield path, None, None, None, None
            continue
        if fmt == "parquet":
            for group in range(groups):
                yield path, fmt, opener, group, unit
                unit += 1
        elif opener is not None:
            yield path, fmt, opener, None, unit
            unit += 1
        else:
            yield path, fmt, opener, None, None


def _file_records(entry: CorpusEntry, index: int) -> Iterator[tuple[str, Any]]:
    source = entry.source
    assert isinstance(source, FileSource)
    for path, fmt, opener, group, unit in _units(source, source_files(source, entry.key)):
        if unit is None:
            size = path.stat().st_size
            start, end = size * index // entry.shards, size * (index + 1) // entry.shards
            yield from _line_records(path, fmt, _line_range(path, start, end))
        elif unit % entry.shards != index:
            continue
        elif fmt == "parquet":
            yield from _parquet_records(path, group, entry.text_fields)
        else:
            yield from _line_records(path, fmt, _compressed_lines(path, opener))


def _hub_records(entry: CorpusEntry, index: int) -> Iterator[tuple[str, Any]]:
    import datasets  # imported here: loading it costs seconds and only hub corpora need it

    source = entry.source
    assert isinstance(source, HubSource)
    label = f"corpus {entry.key!r} ({source.path}{'/' + source.name if source.name else ''}, split {source.split})"
    try:
        stream = datasets.load_dataset(source.path, source.name, split=source.split, streaming=True,
                                       data_files=list(source.data_files) if source.data_files else None,
                                       revision=source.revision)
    except Exception as exc:  # datasets raises many types (missing files, hub errors, bad configs)
        raise CorpusReadError(f"{label}: cannot open the stream ({type(exc).__name__}: {exc})") from exc
    if stream.num_shards >= entry.shards:
        for position, record in enumerate(stream.shard(num_shards=entry.shards, index=index)):
            yield f"{label}: shard {index} record {position}", record
    else:
        for position, record in enumerate(stream):
            if position % entry.shards == index:
                yield f"{label}: record {position}", record


def _state(path: Path) -> list[Any]:
    try:
        stat = path.stat()
    except OSError:
        return [str(path), None, None]
    return [str(path), stat.st_size, stat.st_mtime_ns]


def shard_inputs(entry: CorpusEntry) -> list[list[Any]]:
    """Per shard, the state (path, size, mtime_ns) of the local files its counts depend on, for its fingerprint:
    every uncompressed line file (each shard reads a byte range whose bounds follow the size), every Parquet file
    (its row-group count moves the dealing of later units), the compressed files dealt to that shard, and the file
    list itself; a hub source's local `data_files`. Never raises: a missing file only changes the state."""
    source = entry.source
    if isinstance(source, HubSource):
        local = [pattern for pattern in source.data_files or () if "://" not in pattern]
        common = [_state(path) for path in _unique(Path(match) for pattern in local
                                                  for match in sorted(glob.glob(pattern, recursive=True)))]
        return [common for _ in range(entry.shards)]
    files = _unique(path for _, _, matched in _globbed(source) for path in matched)
    read_by_all: dict[Path, None] = {}
    dealt: list[list[Any]] = [[] for _ in range(entry.shards)]
    for path, fmt, _, _, unit in _units(source, files, tolerant=True):
        if unit is None or fmt == "parquet":
            read_by_all[path] = None
        else:
            dealt[unit % entry.shards].append(_state(path))
    common: list[Any] = [[str(path) for path in files], *(_state(path) for path in read_by_all)]
    return [common + shard for shard in dealt]


def shard_texts(entry: CorpusEntry, index: int) -> Iterator[str]:
    """The texts of shard `index` of `entry`, at most its share of the corpus record limit."""
    if not 0 <= index < entry.shards:
        raise CorpusReadError(f"corpus {entry.key!r} has {entry.shards} shard(s); there is no shard {index}")
    records = _hub_records(entry, index) if isinstance(entry.source, HubSource) else _file_records(entry, index)
    limit = entry.shard_limit(index)
    for taken, (where, record) in enumerate(records):
        if limit is not None and taken >= limit:
            return
        yield record_text(record, entry.text_fields, where)
