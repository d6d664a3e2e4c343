"""Agreement across models between the raters of the answers: human reviewers, the automatic rules, the judges."""

import os
from pathlib import Path
from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.assets.sovereignty.scoring import QUEUE_ENV_VAR, REVIEWS_ENV_VAR, default_reviews_file, queue_path
from sctc_assets.lib.sovereignty.answer_review import EMPTY_REVIEWS, merge_reviews, read_reviews
from sctc_assets.lib.sovereignty.raters import current_reviews, rater_agreement

GROUP = "sovereignty"


class RaterAgreementConfig(dg.Config):
    reviews_file: Optional[str] = Field(
        default=None, description=f"The reviews file, as sovereignty_results reads it; default ${REVIEWS_ENV_VAR}, "
                                  "else data/sovereignty_review/sovereignty_reviews.csv.")
    queue_file: Optional[str] = Field(
        default=None, description=f"The review queue, as sovereignty_results reads it; default ${QUEUE_ENV_VAR}.")


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def sovereignty_rater_agreement(context: dg.AssetExecutionContext, config: RaterAgreementConfig,
                                sovereignty_results: pd.DataFrame,
                                sovereignty_judgements: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """How far the raters agree, across models: the human reviewers among themselves (Cohen's κ for two, Fleiss'
    κ for more, on the answers all decided), each reviewer and their majority against each reviewed rule's
    automatic status (the share of verdicts the review changes), and the judges among themselves (κ, raw
    agreement, the answers they disagree on). Only decisions made for the answers stored now count."""
    reviews_file = Path(config.reviews_file or os.environ.get(REVIEWS_ENV_VAR) or default_reviews_file())
    queue_file = queue_path(config.queue_file)
    files = [read_reviews(path) if path.is_file() else EMPTY_REVIEWS for path in (queue_file, reviews_file)]
    decisions, _ = merge_reviews(*files)
    decisions = current_reviews(sovereignty_results, decisions)
    table = rater_agreement(sovereignty_results, decisions, sovereignty_judgements)
    for row in table[table["comparison"] == "judges"].to_dict("records"):
        context.log.info(f"judges {row['rater_a']} and {row['rater_b']}: agree on {row['agreement']:.0%} of "
                         f"{row['n']} answers, κ {row['kappa']:.2f}")
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, reviews_file=str(reviews_file), queue_file=str(queue_file), decisions=len(decisions)))
