"""Tables 31–33 for any model: the LLM extractor's descriptive words in each model's name explanations (the
extractor's calls, by model × lang), then the top words per region and the top names per descriptor (per model,
scoring only). The published extractions of Baichuan-2 and Qwen-1.5 stay in `name_explanation_words` and
`name_talent_examples`."""

import os
from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import JUDGE_POOL, catalogued, content_version
from sctc_assets.assets.metadata import markdown_table, table_metadata, usage_metadata
from sctc_assets.benchmarks.name import NAME
from sctc_assets.lib.frames import empty_table
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.name import descriptors
from sctc_assets.lib.progress import ProgressReporter
from sctc_assets.assets.partitions import benchmark_partitions, model_and_lang, models_partitions
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "name"
JUDGE_ENV_VAR = NAME.judge.env_var
EXTRACTION_COLUMNS = descriptors.EXPLANATION_KEYS + ["name", "region", "extractor", "extractor_answer",
                                                     "extractor_outcome"]


class NameExplanationConfig(dg.Config):
    judge: Optional[str] = Field(
        default=None, description=f"Registry key of the LLM extractor (the paper used gpt-4o-mini; `sctc run "
                                  f"--name-judge`); default ${JUDGE_ENV_VAR}; unset: no extraction.")
    limit: int = Field(default=descriptors.PAPER_EXPLANATIONS, ge=1,
                       description="At most this many explanations per model × language, the first in row order "
                                   "(the paper: 2,000).")


@catalogued
@dg.asset(partitions_def=benchmark_partitions(NAME), group_name=GROUP, kinds={"pandas", "parquet"}, pool=JUDGE_POOL)
def name_explanation_extractions(
    context: dg.AssetExecutionContext,
    config: NameExplanationConfig,
    name_responses: pd.DataFrame,
    name_selections: pd.DataFrame,
    models: ModelRegistryResource,
    upstream: SCTCUpstreamResource,
) -> dg.Output[pd.DataFrame]:
    """Appendix C.7 for one model × language: the extractor is asked for the adjectives describing the chosen name
    in each valid `main` answer (rules extraction) that says more than the name, through the response cache; the
    raw answers are stored, parsing is `name_descriptor_words`'. Empty without an extractor. Only the answers to the
    paper's wording (prompt variant 1) are read, as `name_selections` reads them."""
    model, lang = model_and_lang(context)
    judge_key = config.judge or os.environ.get(JUDGE_ENV_VAR) or None
    asked = descriptors.explanations_to_ask(name_selections, name_responses, limit=config.limit) if judge_key \
        else pd.DataFrame()
    if asked.empty:
        return dg.Output(empty_table(EXTRACTION_COLUMNS, {"list_id": "int64", "shuffle": "int64", "row": "int64"}),
                         metadata={"extractor": judge_key or "none", "dagster/row_count": 0})
    extractor = models.backend(judge_key, open_upstream=upstream.open)
    requests = [GenerationRequest.user(descriptors.extraction_prompt(name, text))
                for name, text in zip(asked["name"], asked["response"])]
    results = extractor.generate(requests, cache=models.cache(), progress=ProgressReporter(
        f"name_explanation_extractions {model}/{lang} by {judge_key}", context.log.info))
    frame = asked.drop(columns=["response"]).assign(
        extractor=judge_key, extractor_answer=[result.text if result.outcome == "ok" else None for result in results],
        extractor_outcome=[result.outcome for result in results])[EXTRACTION_COLUMNS]
    return dg.Output(frame, data_version=content_version(frame), metadata=table_metadata(
        frame, extractor=judge_key, **usage_metadata(results, extractor.pricing())))


def _layout(table: pd.DataFrame) -> str:
    """Tables 31–32's layout: rank rows, region × language columns, ◆ = only in this region's top 10."""
    if table.empty:
        return "_(no explanations with words)_"
    cells = table.assign(cell=table["word"] + table["only_in_this_region"].map({True: " ◆", False: ""}))
    wide = cells.pivot_table(index=["extractor", "rank"], columns=["region", "lang"], values="cell", aggfunc="first")
    wide.columns = [f"{region} names, {lang}" for region, lang in wide.columns]
    return markdown_table(wide.reset_index(), rows=len(wide))


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def name_descriptor_words(name_explanation_extractions: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Tables 31–32 for one model: the 10 most frequent descriptive words the extractor found in its explanations
    of Mainland and of Taiwanese names, per prompting language and extractor (`extractor`), with the paper's
    highlight (`only_in_this_region`) and how many answers gave words, none (`NA`), an unparseable reply or a
    failed call. Scoring only: never calls a model."""
    table = descriptors.top_words(name_explanation_extractions)
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, preview_rows=20, paper_layout=dg.MetadataValue.md(_layout(table))))


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"})
def name_descriptor_names(name_explanation_extractions: pd.DataFrame,
                          name_descriptor_words: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Table 33's shape for one model: for each word in either region's top 10 (`name_descriptor_words`), the
    three names its explanations most often describe with it, per prompting language and extractor."""
    table = descriptors.top_names(name_explanation_extractions, name_descriptor_words)
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(table, preview_rows=20))
