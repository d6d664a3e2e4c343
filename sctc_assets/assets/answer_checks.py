"""Asset checks on every partition of the answer and label tables: how many calls failed or were refused, how many
answers could not be scored, and whether the partition holds any usable answer at all.

The rates are WARN checks with thresholds in the run config (`AnswerCheckConfig`, editable in the launchpad); "no
usable answer" is an ERROR, except for replayed published answers (the papers' own errors are data, not a fault
of this run), where it is a WARN. Each check reads its asset's own partition through the IO manager, as an input of
a partitioned multi-asset check (which Dagster 1.13 loads correctly for these multi-partitions; dagster#30178 is
about another path, and `test_answer_checks` materializes a partition with its checks to keep it that way). Every
run of these assets holds one partition (no asset backfills a range in one run), so each check is about one
partition, as its own run wrote it: `ParquetIOManager` keeps what its run wrote, so a run of the same partition that
replaced the stored file meanwhile does not change this run's counts where the run's steps share a process
(`test_concurrent_runs`).
"""


import warnings
from dataclasses import dataclass
from typing import Callable, Iterator

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.name.responses import name_responses
from sctc_assets.assets.name.selections import name_selections
from sctc_assets.assets.reviews.predictions import review_predictions
from sctc_assets.assets.sovereignty.responses import sovereignty_responses
from sctc_assets.assets.sovereignty.scoring import sovereignty_results
from sctc_assets.assets.term.labels import term_labels
from sctc_assets.assets.term.responses import term_responses
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.model_registry import RegistryError
from sctc_assets.resources.model_registry import ModelRegistryResource


class AnswerCheckConfig(dg.Config):
    max_error_rate: float = Field(default=0.05, description="WARN above this share of calls that failed after the "
                                                            "retries.")
    max_refusal_rate: float = Field(default=0.20, description="WARN above this share of refused answers (content "
                                                              "filter, empty answer).")
    max_invalid_rate: float = Field(default=0.50, description="WARN above this share of answers that could not be "
                                                              "scored (no name, no 1–10 score, nothing to judge).")


@dataclass(frozen=True)
class Measure:
    """One rate check: the rows it counts among the rows it considers, and the config field of its threshold."""

    name: str
    description: str
    threshold: str
    counted: Callable[[pd.DataFrame], pd.Series]
    considered: Callable[[pd.DataFrame], pd.Series] = lambda frame: pd.Series(True, index=frame.index)


@dataclass(frozen=True)
class Usable:
    description: str
    usable: Callable[[pd.DataFrame], pd.Series]


def _outcome(value: str) -> Callable[[pd.DataFrame], pd.Series]:
    return lambda frame: frame["outcome"] == value


ERRORS = Measure("error_rate", "Share of model calls that failed after the retries (outcome `error`).",
                 "max_error_rate", _outcome("error"))
REFUSALS = Measure("refusal_rate", "Share of answers refused (outcome `refusal`: content filter or empty answer).",
                   "max_refusal_rate", _outcome("refusal"))
ANSWERED = Usable("At least one answer came back (outcome `ok`).", _outcome("ok"))


def _rules(frame: pd.DataFrame) -> pd.Series:
    return frame["extraction_source"] == "rules"


CHECKED: dict[str, tuple[dg.AssetsDefinition, tuple[Measure, ...], Usable]] = {
    "term_responses": (term_responses, (ERRORS, REFUSALS), ANSWERED),
    "name_responses": (name_responses, (ERRORS, REFUSALS), ANSWERED),
    "sovereignty_responses": (sovereignty_responses, (ERRORS, REFUSALS), ANSWERED),
    "review_predictions": (review_predictions, (
        Measure("error_rate", "Share of rating calls that failed after the retries (status `error`).",
                "max_error_rate", lambda frame: frame["status"] == "error"),
        Measure("invalid_rate", "Share of answers that are not a score from 1 to 10 alone (status `invalid`).",
                "max_invalid_rate", lambda frame: frame["status"] == "invalid")),
        Usable("At least one valid 1–10 prediction.", lambda frame: frame["status"] == "valid")),
    "term_labels": (term_labels, (), Usable("At least one answer was labelled.", lambda frame: frame["label"].notna())),
    "name_selections": (name_selections, (
        Measure("invalid_rate", "Share of answers the rules extractor finds no single candidate in (status other "
                                "than `valid`).", "max_invalid_rate", lambda frame: frame["status"] != "valid",
                _rules),),
        Usable("At least one answer selects exactly one candidate (rules extraction).",
               lambda frame: _rules(frame) & (frame["status"] == "valid"))),
    "sovereignty_results": (sovereignty_results, (
        Measure("unscorable_rate", "Share of answers without a usable text to score (status `ERROR`, `code` rule).",
                "max_invalid_rate", lambda frame: frame["status"] == "ERROR",
                lambda frame: frame["scoring_rule"] == "code"),),
        Usable("At least one answer could be scored (`code` rule, status other than `ERROR`).",
               lambda frame: (frame["scoring_rule"] == "code") & (frame["status"] != "ERROR"))),
}


def replays_published_answers(models: ModelRegistryResource, model: str) -> bool:
    """A replay backend's answers, errors included, are a paper's published data."""
    try:
        return traits(models.entries()[model].backend).replays is not None
    except (KeyError, RegistryError):
        return False


def _model_of(partition_key: str | dg.MultiPartitionKey) -> str:
    if isinstance(partition_key, dg.MultiPartitionKey):
        return partition_key.keys_by_dimension["model"]
    return str(partition_key).split("|")[-1]  # dimensions sort by name, and `model` sorts after lang and format


def _rate_result(asset: dg.AssetKey | str, measure: Measure, frame: pd.DataFrame, config: AnswerCheckConfig) -> dg.AssetCheckResult:
    considered = measure.considered(frame) if not frame.empty else pd.Series(dtype=bool)
    pool = frame[considered] if not frame.empty else frame
    counted = int(measure.counted(pool).sum()) if not pool.empty else 0
    rate = counted / len(pool) if len(pool) else 0.0
    threshold = getattr(config, measure.threshold)
    return dg.AssetCheckResult(
        check_name=measure.name, asset_key=asset, passed=bool(rate <= threshold),
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"rate": round(rate, 4), "count": counted, "rows": len(pool), "threshold": threshold})


def _usable_result(asset: dg.AssetKey | str, usable: Usable, frame: pd.DataFrame, replay: bool) -> dg.AssetCheckResult:
    count = int(usable.usable(frame).sum()) if not frame.empty else 0
    return dg.AssetCheckResult(
        check_name="usable_answers", asset_key=asset, passed=count > 0,
        severity=dg.AssetCheckSeverity.WARN if replay else dg.AssetCheckSeverity.ERROR,
        metadata={"usable": count, "rows": len(frame),
                  "published_answers": replay})


def _build(name: str, assets_def: dg.AssetsDefinition, measures: tuple[Measure, ...],
           usable: Usable) -> dg.AssetChecksDefinition:
    partitions_def = assets_def.partitions_def
    with warnings.catch_warnings():  # partitioned check specs are a preview feature of Dagster 1.13
        warnings.simplefilter("ignore")
        specs = [dg.AssetCheckSpec(measure.name, asset=assets_def.key, partitions_def=partitions_def,
                                   description=measure.description) for measure in measures]
        specs.append(dg.AssetCheckSpec("usable_answers", asset=assets_def.key, partitions_def=partitions_def,
                                       description=f"{usable.description} ERROR when none did (WARN for replayed "
                                                   "published answers)."))

    @dg.multi_asset_check(specs=specs, name=f"{name}_answer_checks", ins={"table": dg.AssetIn(assets_def.key)},
                          description=f"Error, refusal and unscorable rates of each `{name}` partition.")
    def answer_checks(context: dg.AssetCheckExecutionContext, config: AnswerCheckConfig, table: pd.DataFrame,
                      models: ModelRegistryResource) -> Iterator[dg.AssetCheckResult]:
        # the checked asset's key as this definition has it (an audit Component prefixes it, components/)
        target = context.check_specs[0].asset_key
        for measure in measures:
            yield _rate_result(target, measure, table, config)
        yield _usable_result(target, usable, table, replays_published_answers(models, _model_of(context.partition_key)))

    return answer_checks


ANSWER_CHECKS = [_build(name, assets_def, measures, usable)
                 for name, (assets_def, measures, usable) in CHECKED.items()]
