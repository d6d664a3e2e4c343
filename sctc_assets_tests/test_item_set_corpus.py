"""Corpus counts of an item set's forms per region: the patterns, exact counts through the asset factory (one
partition per corpus shard, then the totals), a shard left uncounted, the default set's equivalence with the
corpus benchmark's counts, and the csld three-places list's Hong Kong and Macau forms."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.assets.shared import shared_resources
from sctc_assets.assets.item_sets.corpus import item_set_corpus_assets
from sctc_assets.lib.corpus.corpus_registry import parse_corpora
from sctc_assets.lib.corpus.forms import build_forms
from sctc_assets.lib.corpus.item_sets import (FORM_LEVEL, REGION_LEVEL, TABLE_COLUMNS, item_regions,
                                              item_set_count_table, item_set_patterns, patterns_digest)
from sctc_assets.lib.corpus.matcher import FormMatcher, count_texts
from sctc_assets.lib.corpus.totals import count_fingerprints, shard_frame
from sctc_assets.lib.schemas import frame_problems
from sctc_assets.lib.schemas.item_set_corpus import item_set_corpus_schemas
from sctc_assets.lib.term.items import (CSLD_THREE_PLACES, Concept, ItemSet, from_csld, read_item_csv,
                                        write_item_csv)
from sctc_assets.assets.partitions import CORPUS_SHARDS_PARTITION_NAME

PREFIX = "terms_t"
SET = ItemSet(name="t", regions=("cn", "tw", "hk", "mo"), concepts=(
    Concept("c1", {"cn": ("公交车",), "tw": ("公車",), "hk": ("巴士",), "mo": ("巴士",)},
            definition_zh_hans="一种公共交通工具"),
    Concept("c2", {"cn": ("摩托车",), "tw": ("機車",), "hk": ("電單車",), "mo": ("電單車", "摩托車")},
            definition_zh_hans="一种两轮机动车"),
    Concept("c3", {"cn": ("软件",), "tw": ("軟體",), "hk": ("軟件",), "mo": ()},
            definition_zh_hans="电脑程序"),
))
RECORDS = [
    "我坐公交车去上班，公交车很挤",   # c1 cn (twice: one record)
    "香港的巴士是雙層巴士",           # c1 hk and mo: one shared form
    "騎機車上班",                     # c2 tw as written
    "骑机车的人",                     # c2 tw only in Simplified: converted and either script, not as written
    "摩托車和電單車",                 # c2 hk, mo (both forms: one record), cn converted
    "下载软件",                       # c3 cn as written, hk converted
    "軟件與軟體",                     # c3 hk, tw as written, cn converted
    "",
    "公車站",                         # c1 tw
]
# (concept, region, form or None for the concept total) → records (as written, converted, either script)
EXPECTED = {
    ("c1", "cn", "公交车"): (1, 0, 1), ("c1", "cn", None): (1, 0, 1),
    ("c1", "tw", "公車"): (1, 0, 1), ("c1", "tw", None): (1, 0, 1),
    ("c1", "hk", "巴士"): (1, 1, 1), ("c1", "hk", None): (1, 1, 1),
    ("c1", "mo", "巴士"): (1, 1, 1), ("c1", "mo", None): (1, 1, 1),
    ("c2", "cn", "摩托车"): (0, 1, 1), ("c2", "cn", None): (0, 1, 1),
    ("c2", "tw", "機車"): (1, 1, 2), ("c2", "tw", None): (1, 1, 2),
    ("c2", "hk", "電單車"): (1, 0, 1), ("c2", "hk", None): (1, 0, 1),
    ("c2", "mo", "電單車"): (1, 0, 1), ("c2", "mo", "摩托車"): (1, 0, 1),
    ("c2", "mo", None): (1, 0, 1),  # both forms in one record: counted once, not 2
    ("c3", "cn", "软件"): (1, 1, 2), ("c3", "cn", None): (1, 1, 2),
    ("c3", "tw", "軟體"): (1, 0, 1), ("c3", "tw", None): (1, 0, 1),
    ("c3", "hk", "軟件"): (1, 1, 2), ("c3", "hk", None): (1, 1, 2),
}
# region → (n_concepts, mean_records, mean_records_any_script, concepts_without_records, … any script)
SUMMARY = {"cn": (3, 0.666667, 1.333333, 1, 0), "tw": (3, 1, 1.333333, 0, 0), "hk": (3, 1, 1.333333, 0, 0),
           "mo": (2, 1, 1, 0, 0)}
COUNTS = ["records_containing", "records_containing_converted", "records_containing_any_script"]
SUMMARY_COLUMNS = ["n_concepts", "mean_records", "mean_records_any_script", "concepts_without_records",
                   "concepts_without_records_any_script"]


def _by_key(table: pd.DataFrame, corpus: str) -> dict:
    rows = table[(table["corpus"] == corpus) & (table["level"] != REGION_LEVEL)]
    return {(row["concept_id"], row["region"], None if pd.isna(row["form"]) else row["form"]):
            tuple(int(row[column]) for column in COUNTS) for row in rows.to_dict("records")}


def _summary(table: pd.DataFrame, corpus: str) -> dict:
    rows = table[(table["corpus"] == corpus) & (table["level"] == REGION_LEVEL)]
    return {row["region"]: tuple(round(float(row[column]), 6) for column in SUMMARY_COLUMNS)
            for row in rows.to_dict("records")}


def _naive(texts: list[str], alternatives) -> int:
    return sum(any(pattern in text for pattern in alternatives) for text in texts)


def test_patterns_search_a_shared_form_once_in_both_scripts():
    patterns = item_set_patterns(SET)
    shared = patterns[(patterns["level"] == FORM_LEVEL) & (patterns["form"] == "巴士")]
    assert len(shared) == 3 and all(list(regions) == ["hk", "mo"] for regions in shared["regions"])
    by_key = patterns.set_index(["concept_id", "level", "form", "script"])["alternatives"]
    assert by_key["c2", FORM_LEVEL, "機車", "traditional"] == ["機車"]
    assert by_key["c2", FORM_LEVEL, "機車", "simplified"] == ["机车"]
    assert by_key["c2", FORM_LEVEL, "機車", "any"] == ["機車", "机车"]
    mo_total = patterns[(patterns["level"] == REGION_LEVEL) & (patterns["concept_id"] == "c2")
                        & patterns["regions"].map(lambda regions: list(regions) == ["mo"])]
    assert mo_total.set_index("script")["alternatives"].to_dict() == {
        "traditional": ["電單車", "摩托車"], "simplified": ["电单车", "摩托车"],
        "any": ["電單車", "电单车", "摩托車", "摩托车"]}
    assert not (patterns["regions"].map(lambda regions: "mo" in regions) & (patterns["concept_id"] == "c3")).any()
    assert patterns_digest(patterns) == patterns_digest(item_set_patterns(SET.frame()))


def _count_in_process(item_set, texts: list[str], corpus: str = "x") -> pd.DataFrame:
    patterns = item_set_patterns(item_set)
    entries = parse_corpora({"corpora": {corpus: {"script": "mixed", "files": ["none/*.jsonl"]}}}, source="test",
                            base_dir=Path("/nonexistent"))
    tally = count_texts(texts, FormMatcher(patterns["alternatives"].tolist()))
    key = entries[corpus].shard_keys()[0]
    fingerprint = count_fingerprints(patterns_digest(patterns), entries[corpus])[key]
    shards = shard_frame(corpus, key, 0, 1, fingerprint, tally.counts, tally.records, tally.bytes)
    table, _ = item_set_count_table(shards, patterns, entries, item_regions(item_set))
    return table


def test_counts_are_exact_without_dagster():
    table = _count_in_process(SET, RECORDS)
    assert _by_key(table, "x") == EXPECTED
    assert _summary(table, "x") == SUMMARY
    assert list(table.columns) == TABLE_COLUMNS


def test_default_set_concept_totals_equal_the_corpus_benchmarks_term_counts():
    """The two regions of the corpus benchmark's hand-built test: each region's total over its `/` alternatives
    equals `build_forms`' counts of the term (as written, converted, either script)."""
    from sctc_assets_tests.test_corpus_counting import RECORDS as TERM_RECORDS, TERMS

    item_set = ItemSet(name="sctc", regions=("cn", "tw"), concepts=tuple(
        Concept(str(row["term_id"]), {"cn": tuple(row["mainland_alternatives"]),
                                      "tw": tuple(row["taiwan_alternatives"])})
        for row in TERMS.to_dict("records")))
    table = _count_in_process(item_set, TERM_RECORDS)
    forms = build_forms(TERMS, pd.DataFrame(columns=["name", "region"]))
    tally = count_texts(TERM_RECORDS, FormMatcher(forms["alternatives"].tolist()))
    counted = forms.assign(n=tally.counts).set_index(["item_id", "region", "script"])["n"]
    concepts = table[table["level"] == "concept"].set_index(["concept_id", "region"])
    for term_id in TERMS["term_id"]:
        for region, name, converted in (("cn", "mainland", "traditional"), ("tw", "taiwan", "simplified")):
            written = "simplified" if region == "cn" else "traditional"
            assert tuple(concepts.loc[(str(term_id), region), COUNTS]) == (
                counted[term_id, name, written], counted[term_id, name, converted], counted[term_id, name, "any"])


def _write_jsonl(path: Path, texts: list[str]) -> None:
    import gzip

    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for text in texts:
            handle.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")


@pytest.fixture
def tiny_corpora(isolated_data_dir, tmp_path, monkeypatch):
    """`tiny`: two shards (one compressed file each), `other`: one shard of the same records."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    _write_jsonl(folder / "a.jsonl.gz", RECORDS[:4])   # shard 0
    _write_jsonl(folder / "b.jsonl.gz", RECORDS[4:])   # shard 1
    registry = tmp_path / "corpora.yaml"
    registry.write_text("corpora:\n"
                        "  tiny: {script: mixed, shards: 2, files: ['corpus/*.jsonl.gz']}\n"
                        "  other: {script: mixed, files: ['corpus/a.jsonl.gz']}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_CORPORA", str(registry))
    return registry


def _items_asset(frame: pd.DataFrame) -> dg.AssetsDefinition:
    @dg.asset(name=f"{PREFIX}_items", group_name=PREFIX)
    def items() -> pd.DataFrame:
        return frame

    return items


def _run(assets, instance, selection, partition_key=None) -> None:
    result = dg.materialize(assets, selection=selection, instance=instance, resources=shared_resources(),
                            partition_key=partition_key)
    assert result.success


def _read(name: str) -> pd.DataFrame:
    return pd.read_parquet(shared_resources()["io_manager"].path_for(dg.AssetKey(name)))


def _materialize(frame: pd.DataFrame, shards: list[str], instance) -> pd.DataFrame:
    assets = [_items_asset(frame), *item_set_corpus_assets(PREFIX, group=PREFIX)]
    instance.add_dynamic_partitions(CORPUS_SHARDS_PARTITION_NAME,
                                    ["tiny.000-of-002", "tiny.001-of-002", "other.000-of-001"])
    _run(assets, instance, [f"{PREFIX}_items"])
    for key in shards:
        _run(assets, instance, [f"{PREFIX}_corpus_counts"], partition_key=key)
    _run(assets, instance, [f"{PREFIX}_corpus_term_counts"])
    return _read(f"{PREFIX}_corpus_term_counts")


def test_the_factorys_assets():
    counts, totals = item_set_corpus_assets(PREFIX, group=PREFIX)
    assert counts.key == dg.AssetKey(f"{PREFIX}_corpus_counts") and totals.key == dg.AssetKey(
        f"{PREFIX}_corpus_term_counts")
    assert counts.partitions_def.name == CORPUS_SHARDS_PARTITION_NAME and totals.partitions_def is None
    assert {counts.group_names_by_key[counts.key], totals.group_names_by_key[totals.key]} == {PREFIX}
    assert set(counts.keys_by_input_name.values()) == {dg.AssetKey(f"{PREFIX}_items")}
    assert set(totals.keys_by_input_name.values()) == {dg.AssetKey(f"{PREFIX}_items"), counts.key}
    for assets_def in (counts, totals):
        spec = next(iter(assets_def.specs))
        assert spec.code_version == "1" and spec.description
        schema = spec.metadata["dagster/column_schema"]
        assert [column.name for column in schema.columns] == [
            column.name for column in {s.table: s for s in item_set_corpus_schemas(PREFIX)}[spec.key.path[-1]].columns]
        assert assets_def.required_resource_keys >= {"corpora"}


def test_counts_through_the_assets_are_exact_per_region_and_form(tiny_corpora, tmp_path):
    csv = write_item_csv(SET, tmp_path / "t.csv")  # through the documented file, as a registered set comes
    frame = read_item_csv(csv, name="t").frame()
    with dg.DagsterInstance.ephemeral() as instance:
        table = _materialize(frame, ["tiny.000-of-002", "tiny.001-of-002", "other.000-of-001"], instance)
    assert _by_key(table, "tiny") == EXPECTED
    assert _summary(table, "tiny") == SUMMARY
    tiny = table[table["corpus"] == "tiny"]
    assert tiny["complete"].all() and set(tiny["records_scanned"]) == {len(RECORDS)}
    assert not frame_problems(table, item_set_corpus_schemas(PREFIX)[1])
    # `other` holds the first four records: every count is the naive one over them
    patterns = item_set_patterns(SET)
    other = _by_key(table, "other")
    written = patterns[(patterns["level"] == FORM_LEVEL) & (patterns["script"] == "any")]
    for row in written.itertuples():
        for region in row.regions:
            assert other[(row.concept_id, region, row.form)][2] == _naive(RECORDS[:4], row.alternatives)
    shards = pd.concat(pd.read_parquet(path) for path in
                       Path(shared_resources()["io_manager"]._root(), f"{PREFIX}_corpus_counts").rglob("*.parquet"))
    assert not frame_problems(shards, item_set_corpus_schemas(PREFIX)[0])
    assert sorted(shards["shard"].unique()) == ["other.000-of-001", "tiny.000-of-002", "tiny.001-of-002"]


def test_an_uncounted_shard_leaves_the_corpus_incomplete(tiny_corpora):
    with dg.DagsterInstance.ephemeral() as instance:
        table = _materialize(SET.frame(), ["tiny.001-of-002"], instance)
    assert set(table["corpus"]) == {"tiny"}
    assert table[["shards_total", "shards_counted", "complete"]].drop_duplicates().values.tolist() == [[2, 1, False]]
    counted = _by_key(table, "tiny")
    assert counted[("c2", "tw", "機車")] == (0, 0, 0)  # R3, R4 are in the uncounted shard
    assert counted[("c2", "mo", None)] == (1, 0, 1)


def test_shards_counted_with_another_item_list_are_not_summed(tiny_corpora):
    with dg.DagsterInstance.ephemeral() as instance:
        _materialize(SET.frame(), ["tiny.000-of-002", "tiny.001-of-002"], instance)
        fewer = ItemSet(name="t", regions=SET.regions, concepts=SET.concepts[:2])
        assets = [_items_asset(fewer.frame()), *item_set_corpus_assets(PREFIX, group=PREFIX)]
        _run(assets, instance, [f"{PREFIX}_items"])
        _run(assets, instance, [f"{PREFIX}_corpus_term_counts"])
    assert _read(f"{PREFIX}_corpus_term_counts").empty  # the stored shards counted the three concepts


def test_csld_three_places_hong_kong_and_macau_forms(csld_location):
    """The csld list's Hong Kong and Macau forms that no Taiwan or Mainland form of their concept contains,
    counted in a synthetic corpus (built here at run time, nothing of the list is stored)."""
    item_set = from_csld(csld_location / CSLD_THREE_PLACES)
    assert {"hk", "mo"} <= set(item_set.regions)
    chosen = []
    for concept in item_set.concepts:
        others = concept.forms_of("tw") + concept.forms_of("cn")
        for region in ("hk", "mo"):
            for form in concept.forms_of(region):
                if len(form) >= 2 and not any(form in other or other in form for other in others):
                    chosen.append((concept.concept_id, region, form))
        if len({region for _, region, _ in chosen}) == 2 and len({form for _, _, form in chosen}) >= 6:
            break
    forms = list(dict.fromkeys(form for _, _, form in chosen))
    assert len(forms) >= 6
    texts = [f"甲{forms[0]}乙", f"{forms[1]}，{forms[1]}，{forms[2]}", "無關的一句話",
             f"{forms[3]}{forms[4]}", f"丙{forms[5]}", f"{forms[0]}丁"]
    table = _count_in_process(item_set, texts)
    counted = _by_key(table, "x")
    for concept_id, region, form in chosen:
        expected = _naive(texts, [form])
        assert expected >= (2 if form == forms[0] else 1 if form in forms[:6] else 0)  # the corpus holds it
        assert counted[(concept_id, region, form)][0] == expected
        total = _naive(texts, item_set.concept(concept_id).forms_of(region))
        assert counted[(concept_id, region, None)][0] == total
    hk = _summary(table, "x")["hk"]
    assert hk[0] == item_set.count_forms("hk")
