"""Partitions shared by every benchmark: a dynamic `model` dimension filled from the registry, crossed with the
benchmark's own static `lang` dimension. Per-model assets use the `model` dimension alone, so Dagster maps the
two-dimensional partitions onto them and re-running one model touches only that model's partitions.
"""

from __future__ import annotations

import dagster as dg

MODELS_PARTITION_NAME = "models"
models_partitions = dg.DynamicPartitionsDefinition(name=MODELS_PARTITION_NAME)

TERM_LANGS = ("zh_hans", "zh_hant")


def model_lang_partitions(langs: tuple[str, ...]) -> dg.MultiPartitionsDefinition:
    return dg.MultiPartitionsDefinition(
        {"model": models_partitions, "lang": dg.StaticPartitionsDefinition(list(langs))}
    )


term_partitions = model_lang_partitions(TERM_LANGS)


def model_and_lang(context: dg.AssetExecutionContext) -> tuple[str, str]:
    keys = context.partition_key.keys_by_dimension  # type: ignore[union-attr]
    return keys["model"], keys["lang"]
