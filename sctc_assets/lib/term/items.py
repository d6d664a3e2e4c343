"""Item sets: named sources of concepts with their forms per region (pure Python, no Dagster).

An item set is what the term task asks about: each concept has a definition in both scripts and, per region, the
forms (alternative words) that region uses; a region without a form for a concept is neither asked nor counted for
it. Item sets come from a UTF-8 CSV in the schema `docs/item-sets.md` documents (`read_item_csv`), or from an
importer: the upstream SC-TC-Bench terms (`from_sctc_upstream`, the default set) and the csld lists of the
中華語文知識庫 (`from_csld`, read at run time: their licence forbids derivatives, so none is ever stored here).

Forms are written in their region's script (Mainland, Singapore, Malaysia: Simplified; Taiwan, Hong Kong, Macau:
Traditional); the labeller compares them across scripts (`region_labels`).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Mapping, NamedTuple, Sequence

import pandas as pd

from sctc_assets.lib.atomic_files import write_text
from sctc_assets.lib.conversion import convert, convert_chars, to_simplified, to_traditional
from sctc_assets.lib.term.terms import split_alternatives
from sctc_assets.lib.varieties import Catalog, PromptingVariety, load_catalog

ID_COLUMN = "concept_id"
DEFINITION_COLUMNS = ("definition_zh_hans", "definition_zh_hant")
OPTIONAL_COLUMNS = ("category", "definition_source")
TERM_PREFIX = "term_"
DEFINE_HINT = "`sctc terms define` can draft the missing definitions"


class ItemSetError(ValueError):
    """An item set that cannot be used; the message names the file, the row (as a person counts the file's rows:
    the header is row 1) and the column."""


@dataclass(frozen=True)
class Concept:
    concept_id: str
    forms: Mapping[str, tuple[str, ...]]  # region code → forms; a region without a form is absent or empty
    definition_zh_hans: str | None = None
    definition_zh_hant: str | None = None
    category: str | None = None
    definition_source: str | None = None
    row: int | None = field(default=None, compare=False)  # its row in the file it was read from (header: row 1)

    def forms_of(self, region: str) -> tuple[str, ...]:
        return tuple(self.forms.get(region, ()))


@dataclass(frozen=True)
class ItemSet:
    name: str
    regions: tuple[str, ...]
    concepts: tuple[Concept, ...]
    source: str = field(default="", compare=False)  # where it came from, for messages (a file, an importer)

    def __len__(self) -> int:
        return len(self.concepts)

    def concept(self, concept_id: str) -> Concept:
        for concept in self.concepts:
            if concept.concept_id == concept_id:
                return concept
        raise KeyError(f"{self.source or self.name}: no concept {concept_id!r}")

    def count_forms(self, region: str) -> int:
        """How many concepts have at least one form in `region`."""
        return sum(bool(concept.forms_of(region)) for concept in self.concepts)

    def frame(self) -> pd.DataFrame:
        """One row per concept: concept_id, category, both definitions, definition_source and one column of form
        tuples per region (`term_<region>`)."""
        return pd.DataFrame([{ID_COLUMN: c.concept_id, "category": c.category,
                              "definition_zh_hans": c.definition_zh_hans, "definition_zh_hant": c.definition_zh_hant,
                              "definition_source": c.definition_source,
                              **{TERM_PREFIX + region: c.forms_of(region) for region in self.regions}}
                             for c in self.concepts],
                            columns=[ID_COLUMN, "category", *DEFINITION_COLUMNS, "definition_source",
                                     *(TERM_PREFIX + region for region in self.regions)])


def item_set_from_frame(frame: pd.DataFrame, name: str, source: str = "") -> ItemSet:
    """The item set `ItemSet.frame()` wrote (read back from storage: form lists may come back as arrays)."""
    regions = tuple(column[len(TERM_PREFIX):] for column in frame.columns if column.startswith(TERM_PREFIX))
    concepts = tuple(
        Concept(concept_id=str(record[ID_COLUMN]),
                forms={region: tuple(str(form) for form in (record[TERM_PREFIX + region]
                                                            if record[TERM_PREFIX + region] is not None else ()))
                       for region in regions},
                definition_zh_hans=_blank(record.get("definition_zh_hans")),
                definition_zh_hant=_blank(record.get("definition_zh_hant")),
                category=_blank(record.get("category")), definition_source=_blank(record.get("definition_source")))
        for record in frame.to_dict("records"))
    return ItemSet(name=name, regions=regions, concepts=concepts, source=source or name)


def _forms(cell: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(split_alternatives(cell or "")))


def _blank(value: str | None) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _fill_definitions(hans: str | None, hant: str | None) -> tuple[str | None, str | None]:
    """The missing script's definition by script-only conversion (t2s / s2t), never by phrase conversion."""
    if hans is None and hant is not None:
        hans = to_simplified(hant)
    if hant is None and hans is not None:
        hant = to_traditional(hans)
    return hans, hant


def _decode(path: Path) -> str:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ItemSetError(f"{path}: row {line}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                           "save the file as UTF-8") from None
    return text.removeprefix("\ufeff")


def read_item_csv(path: str | Path, *, name: str | None = None, catalog: Catalog | None = None,
                  require_definitions: bool = True) -> ItemSet:
    """The item set of a CSV in the documented schema (`docs/item-sets.md`).

    Refuses, naming the file, row and column: a file that is not UTF-8, a missing `concept_id` column, a blank or
    duplicate concept_id, a `term_<x>` column of an undeclared region (`catalog`: the built-in regions plus
    `$SCTC_VARIETIES`'), an unknown column, a concept without any form and, unless `require_definitions` is False,
    a concept without a definition in either script."""
    path = Path(path)
    catalog = catalog or load_catalog()
    reader = csv.reader(io.StringIO(_decode(path), newline=""))
    try:
        header = [column.strip() for column in next(reader)]
    except StopIteration:
        raise ItemSetError(f"{path}: row 1: empty file; expected a header with `{ID_COLUMN}`") from None
    if ID_COLUMN not in header:
        raise ItemSetError(f"{path}: row 1: no `{ID_COLUMN}` column (header: {', '.join(header)})")
    regions = []
    for column in header:
        if column.startswith(TERM_PREFIX):
            code = column[len(TERM_PREFIX):]
            if code not in catalog.regions:
                hint = f" (region codes are lowercase: term_{code.lower()})" if code.lower() in catalog.regions else \
                    " (declare it in a varieties file, $SCTC_VARIETIES)"
                raise ItemSetError(f"{path}: row 1, column {column}: region {code!r} is not declared; known: "
                                   f"{', '.join(catalog.regions)}{hint}")
            regions.append(code)
        elif column not in (ID_COLUMN, *DEFINITION_COLUMNS, *OPTIONAL_COLUMNS):
            raise ItemSetError(f"{path}: row 1, column {column!r}: not a column of the item-set schema ({ID_COLUMN}, "
                               f"category, definition_zh_hans, definition_zh_hant, definition_source, term_<region>)")
    duplicated = sorted({column for column in header if header.count(column) > 1})
    if duplicated:
        raise ItemSetError(f"{path}: row 1, column {duplicated[0]}: the column appears more than once")
    if not regions:
        raise ItemSetError(f"{path}: row 1: no `term_<region>` column (e.g. term_cn, term_tw)")
    if require_definitions and not set(DEFINITION_COLUMNS) & set(header):
        raise ItemSetError(f"{path}: row 1: no definition_zh_hans or definition_zh_hant column; "
                           f"{define_hint(str(path))}")
    concepts, first_row = [], {}
    for row_number, values in enumerate(reader, start=2):
        if not any(value.strip() for value in values):
            continue
        if len(values) != len(header):
            raise ItemSetError(f"{path}: row {row_number}: {len(values)} fields, but the header has {len(header)}")
        record = dict(zip(header, values))
        concept_id = _blank(record[ID_COLUMN])
        if concept_id is None:
            raise ItemSetError(f"{path}: row {row_number}, column {ID_COLUMN}: blank concept_id")
        if concept_id in first_row:
            raise ItemSetError(f"{path}: row {row_number}, column {ID_COLUMN}: duplicate concept_id {concept_id!r} "
                               f"(first in row {first_row[concept_id]})")
        first_row[concept_id] = row_number
        forms = {region: _forms(record[TERM_PREFIX + region]) for region in regions}
        if not any(forms.values()):
            raise ItemSetError(f"{path}: row {row_number}, columns {', '.join(TERM_PREFIX + r for r in regions)}: "
                               f"concept {concept_id!r} has no form in any region")
        hans, hant = _fill_definitions(_blank(record.get("definition_zh_hans")),
                                       _blank(record.get("definition_zh_hant")))
        concepts.append(Concept(concept_id=concept_id, forms=forms, definition_zh_hans=hans, definition_zh_hant=hant,
                                category=_blank(record.get("category")),
                                definition_source=_blank(record.get("definition_source")), row=row_number))
    item_set = ItemSet(name=name or path.stem, regions=tuple(regions), concepts=tuple(concepts), source=str(path))
    if require_definitions:
        check_definitions(item_set, str(path))
    return item_set


def write_item_csv(item_set: ItemSet, path: str | Path) -> Path:
    """The item set in the documented schema (UTF-8, alternatives joined by `/`); `read_item_csv` reads it back."""
    path = Path(path)
    columns = [ID_COLUMN, "category", *DEFINITION_COLUMNS, "definition_source",
               *(TERM_PREFIX + region for region in item_set.regions)]
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for c in item_set.concepts:
        writer.writerow([c.concept_id, c.category or "", c.definition_zh_hans or "", c.definition_zh_hant or "",
                         c.definition_source or "", *("/".join(c.forms_of(region)) for region in item_set.regions)])
    write_text(path, buffer.getvalue())
    return path


def check_varieties(item_set: ItemSet, varieties: Iterable[PromptingVariety | str],
                    catalog: Catalog | None = None) -> list[PromptingVariety]:
    """The prompting varieties, each checked to have its region's column in the item set (refused otherwise)."""
    catalog = catalog or load_catalog()
    rows = [catalog.variety(code) for code in varieties]
    for row in rows:
        if row.region not in item_set.regions:
            raise ItemSetError(f"{item_set.source or item_set.name}: row 1, column {TERM_PREFIX}{row.region}: "
                               f"missing, but variety {row.code} expects its region's forms there (columns here: "
                               f"{', '.join(TERM_PREFIX + region for region in item_set.regions)})")
    return rows


def _ranges(rows: Sequence[int], most: int = 8) -> str:
    """Row numbers as ranges, `2–12, 14, 16–988`; past `most` ranges, how many rows are left."""
    spans: list[list[int]] = []
    for row in sorted(set(rows)):
        if spans and row == spans[-1][1] + 1:
            spans[-1][1] = row
        else:
            spans.append([row, row])
    shown = ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans[:most])
    rest = sum(b - a + 1 for a, b in spans[most:])
    return shown + (f" and {rest} more" if rest else "")


def define_hint(items: str | None = None, options: str = "") -> str:
    """What drafts the missing definitions: `sctc terms define`, with the item source it takes when known."""
    if items is None:
        return DEFINE_HINT
    return f"`sctc terms define --items {items}{options} --model KEY` drafts them (docs/item-sets.md)"


def check_definitions(item_set: ItemSet, items: str | None = None, options: str = "") -> None:
    """Refuse an item set with a concept that cannot be prompted: no definition in either script. The message
    counts every such concept and gives their rows in the file (their concept_ids where the set was not read from
    rows); `items` (and `options`): the item source (and subset options) `sctc terms define` takes for them."""
    missing = [concept for concept in item_set.concepts
               if concept.definition_zh_hans is None and concept.definition_zh_hant is None]
    if not missing:
        return
    where, hint = item_set.source or item_set.name, define_hint(items, options)
    columns = "columns definition_zh_hans/definition_zh_hant"
    if len(missing) == 1:
        concept = missing[0]
        at = f"row {concept.row}, " if concept.row is not None else ""
        raise ItemSetError(f"{where}: {at}{columns}: concept {concept.concept_id!r} has no definition (1 of "
                           f"{len(item_set)} concepts); {hint}")
    rows = [concept.row for concept in missing if concept.row is not None]
    named = (f"rows {_ranges(rows)}" if len(rows) == len(missing) else
             "concepts " + ", ".join(repr(c.concept_id) for c in missing[:8])
             + (f" and {len(missing) - 8} more" if len(missing) > 8 else ""))
    raise ItemSetError(f"{where}: {len(missing)} of {len(item_set)} concepts have no definition ({named}; {columns}); "
                       f"{hint}")


def subset(item_set: ItemSet, *, limit: int | None = None, concepts: Sequence[str] = ()) -> ItemSet:
    """The concepts named in `concepts` (in the set's order; each must be in the set), then the first `limit` of
    them: a part of a large set, to try it on a slow model. Without either, the set as it is."""
    chosen = item_set.concepts
    if concepts:
        known = {concept.concept_id for concept in chosen}
        unknown = [concept_id for concept_id in dict.fromkeys(concepts) if concept_id not in known]
        if unknown:
            examples = ", ".join(repr(concept.concept_id) for concept in chosen[:3])
            raise ItemSetError(f"{item_set.source or item_set.name}: --concepts: no concept "
                               f"{', '.join(map(repr, unknown))} in the set (its concept_ids: {examples}, …)")
        wanted = set(concepts)
        chosen = tuple(concept for concept in chosen if concept.concept_id in wanted)
    if limit is not None:
        if limit < 1:
            raise ItemSetError(f"--term-limit: must be at least 1, got {limit}")
        chosen = chosen[:limit]
    return item_set if chosen == item_set.concepts else replace(item_set, concepts=tuple(chosen))


def from_sctc_upstream(terms: pd.DataFrame, *, name: str = "sctc") -> ItemSet:
    """The default item set: the upstream 110 terms as `parse_terms` gives them (Mainland → cn, Taiwan → tw, the
    upstream's definitions in both scripts, category and definition source), in upstream order."""
    concepts = tuple(
        Concept(concept_id=str(record["term_id"]),
                forms={"cn": tuple(dict.fromkeys(record["mainland_alternatives"])),
                       "tw": tuple(dict.fromkeys(record["taiwan_alternatives"]))},
                definition_zh_hans=record["definition_simplified"], definition_zh_hant=record["definition_traditional"],
                category=_blank(record["category"]), definition_source=_blank(record["definition_source"]))
        for record in terms.sort_values("position").to_dict("records"))
    return ItemSet(name=name, regions=("cn", "tw"), concepts=concepts, source="SC-TC-Bench regional terms")


# The csld lists' region columns (臺灣, 大陸, 香港, 澳門). The lists write every form in Traditional characters; Mainland
# forms are brought into their region's script with OpenCC's script-only t2s.
CSLD_ENV_VAR = "SCTC_CSLD_UPSTREAM"
CSLD_THREE_PLACES = "兩岸三地生活差異詞語彙編-同實異名.csv"
CSLD_STRAITS = "兩岸同實異名.csv"
_CSLD_PREFIXES = {"臺": "tw", "陸": "cn", "香": "hk", "澳": "mo"}
_CSLD_SEPARATORS = ("、", "／", "/", "；", ";")


def _csld_forms(cells: Iterable[str], region: str) -> tuple[str, ...]:
    forms = []
    for cell in cells:
        for separator in _CSLD_SEPARATORS[:-1]:
            cell = cell.replace(separator, "/")
        for form in split_alternatives(cell.replace(";", "/")):
            forms.append(to_simplified(form) if region == "cn" else form)
    return tuple(dict.fromkeys(forms))


def from_csld(path: str | Path, *, name: str | None = None) -> ItemSet:
    """An item set from one of the csld lists (g0v/moedict-data-csld), by its header:

    - `兩岸三地生活差異詞語彙編-同實異名.csv` (總分類, 子分類, 注音, 漢語拼音, 臺1-3, 陸1-3, 香1-3, 澳1-3, 差異說明): one concept
      per row (no id in the file: concept_id is the data row's number, 1 = the first under the header), regions tw,
      cn, hk, mo, category `總分類/子分類`;
    - `兩岸同實異名.csv` (臺灣詞, its two ids, 大陸詞, its two ids, 差異別): one Taiwan–Mainland pair per row; pairs sharing
      a form are one concept, whose concept_id is the first id of its first Taiwan word; regions tw, cn.

    Neither list has definitions (`sctc terms define` drafts them)."""
    path = Path(path)
    rows = list(csv.reader(io.StringIO(_decode(path), newline="")))
    if not rows:
        raise ItemSetError(f"{path}: row 1: empty file")
    header = [column.strip() for column in rows[0]]
    if {"臺1", "陸1"} <= set(header):
        return _csld_three_places(path, header, rows[1:], name or path.stem)
    if header[:1] == ["臺灣詞"] and len(header) >= 4 and header[3] == "大陸詞":
        return _csld_straits(path, rows[1:], name or path.stem)
    raise ItemSetError(f"{path}: row 1: not a csld 同實異名 list (expected 臺1…/陸1… or 臺灣詞,…,大陸詞 columns)")


def _csld_three_places(path: Path, header: list[str], rows: list[list[str]], name: str) -> ItemSet:
    columns: dict[str, list[int]] = {}
    for index, column in enumerate(header):
        if column[:1] in _CSLD_PREFIXES and column[1:].isdigit():
            columns.setdefault(_CSLD_PREFIXES[column[:1]], []).append(index)
    regions = tuple(region for region in ("tw", "cn", "hk", "mo") if region in columns)
    concepts = []
    for number, values in enumerate(rows, start=1):
        if not any(value.strip() for value in values):
            continue
        forms = {region: _csld_forms((values[i] for i in indexes if i < len(values)), region)
                 for region, indexes in columns.items()}
        category = "/".join(values[i].strip() for i in (0, 1) if i < len(values) and values[i].strip()) or None
        concepts.append(Concept(concept_id=str(number), forms={r: forms[r] for r in regions}, category=category,
                                definition_source=None, row=number + 1))
    return ItemSet(name=name, regions=regions, concepts=tuple(concepts), source=str(path))


def _csld_straits(path: Path, rows: list[list[str]], name: str) -> ItemSet:
    numbered = [(number, values) for number, values in enumerate(rows, start=2)  # the header is row 1
                if len(values) >= 4 and values[0].strip() and values[3].strip()]
    pairs = [(values[0].strip(), values[1].strip(), values[3].strip()) for _, values in numbered]
    parent = list(range(len(pairs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_with: dict[tuple[str, str], int] = {}
    for i, (taiwan, _, mainland) in enumerate(pairs):
        for key in (("tw", taiwan), ("cn", mainland)):
            if key in first_with:
                a, b = root(first_with[key]), root(i)
                parent[max(a, b)] = min(a, b)
            else:
                first_with[key] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(pairs)):
        groups.setdefault(root(i), []).append(i)
    concepts = []
    for members in groups.values():
        first_taiwan_id = pairs[members[0]][1] or str(members[0] + 1)
        concepts.append(Concept(concept_id=first_taiwan_id,
                                forms={"tw": _csld_forms((pairs[i][0] for i in members), "tw"),
                                       "cn": _csld_forms((pairs[i][2] for i in members), "cn")},
                                row=numbered[members[0]][0]))
    ids = [c.concept_id for c in concepts]
    if len(set(ids)) != len(ids):  # one Taiwan word's id heading two concepts: fall back to positions
        concepts = [replace(c, concept_id=str(n)) for n, c in enumerate(concepts, start=1)]
    return ItemSet(name=name, regions=("tw", "cn"), concepts=tuple(concepts), source=str(path))


def csld_path(file: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """`file` in the csld folder `$SCTC_CSLD_UPSTREAM` names, if set."""
    import os

    folder = (os.environ if environ is None else environ).get(CSLD_ENV_VAR)
    return Path(folder) / file if folder else None


def _match_key(form: str) -> str:
    """A form in one script for matching across scripts (script-only OpenCC, character by character)."""
    return convert_chars(convert(form, "t2s"), "t2s")


class Extension(NamedTuple):
    item_set: ItemSet
    matched: int  # concepts of the base that matched at least one concept of the other source


def extend_from(base: ItemSet, other: ItemSet, match_region: str = "tw",
                regions: Sequence[str] | None = None, *, across_scripts: bool = True) -> Extension:
    """`base` with the forms of `other`'s regions it lacks (or of `regions`), taken from the concepts of `other`
    that share a `match_region` form with it (several matches pool their forms). Forms are compared across scripts
    (script-only OpenCC; 三温暖 matches 三溫暖), or exactly as written with `across_scripts=False`.

    Returns the extended set and how many of base's concepts matched."""
    for item_set in (base, other):
        if match_region not in item_set.regions:
            raise ItemSetError(f"{item_set.source or item_set.name}: column {TERM_PREFIX}{match_region}: missing, "
                               f"but the sets are matched on it")
    added = tuple(regions) if regions is not None else tuple(r for r in other.regions if r not in base.regions)
    unknown = [region for region in added if region not in other.regions]
    if unknown:
        raise ItemSetError(f"{other.source or other.name}: column {TERM_PREFIX}{unknown[0]}: missing")
    key = _match_key if across_scripts else str
    by_form: dict[str, list[Concept]] = {}
    for concept in other.concepts:
        for form in concept.forms_of(match_region):
            by_form.setdefault(key(form), []).append(concept)
    extended, matched = [], 0
    for concept in base.concepts:
        sources = list({id(c): c for form in concept.forms_of(match_region)
                        for c in by_form.get(key(form), [])}.values())
        matched += bool(sources)
        forms = dict(concept.forms)
        for region in added:
            pooled = [*forms.get(region, ()), *(form for c in sources for form in c.forms_of(region))]
            forms[region] = tuple(dict.fromkeys(pooled))
        extended.append(replace(concept, forms=forms))
    regions_out = (*base.regions, *(r for r in added if r not in base.regions))
    return Extension(ItemSet(name=base.name, regions=regions_out, concepts=tuple(extended),
                             source=f"{base.source or base.name} + {other.source or other.name}"), matched)
