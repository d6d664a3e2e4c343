"""Columns of the corpus count tables."""

from __future__ import annotations

from sctc_assets.lib.schemas.base import table
from sctc_assets.lib.schemas.common import COMMON

C = {
    **COMMON,
    "corpus": ("string", "Key of the corpus in the corpus registry."),
    "shard": ("string", "The shard's partition key, `<corpus>.<index>-of-<shards>`."),
    "shard_index": ("int", "The shard's index, from 0."),
    "n_shards": ("int", "Shards the corpus is split into."),
    "form_id": ("int", "The counted form's row in `corpus_patterns`."),
    "region": ("string", "`mainland` or `taiwan`."),
    "count_source": ("string", "`project` (our counts over the shards counted) or `upstream` (the authors' "
                               "published counts)."),
    "term_id": ("int", "The term's index in the SC-TC-Bench term list."),
    "term_mainland": ("string", "The Mainland term as published."),
    "term_taiwan": ("string", "The Taiwanese term as published."),
    "shards_total": ("int", "Shards of the corpus in the registry's present layout."),
    "shards_counted": ("int", "Of them, shards counted with today's patterns and settings."),
    "complete": ("bool", "Whether every shard is counted."),
    "records_scanned": ("int", "Records read in the counted shards."),
    "bytes_scanned": ("int", "UTF-8 bytes read in the counted shards."),
}

TABLES = [
    table("corpus_shards", [
        "corpus", "shard", "shard_index", "n_shards",
        ("script", "string", "The corpus' script: `simplified`, `traditional` or `mixed`."),
        ("limit", "int", "At most this many records over all shards (missing: every record)."),
        ("source", "string", "Where the corpus is read from (hub dataset or files)."),
    ], C),
    table("corpus_patterns", [
        "form_id",
        ("kind", "string", "`term` or `name`."),
        ("item_id", "int", "The term's id or the name's row."),
        ("item", "string", "The term or name as written."),
        "region",
        ("script", "string", "`simplified`, `traditional` or `any` (either script)."),
        ("as_written", "bool", "Whether the form is the item as written (not converted)."),
        ("alternatives", "list<string>", "The strings any of which counts as the form."),
    ], C),
    table("corpus_counts", [
        "corpus", "shard", "shard_index", "n_shards",
        ("fingerprint", "string", "What the shard's counts depend on (patterns, registry settings, input): a shard "
                                  "counted under another fingerprint is counted again."),
        "form_id",
        ("records_containing", "int", "Records of the shard containing the form (once per record)."),
        ("records_scanned", "int", "Records read in the shard."),
        ("bytes_scanned", "int", "UTF-8 bytes read in the shard."),
    ], C),
    table("corpus_term_counts", [
        "count_source", "corpus", "term_id",
        ("mainland", "int", "Records containing the Mainland term (Simplified, as written)."),
        ("mainland_traditional", "int", "Records containing it converted to Traditional."),
        ("mainland_any", "int", "Records containing it in either script."),
        ("taiwan", "int", "Records containing the Taiwanese term (Traditional, as written)."),
        ("taiwan_simplified", "int", "Records containing it converted to Simplified."),
        ("taiwan_any", "int", "Records containing it in either script."),
        "shards_total", "shards_counted", "complete", "records_scanned", "bytes_scanned",
        "term_mainland", "term_taiwan",
    ], C),
    table("corpus_name_counts", [
        "count_source", "corpus",
        ("name", "string", "The name as written."),
        "region",
        ("records_containing", "int", "Records containing the name as written."),
        ("records_containing_converted", "int", "Records containing it converted to the other script."),
        ("records_containing_any_script", "int", "Records containing it in either script."),
        "shards_total", "shards_counted", "complete", "records_scanned", "bytes_scanned",
    ], C),
    table("corpus_term_frequency_tables", [
        ("table", "string", "The paper's table: `11`, `13` or `18`."),
        "count_source",
        ("misaligned_from", "string", "Table 18's misaligned terms: `paper` (its fixed list of 29) or `project` "
                                      "(this project's models); empty for Tables 11 and 13."),
        ("term_set", "string", "Which terms the row averages (`all`, `misaligned`, `other`, `both_forms` …)."),
        "corpus",
        ("n_terms", "int", "Terms averaged."),
        ("mainland_mean", "float", "Mean records containing the Mainland form."),
        ("mainland_sd", "float", "Their SD."),
        ("taiwan_mean", "float", "Mean records containing the Taiwanese form."),
        ("taiwan_sd", "float", "Their SD."),
        ("ratio", "float", "`mainland_mean / taiwan_mean` (the Simplified/Traditional ratio of means)."),
    ], C),
]
