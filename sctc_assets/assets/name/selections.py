"""The selected name of every answer, from every extraction source, for one model × lang partition."""

import dagster as dg
import pandas as pd

from sctc_assets.benchmarks.name import NAME
from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.name.responses import paper_wording
from sctc_assets.assets.metadata import markdown_table, table_metadata
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.generation import stored_text
from sctc_assets.lib.name.candidates import EXPERIMENTS
from sctc_assets.lib.name.selections import (
    SELECTION_COLUMNS, agreement, compared_with_published, judge_selections, rules_selections, upstream_selections,
)
from sctc_assets.lib.sctc_upstream import name_response_file
from sctc_assets.lib.upstream_source import UpstreamFileMissing, UpstreamSource
from sctc_assets.assets.partitions import benchmark_partitions, model_and_lang
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "name"
FINAL_COLUMNS = ("extracted_name", "refine_flag", "region")
EXAMPLES_PER_KIND = 3


def published_selections(source: UpstreamSource, responses: pd.DataFrame, *, model: str, upstream_name: str,
                         lang: str) -> tuple[pd.DataFrame, list[str]]:
    """The authors' extraction of the rows a replay was asked, and the final files the upstream copy lacks."""
    frames, missing = [], []
    for name, asked in responses.groupby("experiment")["row"]:  # the rows alone: not the prompts and answers
        spec = EXPERIMENTS[name]
        relative = name_response_file(upstream_name, lang, spec.prompt_id, stage="final")
        try:
            final = source.read_csv(relative, FINAL_COLUMNS)
        except UpstreamFileMissing:
            missing.append(relative)
            continue
        frames.append(upstream_selections(final, model=model, lang=lang, experiment=name, shuffles=spec.shuffles,
                                          rows=set(asked), source_name=relative))
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SELECTION_COLUMNS)), missing


def disagreement_examples(compared: pd.DataFrame, responses: pd.DataFrame) -> str:
    """A few answers per experiment and kind where the rules and the published extraction differ (`compared`:
    `compared_with_published` of the selections)."""
    differing = compared
    if not differing.empty:
        differing = differing[differing["disagreement"] != "none"]
    if differing.empty:
        return "_(none)_"
    texts = responses.set_index(["experiment", "row"])["response"]
    picked = differing.groupby(["experiment", "disagreement"]).head(EXAMPLES_PER_KIND).copy()
    picked["answer"] = [(stored_text(texts.get((experiment, row))) or "")[:160] for experiment, row
                        in zip(picked["experiment"], picked["row"])]
    columns = ["experiment", "row", "disagreement", "status", "rule", "selected_name", "selected_name_published",
               "answer"]
    return markdown_table(picked[columns], rows=len(picked), width=160)


@catalogued
@dg.asset(partitions_def=benchmark_partitions(NAME), group_name=GROUP, kinds={"pandas", "parquet"})
def name_selections(
    context: dg.AssetExecutionContext,
    name_responses: pd.DataFrame,
    name_candidate_lists: pd.DataFrame,
    name_judgements: pd.DataFrame,
    regional_names: pd.DataFrame,
    models: ModelRegistryResource,
    upstream: SCTCUpstreamResource,
) -> dg.Output[pd.DataFrame]:
    """Long table `model, lang, experiment, list_source, list_id, shuffle, row, extraction_source, candidate_scope,
    status, rule, selected_name, region, script_variant_of`.

    Sources: `rules` (the deterministic extractor; status valid / multiple / out_of_list /
    refusal/insufficient_information / empty; an answer naming a candidate only in the other script is out of list
    with `script_variant_of`), `upstream` (replay models: the authors' extracted names and regions) and `judge`
    (when `name_judgements` has verdicts). Scoring never calls a model. Only the answers to prompt variant 1 (the
    paper's wording) count here; `name_variant_rates` scores the others."""
    model, lang = model_and_lang(context)
    name_responses = paper_wording(name_responses)  # the variants' answers are scored by name_variant_rates
    frames = [rules_selections(name_responses, name_candidate_lists, regional_names)] if not name_responses.empty \
        else []
    notes: list[str] = []
    entry = models.entry(model)
    if traits(entry.backend).replays_benchmark("name") and not name_responses.empty:
        published, missing = published_selections(upstream.open(), name_responses, model=model, lang=lang,
                                                  upstream_name=str(entry.settings["upstream_name"]))
        notes += [f"upstream extraction skipped: file missing {relative}" for relative in missing]
        frames.append(published)
    if not name_judgements.empty:
        frames.append(judge_selections(name_responses, name_candidate_lists, name_judgements))
    for note in notes:
        context.log.warning(f"name_selections {model}/{lang}: {note}")
    frames = [frame for frame in frames if not frame.empty]
    selections = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SELECTION_COLUMNS)
    statuses = (selections.groupby(["experiment", "extraction_source", "status"]).size().rename("answers")
                .reset_index()) if not selections.empty else pd.DataFrame()
    compared = compared_with_published(selections) if not selections.empty else pd.DataFrame()
    agreed = agreement(selections, compared)
    return dg.Output(selections, data_version=content_version(selections), metadata=table_metadata(
        selections, statuses=dg.MetadataValue.md(markdown_table(statuses, rows=60)),
        agreement_with_published=dg.MetadataValue.md(markdown_table(agreed, rows=20)),
        disagreement_examples=dg.MetadataValue.md(disagreement_examples(compared, name_responses)),
        notes=dg.MetadataValue.json(notes)))
