"""Corpus counts of an item set's forms per region: a factory making, for one item set's asset prefix, the per-shard
counts (partitioned by the corpus benchmark's `corpus_shards`) and their totals.

`item_set_corpus_assets("terms_S", group="terms_S")` returns
- `terms_S_corpus_counts`: one partition per corpus shard, reading `terms_S_items` (`ItemSet.frame()`), counting
  every form of every region (as written, converted, either script; `lib/corpus/item_sets.py`) in one pass per
  record, as `corpus_counts` does for the default 110 terms;
- `terms_S_corpus_term_counts`: unpartitioned, reading every counted shard of `terms_S_corpus_counts` (shards never
  counted are skipped by the IO manager) and `terms_S_items`: one table of the records per corpus × concept × region
  × form, per corpus × concept × region (any of the region's forms, each record once) and per corpus × region.

Both need the `corpora` resource (the corpus registry) and the IO manager. They are made per item set, so they carry
no catalog entry (`@catalogued`): the description, code version and column schema are set here.
"""

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import OWNERS, column_schema, content_version
from sctc_assets.assets.metadata import markdown_table, table_metadata
from sctc_assets.benchmarks.spec import CROSS_MODEL, INPUTS
from sctc_assets.lib.corpus.corpus_registry import CorpusRegistryError, parse_shard_key
from sctc_assets.lib.corpus.item_sets import (distinct_strings, item_regions, item_set_count_table,
                                              item_set_patterns, most_frequent, patterns_digest, region_summary)
from sctc_assets.lib.corpus.matcher import FormMatcher, Tally, count_texts
from sctc_assets.lib.corpus.sources import shard_texts
from sctc_assets.lib.corpus.totals import count_fingerprints, shard_frame
from sctc_assets.lib.schemas.item_set_corpus import item_set_corpus_schemas
from sctc_assets.assets.partitions import corpus_shard_partitions
from sctc_assets.resources.corpora import CorpusRegistryResource

CODE_VERSION = "1"  # bump when a change here or in lib/corpus/item_sets.py can change what the assets write


def _mb(n_bytes: int) -> float:
    return n_bytes / 1e6


def _tags(stage: str) -> dict[str, str]:
    return {"sctc/stage": stage, "sctc/calls_models": "false"}


def item_set_corpus_assets(prefix: str, group: str) -> list[dg.AssetsDefinition]:
    """`<prefix>_corpus_counts` (partitioned by corpus shard) and `<prefix>_corpus_term_counts`, both in `group`,
    reading the item table `<prefix>_items`."""
    items_key = dg.AssetKey(f"{prefix}_items")
    counts_name, totals_name = f"{prefix}_corpus_counts", f"{prefix}_corpus_term_counts"
    schemas = {spec.table: spec for spec in item_set_corpus_schemas(prefix)}

    @dg.asset(
        name=counts_name, group_name=group, partitions_def=corpus_shard_partitions, kinds={"pandas", "parquet"},
        ins={"items": dg.AssetIn(key=items_key)}, code_version=CODE_VERSION, owners=list(OWNERS), tags=_tags(INPUTS),
        metadata={"dagster/column_schema": column_schema(schemas[counts_name])},
        description=f"Records of one corpus shard containing each form of the item set `{items_key.to_user_string()}`"
                    " per region.\n\nFor every pattern (a form as written, converted to the other script and in "
                    "either script; all of a region's forms of a concept together), the number of records of the "
                    "shard containing it (once per record), plus the records and UTF-8 bytes scanned. One "
                    "Aho-Corasick pass per record finds every pattern at once. A shard is written whole or not at "
                    "all, so a failed or repeated shard never loses or doubles a count.")
    def shard_counts(context: dg.AssetExecutionContext, items: pd.DataFrame,
                     corpora: CorpusRegistryResource) -> dg.Output[pd.DataFrame]:
        corpus, index, n_shards = parse_shard_key(context.partition_key)
        entry = corpora.entry(corpus)
        if entry.shards != n_shards:
            raise CorpusRegistryError(f"{corpora.path()}: corpus {corpus!r} now has {entry.shards} shards; partition "
                                      f"{context.partition_key} belongs to an earlier layout (materialize its new "
                                      "shards)")
        patterns = item_set_patterns(items)
        digest = patterns_digest(patterns)
        # Taken before reading: a file changed during the count leaves this shard stale rather than mixed.
        fingerprint = count_fingerprints(digest, entry)[context.partition_key]
        matcher = FormMatcher([list(alternatives) for alternatives in patterns["alternatives"]])

        def progress(tally: Tally) -> None:
            context.log.info(f"{context.partition_key}: {tally.records} records, {_mb(tally.bytes):.1f} MB, "
                             f"{_mb(tally.bytes) / tally.seconds:.1f} MB/s")

        tally = count_texts(shard_texts(entry, index), matcher, progress=progress)
        counts = shard_frame(corpus, context.partition_key, index, n_shards, fingerprint, tally.counts,
                             tally.records, tally.bytes)
        return dg.Output(counts, data_version=content_version(counts), metadata=table_metadata(
            counts, records_scanned=tally.records, bytes_scanned=tally.bytes, seconds=round(tally.seconds, 2),
            mb_per_second=round(_mb(tally.bytes) / tally.seconds, 2) if tally.seconds else 0.0,
            patterns=matcher.n_patterns, pattern_rows=len(patterns), patterns_digest=digest,
            most_frequent=dg.MetadataValue.md(markdown_table(most_frequent(patterns, tally.counts)))))

    @dg.asset(
        name=totals_name, group_name=group, kinds={"pandas", "parquet"},
        ins={"items": dg.AssetIn(key=items_key), "shard_counts": dg.AssetIn(key=dg.AssetKey(counts_name))},
        code_version=CODE_VERSION, owners=list(OWNERS), tags=_tags(CROSS_MODEL),
        metadata={"dagster/column_schema": column_schema(schemas[totals_name])},
        description=f"Records containing the forms of the item set `{items_key.to_user_string()}`, per corpus, "
                    "concept, region and form.\n\nSums the shards of `" + counts_name + "` counted with today's "
                    "patterns and registry settings (`complete` once every shard of the corpus is); shards never "
                    "counted or counted under an earlier layout or item list are left out. `level = form`: one "
                    "form (a form several regions list is credited to each); `level = concept`: any of the "
                    "region's forms, each record once (exact, from the per-record matches); `level = region`: "
                    "concepts with a form in the region, mean records per concept and concepts without records.")
    def term_counts(items: pd.DataFrame, shard_counts: pd.DataFrame,
                    corpora: CorpusRegistryResource) -> dg.Output[pd.DataFrame]:
        patterns = item_set_patterns(items)
        table, covered = item_set_count_table(shard_counts, patterns, corpora.entries(), item_regions(items))
        summary = region_summary(table)
        return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
            table, patterns_digest=patterns_digest(patterns), distinct_patterns=distinct_strings(patterns),
            coverage=dg.MetadataValue.md(covered.to_markdown(index=False) if not covered.empty else "_(none)_"),
            regions=dg.MetadataValue.md(markdown_table(summary, rows=50))))

    return [shard_counts, term_counts]
