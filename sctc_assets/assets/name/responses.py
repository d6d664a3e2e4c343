"""Per-model answers to the name prompts (generation) and the optional LLM extractor's verdicts, by model × lang."""

import os
from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.automation import SERVED_MODEL_KEY
from sctc_assets.benchmarks.name import NAME
from sctc_assets.assets.catalog import GENERATION_POOL, JUDGE_POOL, catalogued, content_version
from sctc_assets.assets.metadata import generation_metadata, table_metadata, usage_metadata
from sctc_assets.assets.replay_answers import replayed_columns
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.frames import empty_table
from sctc_assets.lib.generation import GenerationRequest, GenerationResult, result_columns
from sctc_assets.lib.name.candidates import EXPERIMENTS, LIST_KEYS, LIST_SOURCES
from sctc_assets.lib.name.extraction import judge_prompt
from sctc_assets.lib.name.requests import prompts_to_ask, requests_of, variant_rows
from sctc_assets.lib.name.selections import SCORABLE_OUTCOMES, needs_judge
from sctc_assets.lib.name.variants import PAPER_VARIANT, read_variants, templates_digest
from sctc_assets.lib.progress import ProgressReporter
from sctc_assets.assets.partitions import benchmark_partitions, model_and_lang
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "name"
JUDGE_ENV_VAR = NAME.judge.env_var  # the variable `sctc run` and its validator read too
RESPONSE_COLUMNS = ["model", "lang", "prompt_variant", "experiment", "list_source", "list_id", "shuffle", "row", "prompt", "response",
                    "outcome", "outcome_message", "input_tokens", "output_tokens", "finish_reason", "cached",
                    "latency_s", "seed", "served_model", "system_fingerprint", "batch_id", "reasoning", "reasoning_tokens"]


class NameResponsesConfig(dg.Config):
    experiments: Optional[list[str]] = Field(
        default=None, description=f"Experiments to answer, of {list(EXPERIMENTS)}; default: the registry's "
                                  "`benchmarks.name.experiments`, else all.")
    lists: Optional[int] = Field(default=None, description="At most this many lists per experiment (the first); "
                                                           "default: the registry's `benchmarks.name.lists`, else all.")
    shuffles: Optional[int] = Field(default=None, description="At most this many shuffles per list (the first); "
                                                              "default: the registry's, else all.")
    list_source: Optional[str] = Field(
        default=None, description=f"Whose lists, one of {LIST_SOURCES}; default: the authors' where the upstream "
                                  "copy has them, else the generated ones. Replay models always answer the authors'.")
    prompt_variants_file: Optional[str] = Field(
        default=None, description="A reviewed variants file (`sctc names rephrase`): live models answer prompt "
                                  "variants 2 and 3, its rephrasings, beside variant 1 (the paper's wording); unset: "
                                  "variant 1 only. Replay models have answers to variant 1 only.")
    prompt_variants_digest: Optional[str] = Field(
        default=None, description="The file's templates' digest when the run was planned (`sctc run` sets it, so an "
                                  "edited file runs again); a file that no longer matches it is refused.")


@catalogued
@dg.asset(partitions_def=benchmark_partitions(NAME), group_name=GROUP, kinds={"pandas", "parquet"},
          pool=GENERATION_POOL, deps=[SERVED_MODEL_KEY])
def name_responses(
    context: dg.AssetExecutionContext,
    config: NameResponsesConfig,
    name_prompts: pd.DataFrame,
    models: ModelRegistryResource,
    upstream: SCTCUpstreamResource,
) -> dg.Output[pd.DataFrame]:
    """One model's answers to the name prompts of one language, through its backend and the response cache
    (replay models: the paper's published answers, read as columns from the parsed upstream files; rows whose
    answer file the upstream copy lacks are kept with outcome `missing`, so the published extraction still covers
    them)."""
    model, lang = model_and_lang(context)
    entry = models.entry(model)
    settings = NAME.run_settings(config.model_dump(), entry, where=f"name_responses: model {model!r} (run config, "
                                                                  "else registry benchmarks.name)")
    replay = traits(entry.backend).replays_benchmark("name")
    selected, notes = prompts_to_ask(name_prompts, lang, settings, replay=replay)
    backend = models.backend(model, open_upstream=upstream.open)
    if config.prompt_variants_file and replay:
        notes.append("prompt variants 2 and 3 skipped: a replay has answers to the paper's wording only")
    templates = read_variants(config.prompt_variants_file) if config.prompt_variants_file and not replay else None
    if templates and config.prompt_variants_digest and templates_digest(templates) != config.prompt_variants_digest:
        raise ValueError(f"name_responses: {config.prompt_variants_file} changed after the run was planned; run "
                         "again to ask its current templates")
    selected = variant_rows(selected, templates, lang)
    frame = selected[["lang", "prompt_variant", "experiment", "list_source", "list_id", "shuffle", "row",
                      "prompt"]].copy()
    frame.insert(0, "model", model)
    if replay:
        refs = pd.DataFrame({"benchmark": "name", "lang": lang, "row": selected["row"],
                             "prompt_id": selected["experiment"].map(
                                 {name: spec.prompt_id for name, spec in EXPERIMENTS.items()})})
        columns, usage = replayed_columns(backend, refs, context.log.info, f"name_responses {model}/{lang}")
        frame = frame.assign(**columns.set_axis(frame.index))[RESPONSE_COLUMNS]
    else:
        requests = requests_of(selected, lang)
        results: list[GenerationResult] = backend.generate(
            requests, cache=models.cache(), progress=ProgressReporter(f"name_responses {model}/{lang}",
                                                                      context.log.info))
        frame = frame.assign(**result_columns(results))[RESPONSE_COLUMNS]
        usage = generation_metadata(context.log, f"name_responses {model}/{lang}", backend, results)

    notes += sorted(set(frame.loc[frame["outcome"] == "missing", "outcome_message"]))
    for note in notes:
        context.log.warning(f"name_responses {model}/{lang}: {note}")
    errors = int((frame["outcome"] == "error").sum())
    if errors:
        context.log.warning(f"name_responses {model}/{lang}: {errors} answers failed after retries; they are not "
                            "cached and will be asked again on the next materialization")
    rows = frame.groupby(["prompt_variant", "experiment", "list_source", "outcome"]).size().rename(
        "rows").reset_index()
    return dg.Output(frame, data_version=content_version(frame), metadata=table_metadata(
        frame, backend=entry.backend, experiments=dg.MetadataValue.json(list(settings.experiments)),
        rows=dg.MetadataValue.md(rows.to_markdown(index=False)), note=settings.reduction_note(),
        notes=dg.MetadataValue.json(notes), errors=errors, **usage))


def paper_wording(responses: pd.DataFrame) -> pd.DataFrame:
    """The answers to prompt variant 1, the paper's wording: what every table but the variants' reads (a table
    stored before `prompt_variant` existed holds only them)."""
    if "prompt_variant" not in responses.columns:
        return responses
    return responses[responses["prompt_variant"] == PAPER_VARIANT]


class NameJudgeConfig(dg.Config):
    judge: Optional[str] = Field(
        default=None, description=f"Registry key of the LLM extractor (the paper used gpt-4o-mini); default "
                                  f"${JUDGE_ENV_VAR}; unset: no `judge` selections.")


JUDGEMENT_COLUMNS = ["model", *LIST_KEYS, "judge_model", "judge_answer", "judge_outcome"]


@catalogued
@dg.asset(partitions_def=benchmark_partitions(NAME), group_name=GROUP, kinds={"pandas", "parquet"}, pool=JUDGE_POOL)
def name_judgements(
    context: dg.AssetExecutionContext,
    config: NameJudgeConfig,
    name_responses: pd.DataFrame,
    name_candidate_lists: pd.DataFrame,
    models: ModelRegistryResource,
    upstream: SCTCUpstreamResource,
) -> dg.Output[pd.DataFrame]:
    """Optional LLM extraction (paper A.11): the judge is asked which name an answer chose, for the answers that do
    not contain exactly one candidate as written, as the authors' gpt_eval.py did. Empty without a judge."""
    model, lang = model_and_lang(context)
    judge_key = config.judge or os.environ.get(JUDGE_ENV_VAR) or None
    if not judge_key or name_responses.empty:
        return dg.Output(empty_table(JUDGEMENT_COLUMNS, {"row": "int64"}),
                         metadata={"judge": "none", "dagster/row_count": 0})
    answers = paper_wording(name_responses)
    answers = answers[answers["outcome"].isin(SCORABLE_OUTCOMES)].merge(
        name_candidate_lists[LIST_KEYS + ["candidates"]], on=LIST_KEYS, how="inner")
    answers = answers[[needs_judge(text if isinstance(text, str) else None, list(candidates))
                       for text, candidates in zip(answers["response"], answers["candidates"])]]
    judge = models.backend(judge_key, open_upstream=upstream.open)
    requests = [GenerationRequest.user(judge_prompt(list(candidates), text))
                for candidates, text in zip(answers["candidates"], answers["response"])]
    results = judge.generate(requests, cache=models.cache(), progress=ProgressReporter(
        f"name_judgements {model}/{lang} by {judge_key}", context.log.info))
    frame = answers[LIST_KEYS].copy()
    frame.insert(0, "model", model)
    frame["judge_model"] = judge_key
    frame["judge_answer"] = [result.text if result.outcome == "ok" else None for result in results]
    frame["judge_outcome"] = [result.outcome for result in results]
    return dg.Output(frame[JUDGEMENT_COLUMNS], data_version=content_version(frame[JUDGEMENT_COLUMNS]),
                     metadata=table_metadata(frame, judge=judge_key, **usage_metadata(results, judge.pricing())))
