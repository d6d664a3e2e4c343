"""Per-model answers (generation) and optional judge verdicts, partitioned by model × lang."""

import os
from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.automation import SERVED_MODEL_KEY
from sctc_assets.benchmarks.term import TERM
from sctc_assets.assets.catalog import GENERATION_POOL, JUDGE_POOL, catalogued, content_version
from sctc_assets.assets.metadata import generation_metadata, table_metadata, usage_metadata
from sctc_assets.assets.replay_answers import replayed_columns
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.frames import empty_table
from sctc_assets.lib.generation import GenerationRequest, result_columns, strip_reasoning
from sctc_assets.lib.progress import ProgressReporter
from sctc_assets.lib.term.judge import judge_prompt, parse_verdict
from sctc_assets.lib.term.labelling import ITEM_KEYS, scorable
from sctc_assets.lib.term.prompts import PAPER_TRIALS, generation_overrides
from sctc_assets.lib.term.requests import term_requests
from sctc_assets.assets.partitions import benchmark_partitions, model_and_lang
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "term"
JUDGE_ENV_VAR = TERM.judge.env_var  # the variable `sctc run` and its validator read too
RESPONSE_COLUMNS = ["model", "lang", "prompt_variant", "term_id", "trial", "row", "prompt", "response", "outcome",
                    "outcome_message", "input_tokens", "output_tokens", "finish_reason", "cached", "latency_s",
                    "seed", "served_model", "system_fingerprint", "batch_id", "reasoning", "reasoning_tokens"]


class TermResponsesConfig(dg.Config):
    trials: Optional[int] = Field(
        default=None, description=f"Trials per prompt (paper: {PAPER_TRIALS}); default: the model's registry "
                                  "`benchmarks.term.trials`, else the paper's.")
    prompt_variants: Optional[list[int]] = Field(
        default=None, description="Prompt variants 1–3; default: the registry's `benchmarks.term.prompt_variants`, else all.")


@catalogued
@dg.asset(partitions_def=benchmark_partitions(TERM), group_name=GROUP, kinds={"pandas", "parquet"},
          pool=GENERATION_POOL, deps=[SERVED_MODEL_KEY])
def term_responses(
    context: dg.AssetExecutionContext,
    config: TermResponsesConfig,
    term_prompts: pd.DataFrame,
    models: ModelRegistryResource,
    upstream: SCTCUpstreamResource,
) -> dg.Output[pd.DataFrame]:
    """One model's answers to the term prompts of one language, through the model's backend and the response
    cache (replay models: the paper's published answers, read as columns from the parsed upstream files). Errors after retries stay in the table with
    outcome `error`; replay gaps (files the upstream copy lacks) are skipped and named in the metadata."""
    model, lang = model_and_lang(context)
    entry = models.entry(model)
    trials, variants = TERM.run_settings(config.model_dump(), entry)
    overrides = generation_overrides(entry.benchmark_settings("term"))
    selected, requests = term_requests(term_prompts, lang, trials, variants)
    backend = models.backend(model, open_upstream=upstream.open, overrides=overrides)
    frame = selected[["lang", "prompt_variant", "term_id", "trial", "row", "prompt"]].copy()
    frame.insert(0, "model", model)
    if traits(entry.backend).replays_benchmark(TERM.name):
        columns, usage = replayed_columns(backend, selected[["lang", "prompt_variant", "row"]].assign(
            benchmark="term"), context.log.info, f"term_responses {model}/{lang}")
        frame = frame.assign(**columns.set_axis(frame.index))
    else:
        progress = ProgressReporter(f"term_responses {model}/{lang}", context.log.info)
        results = backend.generate(requests, cache=models.cache(), progress=progress)
        frame = frame.assign(**result_columns(results))
        usage = generation_metadata(context.log, f"term_responses {model}/{lang}", backend, results)

    skipped = sorted(set(frame.loc[frame["outcome"] == "missing", "outcome_message"]))
    for message in skipped:
        context.log.warning(f"term_responses {model}/{lang}: skipped ({message})")
    frame = frame[frame["outcome"] != "missing"].reset_index(drop=True)[RESPONSE_COLUMNS]
    errors = int((frame["outcome"] == "error").sum())
    if errors:
        context.log.warning(f"term_responses {model}/{lang}: {errors} answers failed after retries; "
                            "they are not cached and will be asked again on the next materialization")
    note = "" if trials == PAPER_TRIALS else f"reduced run: {trials} of the paper's {PAPER_TRIALS} trials"
    return dg.Output(frame, data_version=content_version(frame), metadata=table_metadata(
        frame, backend=entry.backend, trials=trials, prompt_variants=dg.MetadataValue.json(variants),
        overrides=dg.MetadataValue.json(overrides),
        skipped=dg.MetadataValue.json(skipped), errors=errors, note=note, **usage,
    ))


class TermJudgeConfig(dg.Config):
    judge: Optional[str] = Field(
        default=None, description=f"Registry key of the judge model; default ${JUDGE_ENV_VAR}; unset: no judge labels.")


JUDGEMENT_COLUMNS = ITEM_KEYS + ["model", "judge_model", "judge_answer", "judge_outcome", "judge_correct"]
JUDGEMENT_DTYPES = {"prompt_variant": "int64", "trial": "int64", "term_id": "int64", "judge_correct": "boolean"}


@catalogued
@dg.asset(partitions_def=benchmark_partitions(TERM), group_name=GROUP, kinds={"pandas", "parquet"}, pool=JUDGE_POOL)
def term_judgements(
    context: dg.AssetExecutionContext,
    config: TermJudgeConfig,
    term_responses: pd.DataFrame,
    term_prompts: pd.DataFrame,
    models: ModelRegistryResource,
    upstream: SCTCUpstreamResource,
) -> dg.Output[pd.DataFrame]:
    """Optional judge verdicts (the paper's GPT-4o-mini correctness question, asked of any registered model).
    Empty when no judge is configured; the `judge` label source of `term_labels` uses them."""
    model, lang = model_and_lang(context)
    judge_key = config.judge or os.environ.get(JUDGE_ENV_VAR) or None
    if not judge_key or term_responses.empty:
        return dg.Output(empty_table(JUDGEMENT_COLUMNS, JUDGEMENT_DTYPES), metadata={"judge": "none",
                                                                                 "dagster/row_count": 0})
    answers = scorable(term_responses).merge(term_prompts[ITEM_KEYS + ["gt"]], on=ITEM_KEYS, how="left")
    judge = models.backend(judge_key, open_upstream=upstream.open)
    requests = [GenerationRequest.user(judge_prompt(record["prompt"], record["gt"], strip_reasoning(record["response"])))
                for record in answers.to_dict("records")]
    results = judge.generate(requests, cache=models.cache(),
                             progress=ProgressReporter(f"term_judgements {model}/{lang} by {judge_key}", context.log.info))
    frame = answers[ITEM_KEYS].copy()
    frame["model"] = model
    frame["judge_model"] = judge_key
    frame["judge_answer"] = [result.text for result in results]
    frame["judge_outcome"] = [result.outcome for result in results]
    frame["judge_correct"] = pd.array([parse_verdict(result.text) if result.outcome == "ok" else None
                                       for result in results], dtype="boolean")
    unparsed = int(frame["judge_correct"].isna().sum())
    return dg.Output(frame[JUDGEMENT_COLUMNS], data_version=content_version(frame[JUDGEMENT_COLUMNS]),
                     metadata=table_metadata(frame, judge=judge_key, unparsed_verdicts=unparsed,
                                             **usage_metadata(results, judge.pricing())))
