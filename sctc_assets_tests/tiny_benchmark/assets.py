"""The tiny benchmark's assets: thin (load, call the library, write, attach metadata), each catalogued from the
spec; the answers go through the model's backend and the response cache like every benchmark's."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.automation import SERVED_MODEL_KEY
from sctc_assets.assets.catalog import GENERATION_POOL, catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.generation import result_columns
from sctc_assets.assets.partitions import benchmark_partitions, model_and_lang, models_partitions
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets_tests.tiny_benchmark import SPEC, lib

GROUP = "tiny"


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas"})
def tiny_prompts() -> pd.DataFrame:
    return lib.prompt_table()


@catalogued
@dg.asset(partitions_def=benchmark_partitions(SPEC), group_name=GROUP, kinds={"pandas"}, pool=GENERATION_POOL,
          deps=[SERVED_MODEL_KEY])
def tiny_responses(context: dg.AssetExecutionContext, tiny_prompts: pd.DataFrame,
                   models: ModelRegistryResource) -> dg.Output[pd.DataFrame]:
    model, lang = model_and_lang(context)
    selected = tiny_prompts[tiny_prompts["lang"] == lang].reset_index(drop=True)
    results = models.backend(model).generate(lib.requests(selected), cache=models.cache())
    columns = {key: value for key, value in result_columns(results).items() if key in ("response", "outcome")}
    frame = selected[["lang", "row", "prompt"]].assign(model=model, **columns)[
        ["model", "lang", "row", "prompt", "response", "outcome"]]
    return dg.Output(frame, data_version=content_version(frame), metadata=table_metadata(frame))


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas"})
def tiny_scores(tiny_responses: pd.DataFrame, tiny_prompts: pd.DataFrame) -> pd.DataFrame:
    return lib.scores(tiny_responses, tiny_prompts)


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas"})
def tiny_summary(tiny_scores: pd.DataFrame) -> pd.DataFrame:
    return lib.summary(tiny_scores)
