"""Per-model answers to the name prompts (generation) and the optional LLM extractor's verdicts, by model × lang."""

import os
from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata, usage_metadata
from sctc_assets.assets.partition_ranges import serves_partition_ranges
from sctc_assets.lib.generation import GenerationRequest, GenerationResult, result_columns
from sctc_assets.lib.name.candidates import EXPERIMENTS, LIST_KEYS, LIST_SOURCES, RunSettings, run_settings
from sctc_assets.lib.name.extraction import judge_prompt
from sctc_assets.lib.name.selections import SCORABLE_OUTCOMES, needs_judge
from sctc_assets.lib.progress import ProgressReporter
from sctc_assets.lib.sctc_upstream import name_candidate_file
from sctc_assets.partitions import model_and_lang, name_partitions
from sctc_assets.resources.registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "name"
JUDGE_ENV_VAR = "SCTC_NAME_JUDGE"
RESPONSE_COLUMNS = ["model", "lang", "experiment", "list_source", "list_id", "shuffle", "row", "prompt", "response",
                    "outcome", "outcome_message", "input_tokens", "output_tokens", "finish_reason", "cached",
                    "latency_s"]


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


def prompts_to_ask(name_prompts: pd.DataFrame, lang: str, settings: RunSettings, *,
                   replay: bool) -> tuple[pd.DataFrame, list[str]]:
    """The prompt rows one model answers, and notes. A replay answers the authors' rows even where the upstream
    copy lacks their lists (its prompt is then unknown)."""
    frames, notes = [], []
    in_lang = name_prompts[name_prompts["lang"] == lang]
    for name in settings.experiments:
        spec = EXPERIMENTS[name]
        published = in_lang[(in_lang["experiment"] == name) & (in_lang["list_source"] == "upstream")]
        source = "upstream" if replay else settings.list_source or ("upstream" if not published.empty else "generated")
        if replay and settings.list_source == "generated":
            notes.append(f"{name}: a replay only has answers to the authors' lists; list_source 'generated' ignored")
        chosen = in_lang[(in_lang["experiment"] == name) & (in_lang["list_source"] == source)]
        if chosen.empty and source == "upstream":
            if not replay:
                raise ValueError(f"name_responses: no authors' lists for {name} "
                                 f"({name_candidate_file(spec.prompt_id)} is missing); use list_source 'generated'")
            notes.append(f"{name}: prompts unknown ({name_candidate_file(spec.prompt_id)} is missing)")
            lists, shuffles = settings.counts(name)
            grid = pd.MultiIndex.from_product([range(lists), range(shuffles)], names=["list_id", "shuffle"])
            chosen = grid.to_frame(index=False).assign(
                experiment=name, list_source="upstream", lang=lang, prompt=None,
                row=lambda frame: frame["list_id"] * spec.shuffles + frame["shuffle"])
        # Rows that repeat a prompt are separate samples, as in the paper: the occurrence number over the full
        # design keeps them apart, and stays the same whatever --name-lists/--name-shuffles select.
        chosen = chosen.sort_values("row", kind="stable")
        chosen = chosen.assign(occurrence=chosen.groupby("prompt", dropna=False).cumcount())
        if settings.lists is not None:
            chosen = chosen[chosen["list_id"] < settings.lists]
        if settings.shuffles is not None:
            chosen = chosen[chosen["shuffle"] < settings.shuffles]
        frames.append(chosen)
    selected = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=name_prompts.columns)
    return selected.reset_index(drop=True), notes


@catalogued
@dg.asset(partitions_def=name_partitions, group_name=GROUP, kinds={"pandas", "parquet"},
          backfill_policy=dg.BackfillPolicy.single_run())
@serves_partition_ranges
def name_responses(
    context: dg.AssetExecutionContext,
    config: NameResponsesConfig,
    name_prompts: pd.DataFrame,
    models: ModelRegistryResource,
    upstream: SCTCUpstreamResource,
) -> dg.Output[pd.DataFrame]:
    """One model's answers to the name prompts of one language, through its backend and the response cache
    (replay models: the paper's published answers; rows whose answer file the upstream copy lacks are kept with
    outcome `missing`, so the published extraction still covers them)."""
    model, lang = model_and_lang(context)
    entry = models.entry(model)
    settings = run_settings(config.experiments, config.lists, config.shuffles, config.list_source,
                            entry.benchmark_settings("name"), where=f"name_responses: model {model!r} (run config, "
                                                                   "else registry benchmarks.name)")
    selected, notes = prompts_to_ask(name_prompts, lang, settings, replay=entry.backend == "replay")
    requests = [GenerationRequest.user(prompt if isinstance(prompt, str) else "", trial=int(repeat), benchmark="name",
                                       lang=lang, prompt_id=EXPERIMENTS[name].prompt_id, row=int(row))
                for prompt, repeat, name, row in zip(selected["prompt"], selected["occurrence"],
                                                     selected["experiment"], selected["row"])]
    backend = models.backend(model, open_upstream=upstream.open)
    results: list[GenerationResult] = backend.generate(
        requests, cache=models.cache(), progress=ProgressReporter(f"name_responses {model}/{lang}", context.log.info))

    frame = selected[["lang", "experiment", "list_source", "list_id", "shuffle", "row", "prompt"]].copy()
    frame.insert(0, "model", model)
    frame = frame.assign(**result_columns(results))[RESPONSE_COLUMNS]

    notes += sorted(set(frame.loc[frame["outcome"] == "missing", "outcome_message"]))
    for note in notes:
        context.log.warning(f"name_responses {model}/{lang}: {note}")
    errors = int((frame["outcome"] == "error").sum())
    if errors:
        context.log.warning(f"name_responses {model}/{lang}: {errors} answers failed after retries; they are not "
                            "cached and will be asked again on the next materialization")
    rows = frame.groupby(["experiment", "list_source", "outcome"]).size().rename("rows").reset_index()
    return dg.Output(frame, data_version=content_version(frame), metadata=table_metadata(
        frame, backend=entry.backend, experiments=dg.MetadataValue.json(list(settings.experiments)),
        rows=dg.MetadataValue.md(rows.to_markdown(index=False)), note=settings.reduction_note(),
        notes=dg.MetadataValue.json(notes), errors=errors, **usage_metadata(results, backend.pricing())))


class NameJudgeConfig(dg.Config):
    judge: Optional[str] = Field(
        default=None, description=f"Registry key of the LLM extractor (the paper used gpt-4o-mini); default "
                                  f"${JUDGE_ENV_VAR}; unset: no `judge` selections.")


JUDGEMENT_COLUMNS = ["model", *LIST_KEYS, "judge_model", "judge_answer", "judge_outcome"]


@catalogued
@dg.asset(partitions_def=name_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
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
        return dg.Output(pd.DataFrame(columns=JUDGEMENT_COLUMNS), metadata={"judge": "none", "dagster/row_count": 0})
    answers = name_responses[name_responses["outcome"].isin(SCORABLE_OUTCOMES)].merge(
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
