"""What the term choices are related to (#41 point 5): term_misalignment_by_term + the corpus counts + the model's
tokenizer → term_bias_factors, per model. No model is called."""

from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.assets.bias_tokenizers import model_tokenizer
from sctc_assets.lib import bias_factors as bf
from sctc_assets.lib.corpus.tables import upstream_term_counts
from sctc_assets.lib.varieties import SIMPLIFIED, TRADITIONAL
from sctc_assets.assets.partitions import models_partitions
from sctc_assets.resources.io_manager import OPTIONAL_INPUT
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "term"
LABEL_PREFERENCE = ("upstream", "judge", "lexicon", "rules")


class TermBiasFactorsConfig(dg.Config):
    label_source: Optional[str] = Field(default=None, description="Label source whose counts are regressed "
                                                                  "(default: the first the model has of upstream, "
                                                                  "judge, lexicon, rules).")


def term_corpus_counts(corpus_term_counts: pd.DataFrame, published: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The project's counts (`count_source = project`, complete corpora) where there are any, else the authors'
    counts of the paper's nine corpora."""
    if not corpus_term_counts.empty and "count_source" in corpus_term_counts.columns:
        project = corpus_term_counts[(corpus_term_counts["count_source"] == "project")
                                     & corpus_term_counts["complete"].fillna(False).astype(bool)]
        if not project.empty:
            return project, "project"
    return published, "upstream"


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"},
          # optional: `sctc run --benchmarks term` without a corpus run uses the authors' published counts
          ins={"corpus_term_counts": dg.AssetIn(metadata={OPTIONAL_INPUT: True})})
def term_bias_factors(context: dg.AssetExecutionContext, config: TermBiasFactorsConfig,
                      term_misalignment_by_term: pd.DataFrame, regional_terms: pd.DataFrame,
                      corpus_term_counts: pd.DataFrame, models: ModelRegistryResource,
                      upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Per prompting language and outcome (`correct`, `misaligned`): a trial-level logistic GEE clustered by term
    of the outcome on the z-scored Mainland/Taiwan ratios of the term's corpus frequency (summed over the corpora:
    the project's complete ones, else the authors' nine) and of its token counts under the model's tokenizer (the
    tokenizer registry's entry for a paper model, else the backend's `token_counter()`; left out where neither is
    known); coefficients per SD with 95 % intervals, BH across the model's table, and each factor's share of the
    S − T gap (the part of the S vs T log-odds ratio that vanishes at the factor's parity; `lib.bias_factors`).
    The term task has no log-probabilities of the two forms, so that factor is never entered here;
    `factors_left_out` says, per row, which factors the fit lacked and why."""
    model = context.partition_key
    by_term = term_misalignment_by_term
    present = set(by_term["label_source"]) if not by_term.empty else set()
    source = config.label_source or next((name for name in LABEL_PREFERENCE if name in present), "rules")
    published, missing = upstream_term_counts(upstream.open(), regional_terms)
    counts, count_source = term_corpus_counts(corpus_term_counts, published)
    factors = pd.DataFrame(index=regional_terms["term_id"].to_numpy())
    factors["corpus"] = bf.term_corpus_ratios(counts)
    missing = {"logprob": "the term task has no log-probabilities of the two forms"}
    if counts.empty:
        missing["corpus"] = "no corpus counts (neither the project's complete ones nor the authors')"
    tokenizer, encode, why = model_tokenizer(model, models, upstream)
    if encode is not None:
        factors["tokens"] = bf.term_token_ratios(regional_terms, encode)
    else:
        missing["tokens"] = f"no tokenizer: {why}"
        context.log.info(f"term_bias_factors {model}: no tokenizer ({why}); the token factor is left out")
    factors = factors.dropna(axis=1, how="all")
    table = bf.term_bias_factors(by_term, factors, model=model, label_source=source, tokenizer=tokenizer,
                                 simplified=SIMPLIFIED.code, traditional=TRADITIONAL.code, missing=missing)
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, preview_rows=len(table), label_source=source, count_source=count_source,
        tokenizer=tokenizer or f"none ({why})", log_probabilities="none for the term task (factor left out)",
        upstream_files_missing=dg.MetadataValue.json(missing)))
