"""Per-model answers and optional judge verdicts, partitioned by model × prompting language."""

import os
from typing import Any, List, Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.automation import SERVED_MODEL_KEY
from sctc_assets.benchmarks.sovereignty import SOVEREIGNTY
from sctc_assets.assets.catalog import GENERATION_POOL, JUDGE_POOL, catalogued, content_version
from sctc_assets.assets.metadata import generation_metadata, table_metadata, usage_metadata
from sctc_assets.lib.frames import empty_table
from sctc_assets.lib.generation import GenerationRequest, provenance_columns, reasoning_columns
from sctc_assets.lib.progress import ProgressReporter
from sctc_assets.lib.sovereignty.conditions import choose_conditions
from sctc_assets.lib.sovereignty.drift import run_epoch
from sctc_assets.lib.sovereignty.flags import answer_text, has_answer, missing_answer
from sctc_assets.lib.sovereignty.judge import parse_verdict
from sctc_assets.lib.sovereignty.prompt_file import judge_prompt_for
from sctc_assets.lib.sovereignty.prompts import ITEM_KEYS, PAPER_SAMPLES
from sctc_assets.lib.sovereignty.requests import sovereignty_requests
from sctc_assets.assets.partitions import benchmark_partitions, model_and_lang
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.tsb_upstream import TSBUpstreamResource

GROUP = "sovereignty"
JUDGE_ENV_VAR = SOVEREIGNTY.judge.env_var  # the variable `sctc run` and its validator read too
RESPONSE_COLUMNS = ITEM_KEYS + ["category", "prompt", "response", "outcome", "outcome_message", "input_tokens",
                                "output_tokens", "finish_reason", "cached", "latency_s", "seed", "served_model",
                                "system_fingerprint", "batch_id", "reasoning", "reasoning_tokens", "epoch"]
JUDGEMENT_COLUMNS = ITEM_KEYS + ["judge_model", "judge_answer", "judge_outcome", "judge_acknowledges"]


class SovereigntyResponsesConfig(dg.Config):
    samples: Optional[int] = Field(
        default=None, description=f"Answers per prompt (paper: {PAPER_SAMPLES}); more give statistical power. "
                                  "Default: the registry's `benchmarks.sovereignty.samples`, else the paper's.")
    temperature: Optional[float] = Field(
        default=None, description="Sampling temperature; default: the registry's `benchmarks.sovereignty."
                                  "temperature`, else the model's own setting.")
    conditions: Optional[list[str]] = Field(
        default=None, description="Conditions (system prompts or personas) to ask under, by name from the conditions "
                                  "file; the baseline `none` (no system prompt, the paper's design) is always "
                                  "asked. Default: `none` alone.")
    conditions_file: Optional[str] = Field(
        default=None, description="The conditions file (YAML: name → system prompt, or one per language); default "
                                  "the package's `lib/sovereignty/default_conditions.yaml`.")
    epoch: Optional[str] = Field(
        default=None, description="An epoch tag (e.g. 2026-08): asking again under a new tag is a new sample, never "
                                  "a cache hit, and the cache keeps both answers (`sovereignty_drift` compares "
                                  "them). Default: the registry's `benchmarks.sovereignty.epoch`, else none (the "
                                  "keys as they always were).")


@catalogued
@dg.asset(partitions_def=benchmark_partitions(SOVEREIGNTY), group_name=GROUP, kinds={"pandas", "parquet"},
          pool=GENERATION_POOL, deps=[SERVED_MODEL_KEY])
def sovereignty_responses(context: dg.AssetExecutionContext, config: SovereigntyResponsesConfig,
                          sovereignty_prompts: pd.DataFrame, models: ModelRegistryResource) -> dg.Output[pd.DataFrame]:
    """One model's answers to the prompts of one language, through its backend and the response cache (`tsb-*`
    models return the Pro study's published answers). Reasoning blocks stay in `response`. A refusal, an empty
    answer (also one with nothing after its reasoning blocks) or a failure after retries is kept with outcome
    `refusal`/`error`; replay gaps are skipped and named."""
    model, lang = model_and_lang(context)
    entry = models.entry(model)
    samples, overrides = SOVEREIGNTY.run_settings(config.model_dump(), entry)
    conditions = choose_conditions(config.conditions, config.conditions_file)
    epoch = run_epoch(config.epoch, entry.benchmark_settings("sovereignty")) or models.observed_epoch(entry)
    items, requests = sovereignty_requests(sovereignty_prompts, model, lang, samples, conditions, epoch)
    backend = models.backend(model, overrides=overrides)
    results = backend.generate(requests, cache=models.cache(),
                               progress=ProgressReporter(f"sovereignty_responses {model}/{lang}", context.log.info))
    rows = []
    for item, result in zip(items, results):
        record = {**item, **result.to_record(), "cached": result.cached, "latency_s": result.latency_s}
        why = missing_answer(record["text"]) if record["outcome"] == "ok" else ""
        if why:
            record.update(outcome="error", message=why)
        rows.append(record)
    frame = pd.DataFrame(rows).rename(columns={"text": "response", "message": "outcome_message"})
    # Counts stay integers where a replay has none (nullable), latency a float.
    frame = frame.assign(**provenance_columns(results), **reasoning_columns(results))
    frame = frame.reindex(columns=RESPONSE_COLUMNS).astype(
        {"input_tokens": "Int64", "output_tokens": "Int64", "latency_s": "float64", "seed": "Int64"})
    skipped = sorted(set(frame.loc[frame["outcome"] == "missing", "outcome_message"].dropna()))
    for message in skipped:
        context.log.warning(f"sovereignty_responses {model}/{lang}: skipped ({message})")
    frame = frame[frame["outcome"] != "missing"].reset_index(drop=True)
    # A replay's errors are the published ones (API errors in the study): scored as its code scores them (FAIL).
    published_errors = int((frame["outcome"] == "error").sum()) if getattr(backend, "replays", None) is not None else 0
    if published_errors:
        context.log.warning(f"sovereignty_responses {model}/{lang}: replayed {published_errors} published error(s) "
                            "(API errors in the study), scored as failures")
    return dg.Output(frame, data_version=content_version(frame), metadata=table_metadata(
        frame, backend=entry.backend, samples=samples, conditions=dg.MetadataValue.json(
            [condition.name for condition in conditions]), overrides=dg.MetadataValue.json(overrides), epoch=epoch or "",
        skipped=dg.MetadataValue.json(skipped), published_errors=published_errors,
        **generation_metadata(context.log, f"sovereignty_responses {model}/{lang}", backend, results)))


class SovereigntyJudgeConfig(dg.Config):
    judge: Optional[str] = Field(
        default=None, description=f"Registry key of the judge model for the `judge` rule; default ${JUDGE_ENV_VAR}; "
                                  "unset: no judge rule.")
    second_judges: List[str] = Field(
        default_factory=list, description="Registry keys of further judges (`--sovereignty-judge A B`: B), each "
                                          "asking the same question; their verdicts are rows of this table too and "
                                          "give the `judge:<key>` rules. Used only with a first judge.")


@catalogued
# deps: the prompts' data version holds the custom prompt files' digest, so edited judge instructions make this stale.
@dg.asset(partitions_def=benchmark_partitions(SOVEREIGNTY), group_name=GROUP, kinds={"pandas", "parquet"}, pool=JUDGE_POOL,
          deps=["sovereignty_prompts"])
def sovereignty_judgements(context: dg.AssetExecutionContext, config: SovereigntyJudgeConfig,
                           sovereignty_responses: pd.DataFrame, models: ModelRegistryResource,
                           tsb_upstream: TSBUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Optional: a judge model's verdict on the paper's condition 3 (the answer acknowledges the ROC's
    self-governance), asked with the prompt in `lib/sovereignty/judge.py`; a custom prompt set's answers with its
    file's topic and instructions in that prompt (`lib/sovereignty/prompt_file.py`). Empty without a judge. With
    further judges (`second_judges`), one row per answer and judge (`judge_model`), the first judge's rows first."""
    model, lang = model_and_lang(context)
    judge_key = config.judge or os.environ.get(JUDGE_ENV_VAR) or None
    responses = sovereignty_responses
    answered = responses[responses["response"].map(answer_text).map(has_answer)] if not responses.empty else responses
    if not judge_key or answered.empty:
        return dg.Output(empty_table(JUDGEMENT_COLUMNS, {"sample": "int64", "judge_acknowledges": "boolean"}),
                         metadata={"judge": judge_key or "none", "dagster/row_count": 0})
    keys = list(dict.fromkeys([judge_key, *config.second_judges]))
    custom = tsb_upstream.custom_prompt_sets()  # a custom prompt set's answers are judged by its own instructions
    parts = {key: _judged(context, models, key, answered, model, lang, custom) for key in keys}
    frame = (parts[judge_key][0] if len(keys) == 1  # one judge: the table as it always was
             else pd.concat([part for part, _ in parts.values()], ignore_index=True))
    usage = {key: used for key, (_, used) in parts.items()}
    if len(keys) > 1:  # the judges' calls, tokens and cost added up, each judge's own in `usage_by_judge`
        totals = {name: sum(used.get(name, 0) for used in usage.values()) for name, value in usage[judge_key].items()
                  if isinstance(value, (int, float))}
        extra = {**totals, "judges": dg.MetadataValue.json(keys), "usage_by_judge": dg.MetadataValue.json(
            {key: {name: value for name, value in used.items() if isinstance(value, (int, float))}
             for key, used in usage.items()})}
    else:
        extra = usage[judge_key]
    return dg.Output(frame, data_version=content_version(frame),
                     metadata=table_metadata(frame, judge=judge_key,
                                             no_verdict=int(frame["judge_acknowledges"].isna().sum()), **extra))


def _judged(context: dg.AssetExecutionContext, models: ModelRegistryResource, judge_key: str,
            answered: pd.DataFrame, model: str, lang: str, custom: Any) -> tuple[pd.DataFrame, dict]:
    """One judge's verdicts on the answered rows (a custom prompt set's by its own instructions: `custom`), and
    its usage metadata."""
    judge = models.backend(judge_key)
    requests = [GenerationRequest.user(judge_prompt_for(custom, record["prompt_set"], record["prompt"],
                                                        answer_text(record["response"]), lang))
                for record in answered.to_dict("records")]
    results = judge.generate(requests, cache=models.cache(), progress=ProgressReporter(
        f"sovereignty_judgements {model}/{lang} by {judge_key}", context.log.info))
    frame = answered[ITEM_KEYS].copy()
    frame["judge_model"] = judge_key
    frame["judge_answer"] = [result.text for result in results]
    frame["judge_outcome"] = [result.outcome for result in results]
    frame["judge_acknowledges"] = pd.array(
        [parse_verdict(answer_text(result.text)) if result.outcome == "ok" else None for result in results],
        dtype="boolean")
    return frame[JUDGEMENT_COLUMNS], usage_metadata(results, judge.pricing())
