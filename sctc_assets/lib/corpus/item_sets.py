"""Corpus counts of any item set: every form of every region, counted in one pass per record (pure Python, no
Dagster). The default corpus counts (`forms.py`, `totals.py`) count the 110 upstream terms and the names; these
functions count the concepts of an item set (`lib/term/items.py`) with whatever regions it has.

What is searched (`item_set_patterns`), as `forms.py` does for the default set's terms: each form of a region as
written, converted into the other script (OpenCC's script-only s2t/t2s; a region's script is the one
`region_labels.region_script` gives it: Simplified for cn, sg, my, Traditional for tw, hk, mo) and in either script.
So a Traditional form (機車) found only as 机车 counts for the form converted and in either script, not as
written.

Two levels of pattern rows, both found by the same `FormMatcher` pass (a string several rows hold is one pattern of
the automaton, searched once):

- `form`: one form of a concept. A form several regions of the concept list (the same string, giving the same
  alternatives) is one row whose `regions` names each of them; its count is credited to each region.
- `region`: all the forms of one region of a concept together, so a record holding two of them counts once. These
  totals are exact per record (the matcher reports, per record, each row it holds), not a sum of the form counts.
  A region with a single form of the concept has no such row: its total is that form's count.

`item_set_count_table` sums the shards counted with today's patterns and registry settings (as `totals.py` does)
into one table: `level = form` rows (corpus × concept × region × form), `level = concept` rows (corpus × concept ×
region: records containing any of the region's forms) and `level = region` rows (corpus × region: concepts with a
form there, the mean records per concept and the concepts without any record).
"""

from __future__ import annotations

import hashlib
import json
from typing import Iterable, Mapping, Sequence

import pandas as pd

from sctc_assets.lib.conversion import to_simplified, to_traditional
from sctc_assets.lib.corpus.corpus_registry import CorpusEntry
from sctc_assets.lib.corpus.totals import COVERAGE_COLUMNS, coverage, current_shards
from sctc_assets.lib.term.items import ID_COLUMN, TERM_PREFIX, ItemSet
from sctc_assets.lib.term.region_labels import region_script
from sctc_assets.lib.term.terms import split_alternatives
from sctc_assets.lib.varieties import Catalog, load_catalog

FORM_LEVEL, REGION_LEVEL = "form", "region"  # pattern levels
CONCEPT_LEVEL = "concept"  # the count table's per concept × region totals (the `region` patterns' counts)
ANY_SCRIPT = "any"
PATTERN_COLUMNS = ["form_id", "concept_id", "level", "form", "script", "regions", "alternatives"]
COUNT_COLUMNS = ["records_containing", "records_containing_converted", "records_containing_any_script"]
SUMMARY_COLUMNS = ["n_concepts", "mean_records", "mean_records_any_script", "concepts_without_records",
                   "concepts_without_records_any_script"]
TABLE_COLUMNS = ["corpus", "level", "concept_id", "region", "form", *COUNT_COLUMNS, *SUMMARY_COLUMNS,
                 *COVERAGE_COLUMNS[1:]]
_OTHER = {"simplified": "traditional", "traditional": "simplified"}
_CONVERT = {"simplified": to_simplified, "traditional": to_traditional}


def _cell_forms(cell) -> tuple[str, ...]:
    """A `term_<region>` cell as forms: a list (a tuple, or the array Parquet reads back), a `/`-joined string, or
    nothing (None, NaN)."""
    if cell is None:
        return ()
    if isinstance(cell, str):
        return tuple(dict.fromkeys(split_alternatives(cell)))
    if hasattr(cell, "tolist"):
        cell = cell.tolist()
    if not isinstance(cell, (list, tuple)):
        return ()  # a missing scalar (NaN, pd.NA)
    return tuple(dict.fromkeys(str(form).strip() for form in cell if isinstance(form, str) and form.strip()))


def item_regions(items: pd.DataFrame | ItemSet) -> tuple[str, ...]:
    """The item set's regions, in its column order."""
    if isinstance(items, ItemSet):
        return items.regions
    return tuple(column[len(TERM_PREFIX):] for column in items.columns if column.startswith(TERM_PREFIX))


def concept_forms(items: pd.DataFrame | ItemSet) -> list[tuple[str, dict[str, tuple[str, ...]]]]:
    """(concept_id, region → forms) per concept, in the set's order; `items` is an `ItemSet` or its `frame()`."""
    if isinstance(items, ItemSet):
        return [(c.concept_id, {region: c.forms_of(region) for region in items.regions}) for c in items.concepts]
    regions = item_regions(items)
    if ID_COLUMN not in items.columns:
        raise ValueError(f"the item table has no `{ID_COLUMN}` column (columns: {', '.join(map(str, items.columns))})")
    return [(str(record[ID_COLUMN]), {region: _cell_forms(record[TERM_PREFIX + region]) for region in regions})
            for record in items.to_dict("records")]


def _by_script(form: str, written: str) -> dict[str, tuple[str, ...]]:
    """A form's alternatives per script, as `forms._region_forms`: as written (in its region's script, not converted
    even where the item set writes a character of the other script), converted to the other, and either."""
    other = _OTHER[written]
    converted = _CONVERT[other](form)
    return {written: (form,), other: (converted,), ANY_SCRIPT: tuple(dict.fromkeys((form, converted)))}


def item_set_patterns(items: pd.DataFrame | ItemSet, catalog: Catalog | None = None) -> pd.DataFrame:
    """What the corpus counts of an item set search for: one row per distinct (concept, level, form, script,
    alternatives), with the regions it stands for; `form_id` is its position (the matcher's form index)."""
    catalog = catalog or load_catalog()
    regions = item_regions(items)
    scripts = {}
    for region in regions:
        try:
            scripts[region] = region_script(catalog, region)
        except KeyError as exc:
            raise ValueError(f"column {TERM_PREFIX}{region}: {exc.args[0]} (declare it in a varieties file, "
                             "$SCTC_VARIETIES)") from None
    rows: dict[tuple, list[str]] = {}  # key → regions, in insertion order (Python dicts keep it)
    for concept_id, forms in concept_forms(items):
        for region in regions:
            region_forms = forms.get(region, ())
            if not region_forms:
                continue
            per_form = [_by_script(form, scripts[region]) for form in region_forms]
            for form, by_script in zip(region_forms, per_form):
                for script, alternatives in by_script.items():
                    rows.setdefault((concept_id, FORM_LEVEL, form, script, alternatives), []).append(region)
            if len(region_forms) == 1:
                continue  # the concept's total is its one form's count (`_per_region`): no row of its own
            for script in (scripts[region], _OTHER[scripts[region]], ANY_SCRIPT):
                union = tuple(dict.fromkeys(a for by_script in per_form for a in by_script[script]))
                rows.setdefault((concept_id, REGION_LEVEL, None, script, union), []).append(region)
    patterns = pd.DataFrame([{"concept_id": concept_id, "level": level, "form": form, "script": script,
                              "regions": list(dict.fromkeys(row_regions)), "alternatives": list(alternatives)}
                             for (concept_id, level, form, script, alternatives), row_regions in rows.items()],
                            columns=PATTERN_COLUMNS[1:])
    patterns.insert(0, "form_id", range(len(patterns)))
    return patterns


def patterns_digest(patterns: pd.DataFrame) -> str:
    """Identifies the exact patterns counted, in order: shard counts made with other patterns are not summed."""
    payload = [["item_set", str(row.concept_id), row.level, row.form, row.script, list(row.regions),
                list(row.alternatives)] for row in patterns.itertuples(index=False)]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()[:16]


def _role(script: str, written: str) -> str:
    if script == ANY_SCRIPT:
        return "records_containing_any_script"
    return "records_containing" if script == written else "records_containing_converted"


def _per_region(sums: pd.DataFrame, patterns: pd.DataFrame, scripts: Mapping[str, str]) -> pd.DataFrame:
    """Records per corpus × pattern, credited to each region of the pattern, one column per script role."""
    joined = sums.merge(patterns[["form_id", "concept_id", "level", "form", "script", "regions"]], on="form_id")
    joined = joined.explode("regions").rename(columns={"regions": "region"})
    joined["role"] = [_role(script, scripts[region]) for script, region in zip(joined["script"], joined["region"])]
    joined["level"] = joined["level"].replace({REGION_LEVEL: CONCEPT_LEVEL})
    joined["form"] = joined["form"].fillna("")  # a concept total has no form; groupby would drop a missing key
    keys = ["corpus", "level", "concept_id", "region", "form"]
    wide = joined.groupby(keys + ["role"], sort=False)["records_containing"].sum().unstack("role")
    wide.columns.name = None
    wide = wide.reset_index().reindex(columns=keys + COUNT_COLUMNS)
    wide["form"] = wide["form"].astype(object).where(wide["form"] != "", None)
    # A region with one form of a concept has no `region` pattern: its total is that form's row.
    totals = wide[wide["level"] == CONCEPT_LEVEL]
    forms = wide[wide["level"] == FORM_LEVEL]
    with_total = set(zip(totals["corpus"], totals["concept_id"], totals["region"]))
    single = forms[[key not in with_total for key in zip(forms["corpus"], forms["concept_id"], forms["region"])]]
    return pd.concat([wide, single.assign(level=CONCEPT_LEVEL, form=None)], ignore_index=True)


def _summary(concepts: pd.DataFrame) -> pd.DataFrame:
    grouped = concepts.groupby(["corpus", "region"], sort=False)
    summary = pd.DataFrame({
        "n_concepts": grouped["concept_id"].nunique(),
        "mean_records": grouped["records_containing"].mean(),
        "mean_records_any_script": grouped["records_containing_any_script"].mean(),
        "concepts_without_records": grouped["records_containing"].agg(lambda values: int((values == 0).sum())),
        "concepts_without_records_any_script": grouped["records_containing_any_script"].agg(
            lambda values: int((values == 0).sum())),
    }).reset_index()
    summary.insert(1, "level", REGION_LEVEL)
    return summary


def item_set_count_table(shard_counts: pd.DataFrame, patterns: pd.DataFrame, entries: Mapping[str, CorpusEntry],
                         regions: Sequence[str], catalog: Catalog | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the count table, coverage per registered corpus) from the shard counts of `patterns` (`TABLE_COLUMNS`;
    see the module docstring). Only shards of the registry's present layout counted with these patterns are
    summed, each once; a corpus none of whose shards is counted has no rows. `regions`: the item set's, in order."""
    catalog = catalog or load_catalog()
    scripts = {region: region_script(catalog, region) for region in regions}
    current = current_shards(shard_counts, entries, patterns_digest(patterns))
    covered = coverage(current, entries)
    if current.empty or patterns.empty:
        return pd.DataFrame(columns=TABLE_COLUMNS), covered
    sums = current.groupby(["corpus", "form_id"], as_index=False)["records_containing"].sum()
    counts = _per_region(sums, patterns, scripts)
    summary = _summary(counts[counts["level"] == CONCEPT_LEVEL])
    table = pd.concat([summary, counts], ignore_index=True)
    # Order: per corpus, the region summaries, then per concept (the set's order) and region (the set's order) the
    # concept total followed by its forms (the set's order).
    concept_order = {concept_id: n for n, concept_id in enumerate(dict.fromkeys(patterns["concept_id"]))}
    region_order = {region: n for n, region in enumerate(regions)}
    form_order = {(row.concept_id, row.form): row.form_id for row in patterns.itertuples(index=False)
                  if row.level == FORM_LEVEL}
    table["_level"] = table["level"].map({REGION_LEVEL: 0, CONCEPT_LEVEL: 1, FORM_LEVEL: 1})
    table["_concept"] = table["concept_id"].map(concept_order).fillna(-1)
    table["_region"] = table["region"].map(region_order)
    table["_form"] = [form_order.get((concept, form), -1) for concept, form in zip(table["concept_id"], table["form"])]
    table = table.sort_values(["corpus", "_level", "_concept", "_region", "_form"], kind="stable")
    table = table.drop(columns=["_level", "_concept", "_region", "_form"]).merge(covered, on="corpus", how="left")
    for column in (*COUNT_COLUMNS, "n_concepts", "concepts_without_records", "concepts_without_records_any_script"):
        table[column] = table[column].astype("Int64")  # missing where the row's level has no such number
    return table.reindex(columns=TABLE_COLUMNS).reset_index(drop=True), covered


def region_summary(table: pd.DataFrame) -> pd.DataFrame:
    """The table's `level = region` rows (per corpus and region), for a Markdown preview."""
    if table.empty:
        return table
    return table.loc[table["level"] == REGION_LEVEL, ["corpus", "region", *SUMMARY_COLUMNS]].reset_index(drop=True)


def distinct_strings(patterns: pd.DataFrame) -> int:
    return len({alternative for alternatives in patterns["alternatives"] for alternative in alternatives})


def most_frequent(patterns: pd.DataFrame, counts: Iterable[int], n: int = 10) -> pd.DataFrame:
    """The `n` form patterns found in most records, for a shard's metadata."""
    found = patterns.assign(records_containing=list(counts))
    found = found[found["level"] == FORM_LEVEL].nlargest(n, "records_containing")
    return found.assign(regions=found["regions"].map(", ".join))[
        ["concept_id", "form", "regions", "script", "records_containing"]]
