"""The benchmark's partitions: registered model × prompting language (Traditional, Simplified, English)."""

from sctc_assets.partitions import SOVEREIGNTY_LANGS, model_lang_partitions

sovereignty_partitions = model_lang_partitions(SOVEREIGNTY_LANGS)
