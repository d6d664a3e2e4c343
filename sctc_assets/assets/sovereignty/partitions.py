"""The benchmark's partitions: registered model × prompting language (zh_hant, zh_hans, en)."""

from sctc_assets.partitions import SOVEREIGNTY_LANGS, model_lang_partitions

sovereignty_partitions = model_lang_partitions(SOVEREIGNTY_LANGS)
