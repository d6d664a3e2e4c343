"""The review queue across models: answers a person decides, written where they can be filled in."""

import os
from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.assets.sovereignty.scoring import QUEUE_ENV_VAR, REVIEWS_ENV_VAR, default_reviews_file, queue_path
from sctc_assets.lib.atomic_files import replacing
from sctc_assets.lib.sovereignty.answer_review import keep_decisions, review_queue

GROUP = "sovereignty"


class ReviewQueueConfig(dg.Config):
    queue_file: Optional[str] = Field(
        default=None, description=f"Where the queue is written as CSV; default ${QUEUE_ENV_VAR}, else "
                                  "data/sovereignty_review/sovereignty_review_queue.csv. Set sovereignty_results' "
                                  "queue_file to the same file so decisions filled in it are applied.")


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet", "csv"})
def sovereignty_review_queue(context: dg.AssetExecutionContext, config: ReviewQueueConfig,
                             sovereignty_results: pd.DataFrame, sovereignty_flags: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Answers with a Type B hit, without a judge verdict, or where the judge and the keywords disagree, with a
    `decision` column (decisions applied so far filled in). Fill it with pass/fail in place, or save it as the
    reviews file (default data/sovereignty_review/sovereignty_reviews.csv, CSV or Parquet); the next
    materialization of `sovereignty_results` applies the decisions to the paper and judge rules. Writing the queue
    again keeps every decision and note filled in the file it replaces."""
    target = queue_path(config.queue_file)
    queue = keep_decisions(review_queue(sovereignty_results, sovereignty_flags), target)
    with replacing(target) as staging:
        queue.to_csv(staging, index=False)
    pending = int((queue["decision"] == "").sum())
    context.log.info(f"{pending} answer(s) await review in {target}")
    return dg.Output(queue, data_version=content_version(queue), metadata=table_metadata(
        queue, queue_file=dg.MetadataValue.path(str(target)), pending=pending, decided=len(queue) - pending,
        reviews_file=str(os.environ.get(REVIEWS_ENV_VAR) or default_reviews_file())))
