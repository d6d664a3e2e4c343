"""The translation control through a model (`sctc run --reviews-translator KEY`): the translations (one call per
paired review, by the translator), the model under test's ratings of them (model × format) and Table 3 with both
controls (per model). Generation and rating are separate assets; the control table never calls a model."""

import os
from dataclasses import replace
from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.automation import SERVED_MODEL_KEY
from sctc_assets.assets.catalog import GENERATION_POOL, catalogued, content_version
from sctc_assets.assets.metadata import generation_metadata, table_metadata
from sctc_assets.assets.reviews.source import VARIETIES_FILE_FIELD
from sctc_assets.benchmarks.reviews import REVIEWS, answers_new_prompts
from sctc_assets.lib.frames import empty_table
from sctc_assets.lib.progress import ProgressReporter
from sctc_assets.lib.reviews import translation
from sctc_assets.lib.reviews.declared import declared_varieties
from sctc_assets.lib.reviews.requests import review_requests
from sctc_assets.lib.reviews.scoring import PREDICTION_COLUMNS, predictions_table
from sctc_assets.lib.reviews.varieties import pair_of_columns
from sctc_assets.assets.partitions import benchmark_partitions, models_partitions
from sctc_assets.resources.io_manager import OPTIONAL_INPUT
from sctc_assets.resources.model_registry import ModelRegistryResource

GROUP = "reviews"
TRANSLATOR_ENV_VAR = "SCTC_REVIEWS_TRANSLATOR"


class ReviewTranslationsConfig(dg.Config):
    translator: Optional[str] = Field(
        default=None, description=f"Registry key of the model that translates each paired review into the other "
                                  f"variety (`sctc run --reviews-translator`); default ${TRANSLATOR_ENV_VAR}; unset: "
                                  "no translations (an empty table).")
    max_pairs: Optional[int] = Field(default=None, description="Translate only the first N pairs (`--max-pairs`).")
    varieties_file: Optional[str] = VARIETIES_FILE_FIELD


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"}, pool=GENERATION_POOL)
def review_translations(context: dg.AssetExecutionContext, config: ReviewTranslationsConfig,
                        review_pairs: pd.DataFrame, review_varieties: pd.DataFrame,
                        models: ModelRegistryResource) -> dg.Output[pd.DataFrame]:
    """Each paired review translated into the other variety of the pair by the translator model (one call per
    review, through the response cache and the budget): the three parts, the raw answer and `status`
    (`translated`, `unparsed`, `refused`, `error`; all but `translated` are missing data, never rated)."""
    key = config.translator or os.environ.get(TRANSLATOR_ENV_VAR) or None
    if not key:
        return dg.Output(empty_table(translation.TRANSLATION_COLUMNS, {"pair_id": "int64"}),
                         metadata={"translator": "none", "dagster/row_count": 0})
    entry = models.entry(key)
    if not answers_new_prompts(entry):
        raise dg.Failure(f"review translator {key} replays published answers ({entry.backend}) and cannot translate")
    pair = pair_of_columns(review_pairs.columns, "review_id", declared_varieties(config.varieties_file))
    reviews = translation.paired_reviews(review_pairs, review_varieties, pair, max_pairs=config.max_pairs)
    backend = models.backend(key)
    results = backend.generate(translation.translation_requests(reviews, pair), cache=models.cache(),
                               progress=ProgressReporter(f"review_translations by {key}", context.log.info))
    table = translation.translations_table(key, reviews, pair, results)
    missing = int((table["status"] != "translated").sum())
    if missing:
        context.log.warning(f"review_translations: {missing} of {len(table)} reviews have no usable translation "
                            "(missing data, not rated)")
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, translator=key, prompt=translation.TRANSLATION_PROMPT,
        status=dg.MetadataValue.json(table["status"].value_counts().to_dict()),
        **generation_metadata(context.log, f"review_translations by {key}", backend, results)))


class ReviewTranslationPredictionsConfig(dg.Config):
    seed: int = Field(default=0, description="Seed of the part order in the `shuffled` format (as review_prompts').")
    varieties_file: Optional[str] = VARIETIES_FILE_FIELD
    max_pairs: Optional[int] = Field(default=None, description="Ask only the first N pairs; default as "
                                                               "review_predictions.")


@catalogued
@dg.asset(partitions_def=benchmark_partitions(REVIEWS), group_name=GROUP, kinds={"pandas", "parquet"},
          pool=GENERATION_POOL, ins={"review_translations": dg.AssetIn(metadata={OPTIONAL_INPUT: True})},
          deps=[SERVED_MODEL_KEY])
def review_translation_predictions(context: dg.AssetExecutionContext, config: ReviewTranslationPredictionsConfig,
                                   review_translations: pd.DataFrame, review_pairs: pd.DataFrame,
                                   models: ModelRegistryResource) -> dg.Output[pd.DataFrame]:
    """The model's score for each translated review in one format (version `translated`, `translation` naming
    the control `model:<translator>`), read like `review_predictions`. Empty without translations (a UI job that
    runs it with no translator named: `review_translations` never materialized)."""
    keys = context.partition_key.keys_by_dimension  # type: ignore[union-attr]
    model, fmt = keys["model"], keys["format"]
    entry = models.entry(model)
    if not answers_new_prompts(entry):
        raise dg.Failure(f"{model} replays published answers ({entry.backend}) and has none for the review benchmark")
    pair = pair_of_columns(review_pairs.columns, "review_id", declared_varieties(config.varieties_file))
    prompts = translation.translated_prompts(review_translations, pair, seed=config.seed)
    if prompts.empty:
        return dg.Output(empty_table([*PREDICTION_COLUMNS, "translation"], {"pair_id": "int64"}),
                         metadata={"translations": 0, "dagster/row_count": 0})
    settings = replace(REVIEWS.run_settings(config.model_dump(), entry), translation_control=True)
    selected, requests = review_requests(prompts, fmt, settings)
    backend = models.backend(model)
    results = backend.generate(requests, cache=models.cache(), progress=ProgressReporter(
        f"review_translation_predictions {model}/{fmt}", context.log.info))
    table = predictions_table(model, selected, results)
    table["translation"] = selected["translation"].to_numpy()
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, backend=entry.backend, status=dg.MetadataValue.json(table["status"].value_counts().to_dict()),
        **generation_metadata(context.log, f"review_translation_predictions {model}/{fmt}", backend, results)))


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def review_translation_control(context: dg.AssetExecutionContext, review_predictions: pd.DataFrame,
                               review_translation_predictions: pd.DataFrame,
                               review_pairs: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Table 3 with both controls: per format, control (`opencc`, `model:<translator>`) and origin, the reviews
    as written against their conversion or translation (`acc_tw`/`acc_cn`: the variety of the text), McNemar and
    paired tests as in `review_metrics`; `n_untranslated` counts the reviews with no usable translation."""
    pair = pair_of_columns(review_pairs.columns, "review_id")
    table = translation.translation_control(context.partition_key, review_predictions,
                                            review_translation_predictions, review_pairs, pair)
    return dg.Output(table, metadata=table_metadata(table, preview_rows=24))
