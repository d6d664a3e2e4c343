"""One model's rating predictions, partitioned by model × input format (both varieties and, for a Chinese pair,
the conversion control inside each partition), and its paired metric table."""

from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.automation import SERVED_MODEL_KEY
from sctc_assets.assets.catalog import GENERATION_POOL, catalogued, content_version
from sctc_assets.assets.metadata import generation_metadata, table_metadata
from sctc_assets.benchmarks.reviews import REVIEWS, answers_new_prompts
from sctc_assets.lib.progress import ProgressReporter
from sctc_assets.lib.report.headlines import review_headlines
from sctc_assets.lib.reviews import metrics, pairing
from sctc_assets.lib.reviews.requests import review_requests
from sctc_assets.lib.reviews.scoring import predictions_table
from sctc_assets.assets.partitions import benchmark_partitions, models_partitions
from sctc_assets.resources.model_registry import ModelRegistryResource

GROUP = "reviews"
review_partitions = benchmark_partitions(REVIEWS)


class ReviewPredictionsConfig(dg.Config):
    max_pairs: Optional[int] = Field(
        default=None, description="Ask only the first N pairs (a seeded random sample); default: the model's "
                                  "registry `benchmarks.reviews.max_pairs`, else every pair.")
    translation_control: Optional[bool] = Field(
        default=None, description="Also ask the OpenCC-converted reviews (Table 3); default: the registry's "
                                  "`benchmarks.reviews.translation_control`, else yes.")


@catalogued
@dg.asset(partitions_def=review_partitions, group_name=GROUP, kinds={"pandas", "parquet"}, pool=GENERATION_POOL,
          deps=[SERVED_MODEL_KEY])
def review_predictions(context: dg.AssetExecutionContext, config: ReviewPredictionsConfig,
                       review_prompts: pd.DataFrame, models: ModelRegistryResource) -> dg.Output[pd.DataFrame]:
    """The model's score for each paired review in one format, as written and (a Chinese pair) converted:
    `prediction` (1–10)
    when the answer is that number alone, else `status` invalid with the raw answer kept in `response`. Models
    without a system role (registry `benchmarks.reviews.system_role: false`) get the user message alone."""
    keys = context.partition_key.keys_by_dimension  # type: ignore[union-attr]
    model, fmt = keys["model"], keys["format"]
    entry = models.entry(model)
    if not answers_new_prompts(entry):
        raise dg.Failure(f"{model} replays published answers ({entry.backend}) and has none for the review benchmark")
    settings = REVIEWS.run_settings(config.model_dump(), entry)
    max_pairs, control, system_role = settings.max_pairs, settings.translation_control, settings.system_role
    selected, requests = review_requests(review_prompts, fmt, settings)
    backend = models.backend(model)
    results = backend.generate(requests, cache=models.cache(),
                               progress=ProgressReporter(f"review_predictions {model}/{fmt}", context.log.info))
    table = predictions_table(model, selected, results)
    status = table.groupby(["variety", "version", "status"]).size().rename("n").reset_index().to_dict("records")
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, backend=entry.backend, max_pairs=max_pairs if max_pairs is not None else "all",
        translation_control=control, system_role=system_role, status=dg.MetadataValue.json(status),
        **generation_metadata(context.log, f"review_predictions {model}/{fmt}", backend, results)))


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def review_metrics(context: dg.AssetExecutionContext, review_predictions: pd.DataFrame,
                   review_pairs: pd.DataFrame, review_varieties: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Accuracy (%) and MSE on the reviews of the pair's two varieties (the paper's: Taiwan and Mainland, columns
    `acc_tw`, `acc_cn`, …), Δ = second − first (cn − tw), McNemar (accuracy), paired t-test and Wilcoxon (squared
    error), over the pairs where both predictions are valid: by length (Tables 1–2), and for a Chinese pair by
    character set (Table 9) and against the OpenCC conversion (Table 3), and the true-score confound check."""
    table = metrics.review_metrics(review_predictions, review_pairs, review_varieties)
    table.insert(0, "model", context.partition_key)
    overall = table[(table["analysis"] == "length") & (table["subset"] == "all")]
    a, b = pairing.pair_of(review_pairs).suffixes
    return dg.Output(table, metadata=table_metadata(
        table, preview_rows=30, **review_headlines(table),
        overall=dg.MetadataValue.md(overall[["format", "n_pairs", f"acc_{a}", f"acc_{b}", "delta_acc", "sig_acc",
                                             f"mse_{a}", f"mse_{b}", "delta_mse", "sig_mse"]]
                                    .round(3).to_markdown(index=False) if not overall.empty else "_(no predictions)_")))
