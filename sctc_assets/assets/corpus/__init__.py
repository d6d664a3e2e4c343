"""Corpus counts (SC-TC-Bench Sections 3.2.2, 4.3.2, A.9, B.3): corpus_shards, corpus_patterns → corpus_counts
(one partition per corpus shard) → corpus_term_counts, corpus_name_counts → corpus_term_frequency_tables."""

from sctc_assets.assets.corpus.counts import (corpus_counts, corpus_name_counts, corpus_patterns, corpus_shards,
                                              corpus_term_counts)
from sctc_assets.assets.corpus.tables import corpus_term_frequency_tables

CORPUS_ASSETS = [corpus_shards, corpus_patterns, corpus_counts, corpus_term_counts, corpus_name_counts,
                 corpus_term_frequency_tables]
