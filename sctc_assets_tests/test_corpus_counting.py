"""Corpus counting without Dagster: forms, the one-pass matcher, sources and shards, the registry's errors."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sctc_assets.lib.corpus.forms import build_forms
from sctc_assets.lib.corpus.matcher import FormMatcher, count_texts
from sctc_assets.lib.corpus.corpus_registry import (CorpusRegistryError, load_corpora, parse_corpora, parse_shard_key,
                                             shard_key)
from sctc_assets.lib.corpus.sources import CorpusReadError, shard_texts
from sctc_assets.lib.corpus.totals import count_fingerprints, current_shards, shard_frame

TERMS = pd.DataFrame({
    "term_id": [0, 1, 2],
    "term_mainland": ["公交", "公交车站/公交站", "摩托车"],
    "term_taiwan": ["公車", "公車站", "機車"],
    "mainland_alternatives": [["公交"], ["公交车站", "公交站"], ["摩托车"]],
    "taiwan_alternatives": [["公車"], ["公車站"], ["機車"]],
})
NAMES = pd.DataFrame({"name": ["张伟", "陳冠宇"], "region": ["mainland", "taiwan"]})
RECORDS = [
    "我在公交车站等公交，公交很慢",          # the same term three times: one record
    "公車站旁有公車，公車站很大",            # 公車 also inside 公車站
    "骑摩托车的张伟和騎機車的陳冠宇",
    "公车站 and 机车 and 陈冠宇 and 張偉",   # every form converted to the other script
    "摩托車摩托車摩托車",
    "",
    "公交站公交車站",
]
# (kind, item_id, region) → records containing the form in (simplified, traditional, any script)
EXPECTED = {
    ("term", 0, "mainland"): (2, 2, 2), ("term", 0, "taiwan"): (1, 1, 2),
    ("term", 1, "mainland"): (2, 1, 2), ("term", 1, "taiwan"): (1, 1, 2),
    ("term", 2, "mainland"): (1, 1, 2), ("term", 2, "taiwan"): (1, 1, 2),
    ("name", 0, "mainland"): (1, 1, 2), ("name", 1, "taiwan"): (1, 1, 2),
}


def _counts(forms: pd.DataFrame, tally) -> dict:
    counted = forms.assign(n=tally.counts).set_index(["kind", "item_id", "region", "script"])["n"]
    return {key: tuple(int(counted[(*key, script)]) for script in ("simplified", "traditional", "any"))
            for key in EXPECTED}


def test_forms_in_both_scripts():
    forms = build_forms(TERMS, NAMES)
    assert len(forms) == 3 * 2 * 3 + 2 * 3
    by_key = forms.set_index(["kind", "item_id", "region", "script"])["alternatives"]
    assert list(by_key["term", 1, "mainland", "traditional"]) == ["公交車站", "公交站"]
    assert list(by_key["term", 1, "mainland", "any"]) == ["公交车站", "公交站", "公交車站"]
    assert list(by_key["term", 2, "taiwan", "simplified"]) == ["机车"]
    assert list(by_key["name", 0, "mainland", "traditional"]) == ["張偉"]
    written = forms[forms["as_written"]]
    assert set(zip(written["region"], written["script"])) == {("mainland", "simplified"), ("taiwan", "traditional")}


def test_counts_are_exact_on_a_hand_built_corpus():
    forms = build_forms(TERMS, NAMES)
    tally = count_texts(RECORDS, FormMatcher(forms["alternatives"].tolist()))
    assert _counts(forms, tally) == EXPECTED
    assert tally.records == len(RECORDS)
    assert tally.bytes == sum(len(text.encode()) for text in RECORDS)


def test_overlapping_and_nested_patterns_are_all_found():
    matcher = FormMatcher([["公交车"], ["车站"], ["公交车站"], ["交"], ["站台"]])
    assert matcher.forms_in("去公交车站") == {0, 1, 2, 3}


def test_text_with_lone_surrogates_is_still_searched():
    tally = count_texts(["x\ud800公交a", "公交"], FormMatcher([["公交"], ["a"], ["x?公"]]))
    assert tally.counts == [2, 1, 0]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.text("abc", min_size=1, max_size=4), min_size=1, max_size=3), min_size=1, max_size=8),
       st.lists(st.text("abcd", max_size=30), max_size=10))
def test_matcher_agrees_with_a_per_pattern_scan(forms, texts):
    tally = count_texts(texts, FormMatcher(forms))
    assert tally.counts == [sum(any(p in text for p in form) for text in texts) for form in forms]


def _write_jsonl(path: Path, texts: list[str], opener=open) -> None:
    with opener(path, "wt", encoding="utf-8") as handle:
        for number, text in enumerate(texts):
            handle.write(json.dumps({"id": number, "text": text, "meta": {"title": f"t{number}"}},
                                    ensure_ascii=False) + "\n")


def _entry(tmp_path: Path, source: dict, shards: int = 1, **settings_) -> object:
    document = {"corpora": {"c": {"script": "mixed", "shards": shards, **source, **settings_}}}
    return parse_corpora(document, source="test.yaml", base_dir=tmp_path)["c"]


TEXTS = [f"记录{number}：" + "文字" * (number % 7) + ("公交" if number % 3 == 0 else "") for number in range(103)]


@pytest.mark.parametrize("shards", [1, 2, 3, 5, 8])
def test_every_record_lands_in_exactly_one_shard(tmp_path, shards):
    _write_jsonl(tmp_path / "a.jsonl", TEXTS[:60])
    _write_jsonl(tmp_path / "b.jsonl.gz", TEXTS[60:80], opener=gzip.open)
    (tmp_path / "c.txt").write_text("\n".join(TEXTS[80:95]) + "\n\n", encoding="utf-8")
    table = pa.table({"text": TEXTS[95:], "other": list(range(8))})
    pq.write_table(table, tmp_path / "d.parquet", row_group_size=3)
    entry = _entry(tmp_path, {"files": ["*.jsonl", "*.jsonl.gz", "*.txt", "d.parquet"]}, shards=shards)
    seen = [text for index in range(shards) for text in shard_texts(entry, index)]
    assert sorted(seen) == sorted(TEXTS)


def test_limit_is_shared_between_shards(tmp_path):
    _write_jsonl(tmp_path / "a.jsonl", TEXTS)
    entry = _entry(tmp_path, {"files": "a.jsonl"}, shards=4, limit=10)
    taken = [len(list(shard_texts(entry, index))) for index in range(4)]
    assert taken == [3, 3, 2, 2]


def test_text_fields_and_nested_values(tmp_path):
    _write_jsonl(tmp_path / "a.jsonl", ["正文"])
    both = _entry(tmp_path, {"files": "a.jsonl"}, text_fields=["text", "meta"])
    assert list(shard_texts(both, 0)) == ["正文\nt0"]
    everything = _entry(tmp_path, {"files": "a.jsonl"}, text_fields="*")
    assert list(shard_texts(everything, 0)) == ["正文\nt0"]  # numbers are not text


def test_bad_input_names_file_record_and_field(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "好"}\n{"text": broken}\n', encoding="utf-8")
    with pytest.raises(CorpusReadError, match=r"a\.jsonl: record at byte 16: not valid JSON"):
        list(shard_texts(_entry(tmp_path, {"files": "a.jsonl"}), 0))
    path.write_text('{"body": "好"}\n', encoding="utf-8")
    with pytest.raises(CorpusReadError, match=r"a\.jsonl: record at byte 0: no field 'text'.*body"):
        list(shard_texts(_entry(tmp_path, {"files": "a.jsonl"}), 0))
    with pytest.raises(CorpusReadError, match=r"corpus 'c': no file matches 'missing/\*\.jsonl'"):
        list(shard_texts(_entry(tmp_path, {"files": "missing/*.jsonl"}), 0))
    (tmp_path / "x.csv").write_text("text\n好\n", encoding="utf-8")
    with pytest.raises(CorpusReadError, match=r"x\.csv: cannot tell the format"):
        list(shard_texts(_entry(tmp_path, {"files": "x.csv"}), 0))


def test_datasets_streaming_source_counts_like_the_files(tmp_path, monkeypatch):
    """The hub path (`datasets.load_dataset(..., streaming=True)`) on a dataset built here: the `json` builder
    over local files, split by file shards (3 shards, 3 files) or record by record (4 shards)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    for part, chunk in enumerate((TEXTS[:40], TEXTS[40:41], TEXTS[41:])):
        _write_jsonl(tmp_path / f"part{part}.jsonl", chunk)
    files = [f"part{part}.jsonl" for part in range(3)]
    matcher = FormMatcher([["公交"], ["记录1"]])
    expected = count_texts(TEXTS, matcher).counts
    for shards in (3, 4):
        entry = _entry(tmp_path, {"hub": {"path": "json", "data_files": files}}, shards=shards)
        seen = [list(shard_texts(entry, index)) for index in range(shards)]
        assert sorted(text for texts in seen for text in texts) == sorted(TEXTS)
        assert [sum(c) for c in zip(*(count_texts(texts, matcher).counts for texts in seen))] == expected
    broken = _entry(tmp_path, {"hub": {"path": "json", "data_files": ["nothing-here-*.jsonl"]}})
    with pytest.raises(CorpusReadError, match=r"corpus 'c' \(json, split train\): cannot open the stream"):
        list(shard_texts(broken, 0))


def test_changed_input_files_make_the_shards_that_read_them_stale(tmp_path):
    _write_jsonl(tmp_path / "a.jsonl", TEXTS[:60])
    _write_jsonl(tmp_path / "b.jsonl.gz", TEXTS[60:80], opener=gzip.open)  # unit 0 → shard 0
    _write_jsonl(tmp_path / "c.jsonl.gz", TEXTS[80:], opener=gzip.open)    # unit 1 → shard 1
    entry = _entry(tmp_path, {"files": ["*.jsonl", "*.jsonl.gz"]}, shards=3)

    def fingerprints() -> list[str]:
        return list(count_fingerprints("forms", entry).values())

    def counted(prints: list[str]) -> pd.DataFrame:
        return pd.concat(shard_frame("c", key, index, 3, fingerprint, [1], 1, 1)
                         for index, (key, fingerprint) in enumerate(zip(entry.shard_keys(), prints)))

    before = fingerprints()
    assert fingerprints() == before and len(set(before)) == 3
    with open(tmp_path / "a.jsonl", "a", encoding="utf-8") as handle:  # every shard reads a byte range of it
        handle.write(json.dumps({"text": "新增"}, ensure_ascii=False) + "\n")
    appended = fingerprints()
    assert all(old != new for old, new in zip(before, appended))
    assert current_shards(counted(before), {"c": entry}, "forms").empty
    _write_jsonl(tmp_path / "c.jsonl.gz", TEXTS[79:], opener=gzip.open)  # only shard 1 reads it
    rewritten = fingerprints()
    assert [old == new for old, new in zip(appended, rewritten)] == [True, False, True]
    assert current_shards(counted(appended), {"c": entry}, "forms")["shard"].tolist() == [entry.shard_keys()[i]
                                                                                         for i in (0, 2)]
    stat = (tmp_path / "b.jsonl.gz").stat()
    os.utime(tmp_path / "b.jsonl.gz", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # same size, touched
    assert [old == new for old, new in zip(rewritten, fingerprints())] == [False, True, True]
    (tmp_path / "a.jsonl").unlink()  # a file gone at totals time: stale, not an error
    assert all(old != new for old, new in zip(rewritten, fingerprints()))


def test_a_hub_source_is_known_by_its_settings_and_revision(tmp_path):
    hub = {"path": "user/corpus", "name": "zh", "split": "train"}
    unpinned = count_fingerprints("forms", _entry(tmp_path, {"hub": hub}))
    assert unpinned == count_fingerprints("forms", _entry(tmp_path, {"hub": hub}))  # no way to see hub updates
    pinned = count_fingerprints("forms", _entry(tmp_path, {"hub": {**hub, "revision": "abc123"}}))
    moved = count_fingerprints("forms", _entry(tmp_path, {"hub": {**hub, "revision": "def456"}}))
    assert len({*unpinned.values(), *pinned.values(), *moved.values()}) == 3


def test_registry_errors_name_the_file_and_the_corpus(tmp_path):
    path = tmp_path / "corpora.yaml"
    cases = {
        "corpora: {Bad.Key: {script: mixed, files: a}}": "corpus 'Bad.Key': keys use",
        "corpora: {c: {script: cyrillic, files: a}}": "corpus 'c': `script` must be one of",
        "corpora: {c: {script: mixed, files: a, shards: 0}}": "corpus 'c': `shards` must be a positive integer",
        "corpora: {c: {script: mixed}}": "corpus 'c': give exactly one of `hub`",
        "corpora: {c: {script: mixed, files: a, hub: {path: x}}}": "corpus 'c': give exactly one of",
        "corpora: {c: {script: mixed, hub: {split: train}}}": "corpus 'c': `hub` needs at least a `path`",
        "corpora: {c: {script: mixed, files: a, limt: 3}}": "corpus 'c': unknown setting",
        "models: {}": "expected a top-level `corpora:` mapping",
        "corpora: [": "invalid YAML",
    }
    for text, message in cases.items():
        path.write_text(text, encoding="utf-8")
        with pytest.raises(CorpusRegistryError, match=f"{path}.*{message}".replace("(", r"\(").replace("`", ".")):
            load_corpora(path)


def test_shard_keys_round_trip():
    assert shard_key("tw-wiki", 3, 8) == "tw-wiki.003-of-008"
    assert parse_shard_key("c4.0999-of-1024") == ("c4", 999, 1024)
    for bad in ("c4.8-of-8", "c4", "C4.1-of-2"):
        with pytest.raises(CorpusRegistryError):
            parse_shard_key(bad)


def test_the_shipped_registry_lists_the_papers_nine_corpora():
    entries = load_corpora(Path(__file__).resolve().parents[1] / "data" / "corpora.yaml")
    assert list(entries) == ["baidu-baike", "map-cc", "mcc4", "tw-wiki", "cctw", "ootc", "twc4", "twchat", "c4"]
    assert all(entry.paper and entry.reported_records for entry in entries.values())
    assert [entries[key].script for key in ("baidu-baike", "tw-wiki", "c4")] == ["simplified", "traditional", "mixed"]
