"""The paper's side studies beyond Tables 1–3: Appendix E's three-class sentiment pilot by length (its own model
calls, opt-in with `sctc run --reviews-pilot N`), the pair-by-pair predictions behind Figures 3–4, and the human
ratings imported with `sctc reviews import-ratings` against the stars and the models."""

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import GENERATION_POOL, catalogued, content_version
from sctc_assets.assets.metadata import generation_metadata, table_metadata
from sctc_assets.benchmarks.reviews import answers_new_prompts
from sctc_assets.lib.progress import ProgressReporter
from sctc_assets.lib.reviews import human_ratings, pilot
from sctc_assets.lib.reviews.prediction_pairs import prediction_pairs
from sctc_assets.assets.partitions import models_partitions
from sctc_assets.resources.model_registry import ModelRegistryResource

GROUP = "reviews"


class ReviewSentimentPilotConfig(dg.Config):
    per_class: int = Field(default=0, ge=0, description="Reviews drawn per variety × 10-character bin × sentiment "
                                                        "class (the paper's: 200; `sctc run --reviews-pilot N`); 0, "
                                                        "the default, runs no pilot: an empty table, no model call.")
    seed: int = Field(default=0, description="Seed of the draw (a hash of seed and review id).")


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"}, pool=GENERATION_POOL)
def review_sentiment_predictions(context: dg.AssetExecutionContext, config: ReviewSentimentPilotConfig,
                                 review_varieties: pd.DataFrame,
                                 models: ModelRegistryResource) -> dg.Output[pd.DataFrame]:
    """Appendix E's prompt (no system prompt) on up to `per_class` reviews per variety × length bin × sentiment
    class, through the response cache: the raw answer and the label it gives (`valid` when it is one of the three
    labels alone, else `invalid`, left out as in the paper)."""
    model = context.partition_key
    entry = models.entry(model)
    if not answers_new_prompts(entry):
        raise dg.Failure(f"{model} replays published answers ({entry.backend}) and has none for the review pilot")
    sample = pilot.pilot_sample(review_varieties, config.per_class, seed=config.seed)
    if sample.empty:  # no pilot asked for (the UI's jobs, without a per_class): nothing to spend
        table = pilot.pilot_predictions(model, sample, [])
        return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
            table, per_class=config.per_class, note="no pilot: per_class is 0 (sctc run --reviews-pilot N)"))
    backend = models.backend(model)
    results = backend.generate(pilot.pilot_requests(sample), cache=models.cache(),
                               progress=ProgressReporter(f"review_sentiment_predictions {model}", context.log.info))
    table = pilot.pilot_predictions(model, sample, results)
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, per_class=config.per_class, seed=config.seed, prompt=pilot.PILOT_PROMPT,
        status=dg.MetadataValue.json(table["status"].value_counts().to_dict()),
        **generation_metadata(context.log, f"review_sentiment_predictions {model}", backend, results)))


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def review_sentiment_pilot(review_sentiment_predictions: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Accuracy (%) and MSE (classes coded 0, 1, 2) per variety × 10-character bin × sentiment class and overall,
    over the valid answers (Figure 2)."""
    table = pilot.pilot_table(review_sentiment_predictions)
    return dg.Output(table, metadata=table_metadata(table, preview_rows=12))


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def review_prediction_pairs(context: dg.AssetExecutionContext, review_predictions: pd.DataFrame,
                            review_pairs: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """One row per format × asked pair: the two reviews' stars and the model's two predictions on the texts as
    written (null where invalid), for the per-pair scatter and Figures 3–4."""
    table = prediction_pairs(context.partition_key, review_predictions, review_pairs)
    return dg.Output(table, metadata=table_metadata(table, preview_rows=12))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def review_human_agreement(review_varieties: pd.DataFrame, review_predictions: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """The ratings imported with `sctc reviews import-ratings` (kept under the data folder's `review_ratings/`)
    per rater and all raters × variety: Likert means and SDs (B.1, B.2), the share of native-like answers, and the
    predicted scores against the stars and each model's predictions (accuracy, MSE, quadratic-weighted κ). Empty
    until ratings are imported."""
    ratings = human_ratings.stored_ratings()
    table = human_ratings.agreement_table(ratings, review_varieties, review_predictions)
    unknown = int((~ratings["review_id"].isin(review_varieties["review_id"])).sum()) if not ratings.empty else 0
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, preview_rows=20, ratings=len(ratings), raters=int(ratings["rater"].nunique()) if len(ratings) else 0,
        ratings_of_reviews_not_in_this_run=unknown, folder=str(human_ratings.ratings_dir())))
