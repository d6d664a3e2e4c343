"""What the name choices are related to (#41 point 5): name_selections + the candidate lists + corpus counts, token
counts and last-name log-probabilities of the listed names → name_bias_factors, per model. No model is called."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.bias_tokenizers import model_tokenizer
from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib import bias_factors as bf
from sctc_assets.lib.corpus.tables import upstream_name_counts
from sctc_assets.lib.name import metrics
from sctc_assets.lib.varieties import SIMPLIFIED, TRADITIONAL
from sctc_assets.assets.partitions import models_partitions
from sctc_assets.resources.io_manager import OPTIONAL_INPUT
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "name"


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"},
          # optional: `sctc run --benchmarks name` without a corpus run uses the authors' c4 counts
          ins={"corpus_name_counts": dg.AssetIn(metadata={OPTIONAL_INPUT: True})})
def name_bias_factors(context: dg.AssetExecutionContext, name_selections: pd.DataFrame,
                      name_candidate_lists: pd.DataFrame, regional_names: pd.DataFrame,
                      last_name_logprobs: pd.DataFrame, corpus_name_counts: pd.DataFrame,
                      models: ModelRegistryResource, upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Per prompting language, experiment and extraction source: a logistic GEE clustered by candidate list of
    choosing the Mainland name (valid answers) on the list's z-scored Mainland-vs-Taiwanese factors: the c4 counts
    of its names (the project's once complete, else the authors'), their token counts under the model's tokenizer,
    and their raw last-name log-probabilities (`last_name_logprobs`, where the model has them); coefficients per SD
    with 95 % intervals, BH across the model's table, each factor's share of the S − T gap (`lib.bias_factors`).
    Answers to lists whose composition is unknown (the shared upstream copy lacks the authors' lists) are left
    out; `factors_entered` says which factors a row's fit had, `factors_left_out` which it lacked and why."""
    model = context.partition_key
    published, missing = upstream_name_counts(upstream.open(), regional_names)
    counts, count_source = metrics.table22_counts(corpus_name_counts, published)
    values = {"corpus": counts.groupby("name")["records_containing"].sum()} if not counts.empty else {}
    tokenizer, encode, why = model_tokenizer(model, models, upstream)
    if encode is not None:
        values["tokens"] = pd.Series({name: len(encode(name)) for name in regional_names["name"]}, dtype=float)
    raw = last_name_logprobs[last_name_logprobs["kind"] == "raw"] if not last_name_logprobs.empty else pd.DataFrame()
    if not raw.empty:
        values["logprob"] = raw.groupby("name")["logprob"].mean()
    lists = name_candidate_lists
    factors = bf.list_factors(lists, values) if not lists.empty else pd.DataFrame()
    missing = {} if encode is not None else {"tokens": f"no tokenizer: {why}"}
    if raw.empty:
        missing["logprob"] = "no last-name log-probabilities for this model"
    if "corpus" not in values:
        missing["corpus"] = "no c4 counts of the names"
    table = bf.name_bias_factors(name_selections, factors, model=model, tokenizer=tokenizer,
                                 simplified=SIMPLIFIED.code, traditional=TRADITIONAL.code, missing=missing) \
        if not factors.empty and not name_selections.empty else pd.DataFrame(columns=bf.NAME_COLUMNS)
    notes = [] if encode is not None else [f"no tokenizer: {why}"]
    if raw.empty:
        notes.append("no last-name log-probabilities for this model")
    if table.empty:
        notes.append("no answers to a candidate list whose names are known")
    for note in notes:
        context.log.info(f"name_bias_factors {model}: {note}")
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, preview_rows=min(len(table), 40), count_source=count_source, tokenizer=tokenizer or "none",
        notes=dg.MetadataValue.json(notes), upstream_files_missing=dg.MetadataValue.json(missing)))
