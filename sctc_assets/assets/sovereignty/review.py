"""The review queue across models: answers a person decides, written where they can be filled in."""

import os
from pathlib import Path
from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.metadata import table_metadata
from sctc_assets.assets.sovereignty.scoring import REVIEWS_ENV_VAR, default_reviews_file
from sctc_assets.lib.sovereignty.review import review_queue

GROUP = "sovereignty"
QUEUE_ENV_VAR = "SCTC_TSB_REVIEW_QUEUE"


class ReviewQueueConfig(dg.Config):
    queue_file: Optional[str] = Field(
        default=None, description=f"Where the queue is written as CSV; default ${QUEUE_ENV_VAR}, else "
                                  "data/sovereignty_review/sovereignty_review_queue.csv.")


@dg.asset(group_name=GROUP, kinds={"pandas", "parquet", "csv"})
def sovereignty_review_queue(context: dg.AssetExecutionContext, config: ReviewQueueConfig,
                             sovereignty_results: pd.DataFrame, sovereignty_flags: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Answers with a Type B hit, without a judge verdict, or where the judge and the keywords disagree, with an
    empty `decision` column (earlier decisions filled in). Fill it with pass/fail and save the file as the
    reviews file (default data/sovereignty_review/sovereignty_reviews.csv, CSV or Parquet); the next materialization of
    `sovereignty_results` applies the decisions to the paper and judge rules."""
    queue = review_queue(sovereignty_results, sovereignty_flags)
    target = Path(config.queue_file or os.environ.get(QUEUE_ENV_VAR) or
                  default_reviews_file().with_name("sovereignty_review_queue.csv"))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(target.name + ".tmp")
    queue.to_csv(staging, index=False)
    staging.replace(target)
    pending = int((queue["decision"] == "").sum())
    context.log.info(f"{pending} answer(s) await review in {target}")
    return dg.Output(queue, metadata=table_metadata(
        queue, queue_file=dg.MetadataValue.path(str(target)), pending=pending, decided=len(queue) - pending,
        reviews_file=str(os.environ.get(REVIEWS_ENV_VAR) or default_reviews_file())))
