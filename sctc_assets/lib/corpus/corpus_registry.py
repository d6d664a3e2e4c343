"""The corpus registry: a YAML file mapping corpus keys to a source, a script, a shard count and a record limit.

    corpora:
      tw-wiki:
        description: free text
        script: traditional          # simplified | traditional | mixed
        shards: 8                    # partitions of the count; each one is materialized on its own
        limit: null                  # at most this many records over all shards (null: every record)
        reported_records: 2533212    # what the paper's Table 12 says, for comparison only
        text_fields: [markdown]      # record fields to search; "*" searches every string in the record
        hub: {path: zetavg/zh-tw-wikipedia, name: null, split: train}
      my-files:
        script: mixed
        files: ["corpora/*.jsonl.gz"]   # globs; relative ones start at the registry file's folder
        format: jsonl                   # jsonl | parquet | text (one record per line); default: from the name

Corpus keys become Dagster partition keys `<corpus>.<index>-of-<shards>`, hence the restricted alphabet (no dots).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

from sctc_assets.lib.yaml_files import load_yaml

CORPUS_KEY_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
SHARD_KEY_PATTERN = re.compile(r"^([a-z0-9][a-z0-9_-]{0,63})\.(\d+)-of-(\d+)$")
SCRIPTS = ("simplified", "traditional", "mixed")
FORMATS = ("jsonl", "parquet", "text")
ALL_FIELDS = "*"
_KNOWN_KEYS = {"description", "script", "shards", "limit", "reported_records", "text_fields", "hub", "files",
               "format", "paper"}
_HUB_KEYS = {"path", "name", "split", "data_files", "revision"}


class CorpusRegistryError(ValueError):
    pass


@dataclass(frozen=True)
class HubSource:
    """A `datasets` dataset read in streaming mode: a hub id, or a packaged builder such as `json` with files."""

    path: str
    name: str | None = None
    split: str = "train"
    data_files: tuple[str, ...] | None = None
    revision: str | None = None


@dataclass(frozen=True)
class FileSource:
    patterns: tuple[str, ...]
    base_dir: str
    format: str | None = None


@dataclass(frozen=True)
class CorpusEntry:
    key: str
    script: str
    source: HubSource | FileSource
    text_fields: tuple[str, ...] | str
    shards: int = 1
    limit: int | None = None
    reported_records: int | None = None
    description: str = ""
    paper: bool = False

    def shard_keys(self) -> list[str]:
        return [shard_key(self.key, index, self.shards) for index in range(self.shards)]

    def shard_limit(self, index: int) -> int | None:
        """This shard's share of the record limit: the shares add up to the limit exactly."""
        if self.limit is None:
            return None
        return self.limit // self.shards + (1 if index < self.limit % self.shards else 0)

    def fingerprint(self) -> str:
        """Changes whenever the registry settings a shard reads with change. The input itself (local files' sizes
        and times) comes on top, per shard, in `sources.shard_inputs`; a hub dataset is known by these settings
        alone, its `revision` included, so with `revision: null` an update on the hub goes unnoticed."""
        settings = {"source": asdict(self.source), "text_fields": self.text_fields, "shards": self.shards,
                    "limit": self.limit}
        return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def shard_key(corpus: str, index: int, shards: int) -> str:
    width = max(3, len(str(shards)))
    return f"{corpus}.{index:0{width}d}-of-{shards:0{width}d}"


def parse_shard_key(key: str) -> tuple[str, int, int]:
    match = SHARD_KEY_PATTERN.match(key)
    if not match or not int(match.group(2)) < int(match.group(3)):
        raise CorpusRegistryError(f"not a corpus shard key: {key!r} (expected <corpus>.<index>-of-<shards>)")
    return match.group(1), int(match.group(2)), int(match.group(3))


def _reject_unknown(raw: Mapping[str, Any], known: set[str], where: str, what: str) -> None:
    unknown = sorted(set(raw) - known)
    if unknown:
        raise CorpusRegistryError(f"{where}: unknown {what} {unknown} (known: {sorted(known)})")


def _positive_int(raw: Any, where: str, name: str, *, optional: bool) -> int | None:
    if raw is None and optional:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise CorpusRegistryError(f"{where}: `{name}` must be a positive integer{' or null' if optional else ''}"
                                  f" (got {raw!r})")
    return raw


def _strings(raw: Any, where: str, name: str) -> tuple[str, ...]:
    values = [raw] if isinstance(raw, str) else raw
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
        raise CorpusRegistryError(f"{where}: `{name}` must be a string or a non-empty list of strings")
    return tuple(values)


def _source(raw: Mapping[str, Any], where: str, base_dir: Path) -> HubSource | FileSource:
    if ("hub" in raw) == ("files" in raw):
        raise CorpusRegistryError(f"{where}: give exactly one of `hub` (a datasets source) or `files` (local files)")
    if "files" in raw:
        fmt = raw.get("format")
        if fmt is not None and fmt not in FORMATS:
            raise CorpusRegistryError(f"{where}: `format` must be one of {', '.join(FORMATS)} (got {fmt!r})")
        return FileSource(patterns=_strings(raw["files"], where, "files"), base_dir=str(base_dir), format=fmt)
    hub = raw["hub"]
    if not isinstance(hub, Mapping) or not isinstance(hub.get("path"), str) or not hub["path"]:
        raise CorpusRegistryError(f"{where}: `hub` needs at least a `path` (a dataset id or a builder like json)")
    _reject_unknown(hub, _HUB_KEYS, where, "`hub` setting(s)")
    data_files = hub.get("data_files")
    if data_files is not None:
        data_files = tuple(str(base_dir / f) if not Path(f).is_absolute() and "://" not in f else f
                           for f in _strings(data_files, where, "hub.data_files"))
    return HubSource(path=hub["path"], name=hub.get("name"), split=str(hub.get("split") or "train"),
                     data_files=data_files, revision=hub.get("revision"))


def _entry(key: Any, raw: Any, source_name: str, base_dir: Path) -> CorpusEntry:
    where = f"{source_name}: corpus {key!r}"
    if not isinstance(key, str) or not CORPUS_KEY_PATTERN.match(key):
        raise CorpusRegistryError(f"{where}: keys use lowercase letters, digits, '_' and '-' (they become "
                                  "partition keys)")
    if not isinstance(raw, Mapping):
        raise CorpusRegistryError(f"{where}: expected a mapping of settings")
    _reject_unknown(raw, _KNOWN_KEYS, where, "setting(s)")
    script = raw.get("script")
    if script not in SCRIPTS:
        raise CorpusRegistryError(f"{where}: `script` must be one of {', '.join(SCRIPTS)} (got {script!r})")
    fields = raw.get("text_fields", ["text"])
    text_fields = ALL_FIELDS if fields == ALL_FIELDS else _strings(fields, where, "text_fields")
    return CorpusEntry(
        key=key, script=script, source=_source(raw, where, base_dir), text_fields=text_fields,
        shards=_positive_int(raw.get("shards", 1), where, "shards", optional=False),
        limit=_positive_int(raw.get("limit"), where, "limit", optional=True),
        reported_records=_positive_int(raw.get("reported_records"), where, "reported_records", optional=True),
        description=str(raw.get("description") or ""), paper=bool(raw.get("paper", False)),
    )


def parse_corpora(document: Any, *, source: str, base_dir: Path) -> dict[str, CorpusEntry]:
    if not isinstance(document, Mapping) or not isinstance(document.get("corpora"), Mapping):
        raise CorpusRegistryError(f"{source}: expected a top-level `corpora:` mapping")
    return {key: _entry(key, raw, source, base_dir) for key, raw in document["corpora"].items()}


def load_corpora(path: str | Path) -> dict[str, CorpusEntry]:
    document = load_yaml(path, what="corpus registry", error=CorpusRegistryError)
    return parse_corpora(document, source=str(path), base_dir=Path(path).resolve().parent)


def unregistered_shard_keys(entries: Mapping[str, CorpusEntry], known: set[str]) -> list[str]:
    """Shard keys of the registry's present layout that are not Dagster partitions yet."""
    return [key for entry in entries.values() for key in entry.shard_keys() if key not in known]
