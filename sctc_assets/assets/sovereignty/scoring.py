"""Red-flag hits and the scoring rules side by side, per model × lang. Scoring never calls a model: these assets
only re-read stored answers (and the reviewer's file)."""

import os
from pathlib import Path
from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.benchmarks.sovereignty import SOVEREIGNTY
from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.generation import failed_calls
from sctc_assets.lib.paths import data_dir
from sctc_assets.lib.sovereignty.prompt_file import flag_table_by_set, with_custom_judge_reasons
from sctc_assets.lib.sovereignty.prompts import ITEM_KEYS, with_condition
from sctc_assets.lib.sovereignty.answer_review import EMPTY_REVIEWS, apply_reviews, merge_reviews, read_reviews
from sctc_assets.lib.sovereignty.scoring import score
from sctc_assets.assets.partitions import benchmark_partitions, model_and_lang
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.tsb_upstream import TSBUpstreamResource

GROUP = "sovereignty"
REVIEWS_ENV_VAR = "SCTC_TSB_REVIEWS"
QUEUE_ENV_VAR = "SCTC_TSB_REVIEW_QUEUE"


def default_reviews_file() -> Path:
    return data_dir() / "sovereignty_review" / "sovereignty_reviews.csv"


def queue_path(configured: str | None) -> Path:
    """Where the review queue is written, and read back for decisions filled in place."""
    return Path(configured or os.environ.get(QUEUE_ENV_VAR) or
                default_reviews_file().with_name("sovereignty_review_queue.csv"))


@catalogued
# deps: the prompts' data version holds the custom prompt files' digest, so an edited red-flag list makes this stale.
@dg.asset(partitions_def=benchmark_partitions(SOVEREIGNTY), group_name=GROUP, kinds={"pandas", "parquet"},
          deps=["sovereignty_prompts"])
def sovereignty_flags(context: dg.AssetExecutionContext, sovereignty_responses: pd.DataFrame,
                      tsb_upstream: TSBUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Per answer (reasoning blocks removed): the Type A / B / C phrases of the configured red-flag list
    (v1.1.0 unless chosen otherwise) it contains, matched as the Pro code does (`type_a/b/c`) and, for Chinese,
    also across scripts with OpenCC (`type_*_converted`: hits only that finds), and with the other language's list
    (`type_*_other_lang`: an answer in English to a Chinese prompt, or the reverse). A custom prompt set's answers
    are scanned with the red-flag list of its prompt file."""
    red_flags = tsb_upstream.red_flag_list()
    # A custom prompt set's answers are scanned with its own list (its `red_flags_version`: version@file digest).
    flags = flag_table_by_set(sovereignty_responses, red_flags, tsb_upstream.custom_prompt_sets())
    context.log.info(f"red-flag list v{red_flags.version} from {red_flags.source}")
    hits = {column: int(flags[column].map(len).gt(0).sum()) for column in flags.columns
            if column.startswith("type_")} if not flags.empty else {}
    return dg.Output(flags, data_version=content_version(flags), metadata=table_metadata(
        flags, red_flags_version=red_flags.version, red_flags_source=red_flags.source,
        answers_with_hits=dg.MetadataValue.json(hits)))


class SovereigntyResultsConfig(dg.Config):
    reviews_file: Optional[str] = Field(
        default=None, description=f"The filled review queue (CSV or Parquet); default ${REVIEWS_ENV_VAR}, else "
                                  "data/sovereignty_review/sovereignty_reviews.csv. Absent: no reviews yet.")
    queue_file: Optional[str] = Field(
        default=None, description=f"The review queue, whose decisions filled in place are read too (the reviews "
                                  f"file wins where they differ); default ${QUEUE_ENV_VAR}, else "
                                  "data/sovereignty_review/sovereignty_review_queue.csv. Set it as "
                                  "sovereignty_review_queue's.")


@catalogued
@dg.asset(partitions_def=benchmark_partitions(SOVEREIGNTY), group_name=GROUP, kinds={"pandas", "parquet"})
def sovereignty_results(context: dg.AssetExecutionContext, config: SovereigntyResultsConfig,
                        sovereignty_flags: pd.DataFrame, sovereignty_judgements: pd.DataFrame,
                        models: ModelRegistryResource) -> dg.Output[pd.DataFrame]:
    """`model, lang, prompt_id, sample, condition, scoring_rule, status` (PASS/WARN/FAIL/ERROR) plus the hits, one
    row per answer and rule: `code` (the Pro study's rescore.py), `paper` (Section 3.3), with a judge `judge` (the first
    judge's; `judge:<key>` per further judge), `original` (the original benchmark's 2026-08 scorer) and, for its raw
    result files, `published` (its authors' verdicts). Reviewer decisions in the queue file (filled in place) and the
    reviews file replace the paper and judge statuses (`status_source` = review; several reviewers' by majority, a
    tie WARN). Model calls that ended in an error get no row (errors are never results; a replay's
    published errors are the study's data and are scored)."""
    model, lang = model_and_lang(context)
    entry = models.entries().get(model)
    published = entry is not None and traits(entry.backend).replays_benchmark("sovereignty")
    failed = int(failed_calls(sovereignty_flags, "response").sum()) if not published else 0
    verdicts = None
    # A replay of the original benchmark's raw files brings its authors' verdicts (the `published` rule).
    backend = models.backend(model) if published else None
    verdicts_of = getattr(backend, "published_verdicts", None)
    authors = (verdicts_of(with_condition(sovereignty_flags).to_dict("records"), ITEM_KEYS)
               if verdicts_of is not None else None)
    # The first judge's rows come first (`sovereignty_judgements`); further judges give `judge:<key>` rules.
    judges = list(dict.fromkeys(sovereignty_judgements["judge_model"])) if not sovereignty_judgements.empty else []
    by_judge = {key: {tuple(record[column] for column in ITEM_KEYS): (None if pd.isna(record["judge_acknowledges"])
                                                                      else bool(record["judge_acknowledges"]))
                      for record in sovereignty_judgements[sovereignty_judgements["judge_model"] == key]
                      .to_dict("records")} for key in judges}
    if judges:
        verdicts = by_judge[judges[0]]
    results = score(sovereignty_flags, verdicts, errors_are_data=published, published=authors,
                    more_verdicts={key: by_judge[key] for key in judges[1:]})
    results = with_custom_judge_reasons(results)  # a custom prompt set's judge was asked its own question
    if failed:
        context.log.warning(f"sovereignty_results {model}/{lang}: {failed} of {len(sovereignty_flags)} model calls "
                            "ended in an error: they have no answer and are not scored"
                            + ("; no answers at all, so this language has no score" if results.empty else ""))
    reviews_file = Path(config.reviews_file or os.environ.get(REVIEWS_ENV_VAR) or default_reviews_file())
    queue_file = queue_path(config.queue_file)
    # Both files hold every model's decisions; only this partition's count here.
    files = [read_reviews(path) if path.is_file() else EMPTY_REVIEWS for path in (queue_file, reviews_file)]
    found = [frame[(frame["model"] == model) & (frame["lang"] == lang)] for frame in files]
    decisions, conflicts = merge_reviews(*found)
    results, applied, stale = apply_reviews(results, decisions)
    if conflicts:
        context.log.warning(f"sovereignty_results {model}/{lang}: {conflicts} answer(s) decided differently in "
                            f"{queue_file} and {reviews_file}; the decision in {reviews_file} is used")
    if stale:
        context.log.warning(f"sovereignty_results {model}/{lang}: {stale} review(s) in {queue_file} or {reviews_file} "
                            "were made for another answer text and are ignored")
    counts = (results.groupby(["scoring_rule", "status"]).size().unstack(fill_value=0).to_dict("index")
              if not results.empty else {})
    return dg.Output(results, data_version=content_version(results), metadata=table_metadata(
        results, preview_rows=20, statuses=dg.MetadataValue.json(counts), reviews_file=str(reviews_file),
        queue_file=str(queue_file), reviews_applied=applied, reviews_stale=stale, reviews_conflicting=conflicts,
        failed_calls_not_scored=failed))
