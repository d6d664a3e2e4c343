"""Corpus totals from shard counts: only shards counted with today's patterns, registry settings and input files
are summed, each once, so an interrupted or repeated backfill can neither lose nor double count."""

from __future__ import annotations

import hashlib
import json
from typing import Mapping

import pandas as pd

from sctc_assets.lib.corpus.corpus_registry import CorpusEntry
from sctc_assets.lib.corpus.sources import shard_inputs

SHARD_COLUMNS = ["corpus", "shard", "shard_index", "n_shards", "fingerprint", "form_id", "records_containing",
                 "records_scanned", "bytes_scanned"]
COVERAGE_COLUMNS = ["corpus", "shards_total", "shards_counted", "complete", "records_scanned", "bytes_scanned"]


def count_fingerprints(forms_digest: str, entry: CorpusEntry) -> dict[str, str]:
    """Per shard key, what its counts depend on: the patterns, the registry settings and the input it reads
    (local files' sizes and modification times; a hub source's settings and revision)."""
    settings = entry.fingerprint()
    return {key: f"{forms_digest}-{settings}-"
                 + hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]
            for key, inputs in zip(entry.shard_keys(), shard_inputs(entry))}


def shard_frame(corpus: str, shard: str, index: int, n_shards: int, fingerprint: str, counts: list[int],
                records: int, n_bytes: int) -> pd.DataFrame:
    return pd.DataFrame({
        "corpus": corpus, "shard": shard, "shard_index": index, "n_shards": n_shards, "fingerprint": fingerprint,
        "form_id": range(len(counts)), "records_containing": counts, "records_scanned": records,
        "bytes_scanned": n_bytes,
    }, columns=SHARD_COLUMNS)


def current_shards(shard_counts: pd.DataFrame, entries: Mapping[str, CorpusEntry], forms_digest: str) -> pd.DataFrame:
    """The shard rows that belong to the registry's present layout and were counted with the present patterns."""
    if shard_counts.empty:
        return pd.DataFrame(columns=SHARD_COLUMNS)
    expected = {(corpus, shard): fingerprint for corpus, entry in entries.items()
                for shard, fingerprint in count_fingerprints(forms_digest, entry).items()}
    keep = [expected.get((corpus, shard)) == fingerprint
            for corpus, shard, fingerprint in zip(shard_counts["corpus"], shard_counts["shard"],
                                                  shard_counts["fingerprint"])]
    return shard_counts[keep]


def coverage(current: pd.DataFrame, entries: Mapping[str, CorpusEntry]) -> pd.DataFrame:
    """Per registered corpus: shards counted out of its shard count, and records and bytes scanned so far."""
    per_shard = current.drop_duplicates("shard")
    rows = []
    for key, entry in entries.items():
        shards = per_shard[per_shard["corpus"] == key]
        rows.append({"corpus": key, "shards_total": entry.shards, "shards_counted": len(shards),
                     "complete": len(shards) == entry.shards, "records_scanned": int(shards["records_scanned"].sum()),
                     "bytes_scanned": int(shards["bytes_scanned"].sum())})
    return pd.DataFrame(rows, columns=COVERAGE_COLUMNS)


def form_totals(current: pd.DataFrame, forms: pd.DataFrame) -> pd.DataFrame:
    """Records containing each form, per corpus, joined to the form descriptions."""
    sums = current.groupby(["corpus", "form_id"], as_index=False)["records_containing"].sum()
    return sums.merge(forms.drop(columns=["alternatives"]), on="form_id", how="left")


def _wide(totals: pd.DataFrame, kind: str) -> pd.DataFrame:
    """One row per corpus × item × region with the count of each script's form (`simplified`, `traditional`,
    `any`) and `as_written`, the count in the script the item is written in."""
    selected = totals[totals["kind"] == kind]
    keys = ["corpus", "item_id", "item", "region"]
    wide = selected.pivot_table(index=keys, columns="script", values="records_containing", aggfunc="sum")
    wide.columns.name = None
    written = selected[selected["as_written"]].set_index(keys)["records_containing"].rename("as_written")
    return wide.join(written).reset_index()


def project_term_counts(totals: pd.DataFrame, covered: pd.DataFrame) -> pd.DataFrame:
    """Per corpus and term: `mainland`/`taiwan` (each form as written), the converted forms and either script."""
    wide = _wide(totals, "term").rename(columns={"item_id": "term_id"})
    mainland = wide[wide["region"] == "mainland"].rename(columns={
        "as_written": "mainland", "traditional": "mainland_traditional", "any": "mainland_any"})
    taiwan = wide[wide["region"] == "taiwan"].rename(columns={
        "as_written": "taiwan", "simplified": "taiwan_simplified", "any": "taiwan_any"})
    keys = ["corpus", "term_id"]
    rows = mainland[keys + ["mainland", "mainland_traditional", "mainland_any"]].merge(
        taiwan[keys + ["taiwan", "taiwan_simplified", "taiwan_any"]], on=keys)
    rows.insert(0, "count_source", "project")
    return rows.merge(covered, on="corpus", how="left")


def project_name_counts(totals: pd.DataFrame, covered: pd.DataFrame) -> pd.DataFrame:
    """Per corpus and name: `records_containing` (as written), `records_containing_converted` (the other
    script) and `records_containing_any_script`."""
    wide = _wide(totals, "name")
    converted = [traditional if region == "mainland" else simplified
                 for region, simplified, traditional in zip(wide["region"], wide["simplified"], wide["traditional"])]
    rows = pd.DataFrame({"count_source": "project", "corpus": wide["corpus"], "name": wide["item"],
                         "region": wide["region"], "records_containing": wide["as_written"],
                         "records_containing_converted": converted, "records_containing_any_script": wide["any"]})
    return rows.merge(covered, on="corpus", how="left")


def project_totals(shard_counts: pd.DataFrame, forms: pd.DataFrame, entries: Mapping[str, CorpusEntry],
                   forms_digest: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(form totals per corpus, coverage per registered corpus)."""
    current = current_shards(shard_counts, entries, forms_digest)
    return form_totals(current, forms), coverage(current, entries)
