"""The term benchmark on any item set (`sctc_assets.lib.term.items`): asset factories that, for each registered item
set named S, make the assets of group `terms_S` (`terms_S_items` → prompts, responses, labels …, and the corpus
counts of the set's forms per region, `corpus.item_set_corpus_assets`).

The modules hold factories, not module-level assets: the defs folder loader finds nothing here until the assets a
factory returns are listed in a module's definitions.
"""
