"""Corpus counts: the shard inventory, the patterns, the per-shard counts and their totals per corpus."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.corpus.forms import build_forms, forms_digest
from sctc_assets.lib.corpus.matcher import FormMatcher, Tally, count_texts
from sctc_assets.lib.corpus.corpus_registry import CorpusRegistryError, parse_shard_key, unregistered_shard_keys
from sctc_assets.lib.corpus.sources import shard_texts
from sctc_assets.lib.corpus.tables import upstream_name_counts, upstream_term_counts
from sctc_assets.lib.corpus.totals import (count_fingerprints, project_name_counts, project_term_counts,
                                           project_totals, shard_frame)
from sctc_assets.lib.name.names import NAME_COLUMNS, NAMES_FILE, parse_names
from sctc_assets.assets.partitions import CORPUS_SHARDS_PARTITION_NAME, corpus_shard_partitions
from sctc_assets.resources.corpora import CorpusRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "corpus"


def _mb(n_bytes: int) -> float:
    return n_bytes / 1e6


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def corpus_shards(context: dg.AssetExecutionContext, corpora: CorpusRegistryResource) -> dg.Output[pd.DataFrame]:
    """Every shard of every registered corpus; registers the `corpus_shards` partitions that `corpus_counts`
    lacks (the `corpus_registry_sensor` does the same in a running deployment). Re-materialize after editing the
    corpus registry."""
    entries = corpora.entries()
    rows = [{"corpus": entry.key, "shard": key, "shard_index": index, "n_shards": entry.shards,
             "script": entry.script, "limit": entry.limit, "source": repr(entry.source)}
            for entry in entries.values() for index, key in enumerate(entry.shard_keys())]
    shards = pd.DataFrame(rows, columns=["corpus", "shard", "shard_index", "n_shards", "script", "limit", "source"])
    new = unregistered_shard_keys(entries, set(context.instance.get_dynamic_partitions(CORPUS_SHARDS_PARTITION_NAME)))
    if new:
        context.instance.add_dynamic_partitions(CORPUS_SHARDS_PARTITION_NAME, new)
    return dg.Output(shards, data_version=content_version(shards),
                     metadata=table_metadata(shards, registry=corpora.path(), partitions_added=len(new)))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def corpus_patterns(regional_terms: pd.DataFrame, upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """What is counted: each term's Mainland and Taiwanese forms and each name, as written, converted to the other
    script (OpenCC s2t/t2s) and in either script; a form's `alternatives` are the strings any of which counts."""
    source = upstream.open()
    names = parse_names(source.read_csv(NAMES_FILE, NAME_COLUMNS), source_name=NAMES_FILE)
    forms = build_forms(regional_terms, names)
    patterns = {pattern for alternatives in forms["alternatives"] for pattern in alternatives}
    return dg.Output(forms, data_version=content_version(forms), metadata=table_metadata(
        forms, forms_digest=forms_digest(forms), distinct_patterns=len(patterns),
        forms_by_kind=dg.MetadataValue.json(forms["kind"].value_counts().to_dict())))


# Dagster's default backfill policy runs each partition on its own, so shards spread over run workers.
@catalogued
@dg.asset(partitions_def=corpus_shard_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def corpus_counts(context: dg.AssetExecutionContext, corpus_patterns: pd.DataFrame,
                  corpora: CorpusRegistryResource) -> dg.Output[pd.DataFrame]:
    """One shard of one corpus: for every form, the number of records containing it (once per record), plus the
    records and UTF-8 bytes scanned. One Aho-Corasick pass per record finds every form at once. A shard is
    written whole or not at all, so a failed or repeated shard never loses or doubles a count."""
    corpus, index, n_shards = parse_shard_key(context.partition_key)
    entry = corpora.entry(corpus)
    if entry.shards != n_shards:
        raise CorpusRegistryError(f"{corpora.path()}: corpus {corpus!r} now has {entry.shards} shards; partition "
                                  f"{context.partition_key} belongs to an earlier layout (materialize its new shards)")
    # Taken before reading: a file changed during the count leaves this shard stale rather than mixed.
    fingerprint = count_fingerprints(forms_digest(corpus_patterns), entry)[context.partition_key]
    matcher = FormMatcher([list(alternatives) for alternatives in corpus_patterns["alternatives"]])

    def progress(tally: Tally) -> None:
        context.log.info(f"{context.partition_key}: {tally.records} records, {_mb(tally.bytes):.1f} MB, "
                         f"{_mb(tally.bytes) / tally.seconds:.1f} MB/s")

    tally = count_texts(shard_texts(entry, index), matcher, progress=progress)
    counts = shard_frame(corpus, context.partition_key, index, n_shards, fingerprint, tally.counts, tally.records,
                         tally.bytes)
    found = corpus_patterns.assign(records_containing=tally.counts).nlargest(10, "records_containing")
    return dg.Output(counts, data_version=content_version(counts), metadata=table_metadata(
        counts, records_scanned=tally.records, bytes_scanned=tally.bytes, seconds=round(tally.seconds, 2),
        mb_per_second=round(_mb(tally.bytes) / tally.seconds, 2) if tally.seconds else 0.0,
        patterns=matcher.n_patterns,
        most_frequent=dg.MetadataValue.md(found[["item", "region", "script", "records_containing"]]
                                          .to_markdown(index=False))))


def _totals(corpus_counts: pd.DataFrame, corpus_patterns: pd.DataFrame, corpora: CorpusRegistryResource):
    return project_totals(corpus_counts, corpus_patterns, corpora.entries(), forms_digest(corpus_patterns))


def _side_by_side(project: pd.DataFrame, published: pd.DataFrame, covered: pd.DataFrame, missing: list[str],
                  upstream: SCTCUpstreamResource) -> tuple[pd.DataFrame, dict]:
    frames = [frame for frame in (project, published) if not frame.empty]
    counts = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return counts, {
        "coverage": dg.MetadataValue.md(covered.to_markdown(index=False) if not covered.empty else "_(none)_"),
        "upstream_files_missing": dg.MetadataValue.json(missing), **upstream.provenance()}


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def corpus_term_counts(corpus_counts: pd.DataFrame, corpus_patterns: pd.DataFrame, regional_terms: pd.DataFrame,
                       corpora: CorpusRegistryResource, upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Per corpus and term, the records containing the Mainland term (`mainland`, Simplified as written) and the
    Taiwanese term (`taiwan`, Traditional as written), also converted and in either script: the project's counts
    (summed over the shards counted with today's patterns and registry settings; `complete` once every shard is)
    and, as `count_source = upstream`, the authors' published counts for the paper's nine corpora."""
    totals, covered = _totals(corpus_counts, corpus_patterns, corpora)
    project = project_term_counts(totals, covered) if not totals.empty else pd.DataFrame()
    published, missing = upstream_term_counts(upstream.open(), regional_terms)
    counts, extra = _side_by_side(project, published, covered, missing, upstream)
    names = regional_terms.set_index("term_id")[["term_mainland", "term_taiwan"]]
    counts = counts.join(names, on="term_id") if not counts.empty else counts
    return dg.Output(counts, data_version=content_version(counts), metadata=table_metadata(counts, **extra))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def corpus_name_counts(corpus_counts: pd.DataFrame, corpus_patterns: pd.DataFrame, corpora: CorpusRegistryResource,
                       upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Per corpus and name: `name, region, corpus, records_containing` (the name as written), the converted name
    and either script, for the project's counts (`count_source = project`, `complete` once every shard is
    counted) and the authors' c4 counts (`count_source = upstream`), which the name benchmark's popularity
    correlation (Table 22) uses when the project has not counted c4."""
    totals, covered = _totals(corpus_counts, corpus_patterns, corpora)
    project = project_name_counts(totals, covered) if not totals.empty else pd.DataFrame()
    source = upstream.open()
    names = parse_names(source.read_csv(NAMES_FILE, NAME_COLUMNS), source_name=NAMES_FILE)
    published, missing = upstream_name_counts(source, names)
    counts, extra = _side_by_side(project, published, covered, missing, upstream)
    return dg.Output(counts, data_version=content_version(counts), metadata=table_metadata(counts, **extra))
