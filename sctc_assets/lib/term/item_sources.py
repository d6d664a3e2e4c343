"""Where an item set comes from, and the item-set registry (pure Python, no Dagster).

A source is a name (`sctc`: the upstream 110 terms, the default set; `csld`: the csld three-places list;
`csld-straits`: its two-sided list; both read from `$SCTC_CSLD_UPSTREAM`), a path to a CSV in the documented schema
or to one of the csld files (recognised by its header), or an http(s) URL to either, downloaded once into the data
folder. An entry of the registry names a set: its source, the prompting varieties it runs, the region cue, the
sources whose forms extend it and, to try a large set on a slow model, a subset (`concepts`, `limit`).
`resolve_items` turns what a person gives an item option (`sctc run`/`plan --term-items`, `sctc terms define
--items`) into an entry, the same way for every command. Registries are YAML files: `$SCTC_ITEM_SETS` (a
person's), and the one `sctc run --term-items` keeps in the data folder so that the UI and `sctc report` see the sets
a run used.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.request
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import yaml

from sctc_assets.lib.atomic_files import write_text
from sctc_assets.lib.paths import data_dir
from sctc_assets.lib.term.items import (CSLD_STRAITS, CSLD_THREE_PLACES, ItemSet, ItemSetError, check_definitions,
                                        check_varieties, csld_path, extend_from, from_csld, read_item_csv,
                                        subset)
from sctc_assets.lib.term.variety_prompts import CUE_MODES, SCRIPT
from sctc_assets.lib.varieties import Catalog, load_catalog

DEFAULT_SET = "sctc"
NAMED_SOURCES = {DEFAULT_SET: "the upstream SC-TC-Bench 110 terms (regions cn, tw)",
                 "csld": f"csld {CSLD_THREE_PLACES} (regions tw, cn, hk, mo; $SCTC_CSLD_UPSTREAM)",
                 "csld-straits": f"csld {CSLD_STRAITS} (regions tw, cn; $SCTC_CSLD_UPSTREAM)"}
_CSLD_FILES = {"csld": CSLD_THREE_PLACES, "csld-straits": CSLD_STRAITS}
REGISTRY_ENV_VAR = "SCTC_ITEM_SETS"
# One entry handed to a child `sctc` process (a plan of a set the registry does not hold yet), as JSON.
ENTRY_ENV_VAR = "SCTC_ITEM_SET_ENTRY"
RUN_REGISTRY_FILE = "item_sets.yaml"
SET_NAME = re.compile(r"^[a-z][a-z0-9_]{0,30}$")
_ENTRY_KEYS = {"source", "varieties", "cue", "extend_from", "match_region", "limit", "concepts"}


@dataclass(frozen=True)
class ItemSetEntry:
    """A named item set as a registry states it. `varieties` empty: every built-in or declared prompting variety
    whose region the set has forms for."""

    name: str
    source: str
    varieties: tuple[str, ...] = ()
    cue: str = SCRIPT
    extend_from: tuple[str, ...] = ()
    match_region: str = "tw"
    limit: int | None = None  # only the first `limit` concepts (of `concepts`, when given)
    concepts: tuple[str, ...] = ()  # only these concept_ids
    registry: str = field(default="", compare=False)  # the file that declared it, for messages

    def subset_options(self) -> str:
        """`--concepts …` and `--term-limit N` as a command line spells this entry's subset ('' for none)."""
        return ((f" --concepts {' '.join(self.concepts)}" if self.concepts else "")
                + (f" --term-limit {self.limit}" if self.limit is not None else ""))

    @property
    def prefix(self) -> str:
        """The stem of the set's asset names and its benchmark name: `terms_<name>`."""
        return f"terms_{self.name}"

    def document(self) -> dict[str, Any]:
        values = {key: value for key, value in asdict(self).items() if key not in ("name", "registry")}
        return {key: list(value) if isinstance(value, tuple) else value for key, value in values.items()
                if value not in ((), None)}


def set_name_problem(name: str) -> str | None:
    if not SET_NAME.match(name):
        return (f"item set name {name!r}: use 1–31 lowercase letters, digits and _, starting with a letter "
                "(it names the set's assets, terms_<name>_…)")
    if name == DEFAULT_SET:
        return f"item set name {DEFAULT_SET!r} is the default set's (the term benchmark's own assets)"
    return None


def entry_from_document(name: str, document: object, registry: str) -> ItemSetEntry:
    where = f"{registry}: item_sets.{name}"
    problem = set_name_problem(name)
    if problem:
        raise ItemSetError(f"{where}: {problem}")
    if not isinstance(document, Mapping):
        raise ItemSetError(f"{where}: expected a mapping with `source` (and optionally varieties, cue, extend_from)")
    unknown = sorted(set(document) - _ENTRY_KEYS)
    if unknown:
        raise ItemSetError(f"{where}.{unknown[0]}: unknown key (keys: {', '.join(sorted(_ENTRY_KEYS))})")
    source = document.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ItemSetError(f"{where}.source: required: a path, URL or one of {', '.join(NAMED_SOURCES)}")
    cue = document.get("cue", SCRIPT)
    if cue not in CUE_MODES:
        raise ItemSetError(f"{where}.cue: {cue!r} is none of {', '.join(CUE_MODES)}")

    def strings(key: str) -> tuple[str, ...]:
        value = document.get(key) or []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ItemSetError(f"{where}.{key}: expected a list of strings")
        return tuple(value)

    limit = document.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ItemSetError(f"{where}.limit: expected a whole number of concepts, at least 1 (got {limit!r})")
    concepts = document.get("concepts") or []
    if not isinstance(concepts, list) or not all(isinstance(item, (str, int)) and not isinstance(item, bool)
                                                 for item in concepts):
        raise ItemSetError(f"{where}.concepts: expected a list of concept_ids")
    return ItemSetEntry(name=name, source=source.strip(), varieties=strings("varieties"), cue=cue,
                        extend_from=strings("extend_from"), match_region=str(document.get("match_region", "tw")),
                        limit=limit, concepts=tuple(str(item) for item in concepts), registry=registry)


def read_registry(path: str | Path) -> dict[str, ItemSetEntry]:
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ItemSetError(f"{path}: not valid YAML ({exc})") from None
    sets = document.get("item_sets") if isinstance(document, Mapping) else None
    if not isinstance(sets, Mapping):
        raise ItemSetError(f"{path}: expected a top-level `item_sets:` mapping of set name → entry")
    return {str(name): entry_from_document(str(name), value, str(path)) for name, value in sets.items()}


def run_registry_path() -> Path:
    return data_dir() / RUN_REGISTRY_FILE


def registered_sets(environ: Mapping[str, str] | None = None) -> dict[str, ItemSetEntry]:
    """Every registered set: the run registry's, then `$SCTC_ITEM_SETS`' (which wins on a shared name), then an
    entry handed over in `$SCTC_ITEM_SET_ENTRY`."""
    environ = os.environ if environ is None else environ
    found: dict[str, ItemSetEntry] = {}
    kept = run_registry_path()
    if kept.is_file():
        found.update(read_registry(kept))
    if environ.get(REGISTRY_ENV_VAR):
        found.update(read_registry(environ[REGISTRY_ENV_VAR]))
    if environ.get(ENTRY_ENV_VAR):
        document = json.loads(environ[ENTRY_ENV_VAR])
        name = document.pop("name")
        found[name] = entry_from_document(name, document, f"${ENTRY_ENV_VAR}")
    return found


def remember(entry: ItemSetEntry) -> Path:
    """The entry written into the run registry (the data folder's `item_sets.yaml`), replacing one of its name."""
    path = run_registry_path()
    sets = {name: kept.document() for name, kept in (read_registry(path).items() if path.is_file() else ())}
    if sets.get(entry.name) == entry.document():
        return path
    sets[entry.name] = entry.document()
    write_text(path, "# Item sets `sctc run --term-items` used; edit or delete entries freely.\n"
                     + yaml.safe_dump({"item_sets": sets}, allow_unicode=True, sort_keys=True))
    return path


def entry_json(entry: ItemSetEntry) -> str:
    return json.dumps({"name": entry.name, **entry.document()}, ensure_ascii=False)


def name_for_source(source: str) -> str:
    """A set name for a source given without one: a named source's name, else the file's stem when it is a valid
    name, else `items_<8 hex digits of the source>`."""
    if source in NAMED_SOURCES:
        return source.replace("-", "_")
    stem = Path(source.split("?", 1)[0]).stem.lower().replace("-", "_").replace(".", "_")
    return stem if set_name_problem(stem) is None else f"items_{hashlib.sha256(source.encode()).hexdigest()[:8]}"


def derived_name(source: str, extend_from: Sequence[str] = (), limit: int | None = None,
                 concepts: Sequence[str] = ()) -> str:
    """The name of a set given by its source alone: the source's (`name_for_source`), joined with its extensions',
    and a suffix for a subset (`_first12` for `--term-limit 12`, `_c<8 hex digits>` for `--concepts`)."""
    name = "_".join([name_for_source(source), *(name_for_source(other) for other in extend_from)])
    suffix = ((f"_c{hashlib.sha256(' '.join(concepts).encode()).hexdigest()[:8]}" if concepts else "")
              + (f"_first{limit}" if limit is not None else ""))
    if name == DEFAULT_SET and not suffix:
        name = f"{name}_varieties"
    return name[:31 - len(suffix)].rstrip("_") + suffix


def resolve_items(source: str, registered: Mapping[str, ItemSetEntry], *, name: str | None = None,
                  varieties: Sequence[str] | None = None, cue: str | None = None,
                  extend_from: Sequence[str] | None = None, limit: int | None = None,
                  concepts: Sequence[str] | None = None) -> ItemSetEntry:
    """The set an item option names, the same for every command that takes one (`sctc run`/`plan --term-items`,
    `sctc terms define --items`): a set `registered` under that name, else a source (`load_source`: a path, URL or
    named source). The options given replace the entry's own; `name` names it (default: the registered name, else
    `derived_name`)."""
    if name is not None:
        problem = set_name_problem(name)
        if problem:
            raise ItemSetError(f"--item-set-name: {problem}")
    extend = tuple(extend_from or ())
    base = registered.get(source)
    if base is None:
        base = ItemSetEntry(name=name or derived_name(source, extend, limit, tuple(concepts or ())), source=source,
                            extend_from=extend)
    elif name is not None:
        base = replace(base, name=name)
    return replace(base, varieties=tuple(varieties) if varieties else base.varieties, cue=cue or base.cue or SCRIPT,
                   extend_from=extend or base.extend_from, limit=limit if limit is not None else base.limit,
                   concepts=tuple(concepts) if concepts else base.concepts, registry="")


def _downloaded(url: str) -> Path:
    folder = data_dir() / "item_sets"
    target = folder / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{Path(url.split('?', 1)[0]).name}"
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        try:
            with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - a person's own item-set URL
                data = response.read()
        except OSError as exc:
            raise ItemSetError(f"{url}: could not be downloaded ({exc})") from None
        partial = target.with_suffix(target.suffix + ".part")
        partial.write_bytes(data)
        partial.replace(target)
    return target


def _is_csld(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.readline().decode("utf-8", errors="replace").lstrip("\ufeff")
    except OSError:
        return False
    return "臺1" in head or head.startswith("臺灣詞")


def load_source(source: str, *, name: str, catalog: Catalog | None = None, require_definitions: bool = True,
                open_sctc: Any = None) -> ItemSet:
    """The item set `source` names (see the module docstring). `open_sctc()`: the SC-TC-Bench upstream opener, for
    the `sctc` source (default `lib.sctc_upstream.open_sctc_upstream`)."""
    catalog = catalog or load_catalog()
    if source == DEFAULT_SET:
        from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE, open_sctc_upstream
        from sctc_assets.lib.term.items import from_sctc_upstream
        from sctc_assets.lib.term.terms import parse_terms

        upstream = (open_sctc or open_sctc_upstream)()
        item_set = from_sctc_upstream(parse_terms(upstream.read_csv(TERMS_FILE, TERM_COLUMNS), source_name=TERMS_FILE),
                                      name=name)
        return item_set
    if source in _CSLD_FILES:
        path = csld_path(_CSLD_FILES[source])
        if path is None:
            raise ItemSetError(f"item source {source!r}: set $SCTC_CSLD_UPSTREAM to a copy of g0v/moedict-data-csld "
                               "(the folder holding its csv files), or give the file's path or URL")
        if not path.is_file():
            raise ItemSetError(f"{path}: no such file ($SCTC_CSLD_UPSTREAM names the csld folder)")
        return from_csld(path, name=name)
    path = _downloaded(source) if source.startswith(("http://", "https://")) else Path(source).expanduser()
    if not path.is_file():
        raise ItemSetError(f"{source}: no such file (an item source is a path, an http(s) URL or one of "
                           f"{', '.join(NAMED_SOURCES)})")
    if _is_csld(path):
        return from_csld(path, name=name)
    return read_item_csv(path, name=name, catalog=catalog, require_definitions=require_definitions)


@dataclass(frozen=True)
class LoadedSet:
    item_set: ItemSet
    varieties: tuple[str, ...]
    extensions: tuple[tuple[str, int], ...]  # (source, concepts matched) per --extend-from source


def default_varieties(item_set: ItemSet, catalog: Catalog) -> tuple[str, ...]:
    return tuple(code for code, row in catalog.varieties.items() if item_set.count_forms(row.region))


# The sets this process has read (extended), by what they were read from: `sctc plan` asks for one set several times
# (the options' check, the partition keys, the design, `--term-items`), and a big set takes a while to parse. Only
# sets whose every source is a local file are kept, under each file's path and content digest (a file rewritten
# within one timestamp tick is still told apart), with the regions the catalog declares (`read_item_csv` checks the
# columns against them). Refusals are not kept: they are raised again.
_LOADED: dict[tuple, tuple[ItemSet, tuple[tuple[str, int], ...]]] = {}


def source_file(source: str) -> Path | None:
    """The local file `source` is read from; None for the upstream terms, a URL and a name or path without a file."""
    if source == DEFAULT_SET or source.startswith(("http://", "https://")):
        return None
    path = csld_path(_CSLD_FILES[source]) if source in _CSLD_FILES else Path(source).expanduser()
    return path if path is not None and path.is_file() else None


def _loaded_key(entry: ItemSetEntry, catalog: Catalog) -> tuple | None:
    """What `_LOADED` keeps the entry's set under; None when one of its sources is not a local file."""
    stamps = []
    for source in (entry.source, *entry.extend_from):
        path = source_file(source)
        if path is None:
            return None
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            return None
        stamps.append((source, str(path.resolve()), digest))
    return (entry.name, entry.extend_from, entry.match_region, entry.limit, entry.concepts, tuple(catalog.regions),
            tuple(stamps))


def _read_entry(entry: ItemSetEntry, catalog: Catalog, open_sctc: Any) -> tuple[ItemSet, tuple[tuple[str, int], ...]]:
    item_set = subset(load_source(entry.source, name=entry.name, catalog=catalog, require_definitions=False,
                                  open_sctc=open_sctc), limit=entry.limit, concepts=entry.concepts)
    extensions = []
    for other_source in entry.extend_from:
        other = load_source(other_source, name=name_for_source(other_source), catalog=catalog,
                            require_definitions=False, open_sctc=open_sctc)
        extended = extend_from(item_set, other, entry.match_region)
        item_set = extended.item_set
        extensions.append((other_source, extended.matched))
    return item_set, tuple(extensions)


def load_entry(entry: ItemSetEntry, *, catalog: Catalog | None = None, require_definitions: bool = True,
               open_sctc: Any = None) -> LoadedSet:
    """The entry's set (its subset: `concepts`, then the first `limit`), extended by its `extend_from` sources,
    with its varieties checked: each variety's region
    has a column, and (unless `require_definitions` is False) every concept a definition. A set read from local
    files is read once per process while the files stay as they are (`_LOADED`); the checks run every time."""
    catalog = catalog or load_catalog()
    key = _loaded_key(entry, catalog)
    if key is not None and key in _LOADED:
        item_set, extensions = _LOADED[key]
    else:
        item_set, extensions = _read_entry(entry, catalog, open_sctc)
        if key is not None:
            _LOADED[key] = (item_set, extensions)
    varieties = entry.varieties or default_varieties(item_set, catalog)
    check_varieties(item_set, varieties, catalog)
    if require_definitions:
        check_definitions(item_set, entry.source, entry.subset_options())
    return LoadedSet(item_set, tuple(varieties), extensions)


def variety_problems(codes: Sequence[str], catalog: Catalog | None = None) -> list[str]:
    catalog = catalog or load_catalog()
    problems = []
    for code in codes:
        try:
            catalog.variety(code)
        except KeyError as exc:
            problems.append(str(exc.args[0]))
    return problems


def dedupe(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))
