"""The prompting languages of each benchmark: the keys of its second partition dimension (no Dagster here, so the
command line can use them without loading the asset definitions)."""

TERM_LANGS = ("zh_hans", "zh_hant")
SOVEREIGNTY_LANGS = ("zh_hant", "zh_hans", "en")
NAME_LANGS = ("zh_hans", "zh_hant", "en")
