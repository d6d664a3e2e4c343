"""Corpus counts (SC-TC-Bench Sections 3.2.2, 4.3.2, A.9, B.3): corpus_shards, corpus_patterns → corpus_counts
(one partition per corpus shard) → corpus_term_counts, corpus_name_counts → corpus_term_frequency_tables.

The defs folder loader (`sctc_assets.definitions`) finds each asset and check in the module that defines it;
the benchmark's spec in `sctc_assets.benchmarks` lists its assets with their stages.
"""
