"""Columns of an item set's corpus count tables (`<prefix>_corpus_counts`, `<prefix>_corpus_term_counts`).

The tables exist once per registered item set, so their schemas are made per asset prefix and are not in the fixed
`TABLE_SCHEMAS`; `sctc_assets.assets.item_sets.corpus` attaches them to the assets it makes.
"""

from __future__ import annotations

from sctc_assets.lib.schemas.base import TableSchemaSpec, table
from sctc_assets.lib.schemas.corpus import C as CORPUS_COMMON

C = {
    **CORPUS_COMMON,
    "form_id": ("int", "The counted pattern's row in the item set's patterns (`lib/corpus/item_sets."
                       "item_set_patterns`, rebuilt from the set's items)."),
    "region": ("string", "Region code of the item set's `term_<region>` column (`cn`, `tw`, `hk` …); missing for "
                         "none."),
    "concept_id": ("string", "The concept's id in the item set; missing on `region` rows."),
}


def item_set_corpus_schemas(prefix: str) -> tuple[TableSchemaSpec, ...]:
    """The schemas of `<prefix>_corpus_counts` (one shard's counts) and `<prefix>_corpus_term_counts` (the
    totals per form, per concept and region, and per region)."""
    return (
        table(f"{prefix}_corpus_counts", [
            "corpus", "shard", "shard_index", "n_shards",
            ("fingerprint", "string", "What the shard's counts depend on (the set's patterns, registry settings, "
                                      "input): a shard counted under another fingerprint is counted again."),
            "form_id",
            ("records_containing", "int", "Records of the shard containing the pattern (once per record)."),
            ("records_scanned", "int", "Records read in the shard."),
            ("bytes_scanned", "int", "UTF-8 bytes read in the shard."),
        ], C),
        table(f"{prefix}_corpus_term_counts", [
            "corpus",
            ("level", "string", "`form` (one form of a concept in a region), `concept` (all the region's forms of "
                                "the concept together, each record once) or `region` (a summary over the region's "
                                "concepts)."),
            "concept_id", "region",
            ("form", "string", "The form as the item set writes it (`form` rows only). A form several regions of "
                               "the concept list is searched once and has a row for each."),
            ("records_containing", "int", "Records containing the form (`concept`: any of the region's forms) as "
                                          "written, in the region's script."),
            ("records_containing_converted", "int", "… converted to the other script (OpenCC script-only s2t/t2s)."),
            ("records_containing_any_script", "int", "… in either script."),
            ("n_concepts", "int", "`region` rows: concepts with at least one form in the region."),
            ("mean_records", "float", "`region` rows: mean over those concepts of `records_containing` of their "
                                      "`concept` row."),
            ("mean_records_any_script", "float", "`region` rows: the same for `records_containing_any_script`."),
            ("concepts_without_records", "int", "`region` rows: concepts none of whose forms, as written, is in "
                                                "any record."),
            ("concepts_without_records_any_script", "int", "`region` rows: the same in either script."),
            "shards_total", "shards_counted", "complete", "records_scanned", "bytes_scanned",
        ], C),
    )
