"""Table 19: the types of incorrect answer of the first trial (prompt variant 1): the authors' GPT-4o-mini
annotations of the 11 paper LLMs, and a registered judge's for any other model (`--judge`, Appendix B.4's prompt)."""

import os

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import JUDGE_POOL, catalogued, content_version
from sctc_assets.assets.metadata import markdown_table, table_metadata, usage_metadata
from sctc_assets.assets.term.responses import JUDGE_ENV_VAR, TermJudgeConfig
from sctc_assets.benchmarks.term import TERM
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.frames import empty_table
from sctc_assets.lib.generation import GenerationRequest, strip_reasoning
from sctc_assets.lib.progress import ProgressReporter
from sctc_assets.lib.sctc_upstream import PAPER_MODELS
from sctc_assets.lib.term.incorrect_types import (first_trial_incorrect, incorrect_type_file, incorrect_type_prompt,
                                                  incorrect_type_shares, live_incorrect_type_shares,
                                                  parse_incorrect_type)
from sctc_assets.lib.term.labelling import ITEM_KEYS
from sctc_assets.lib.term.terms import LANGS
from sctc_assets.lib.upstream_source import UpstreamFileMissing
from sctc_assets.assets.partitions import benchmark_partitions, model_and_lang
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "term"
TYPE_JUDGEMENT_COLUMNS = ITEM_KEYS + ["model", "judge_model", "label_source", "response", "gt", "judge_answer",
                                      "judge_outcome"]
TYPE_JUDGEMENT_DTYPES = {"prompt_variant": "int64", "trial": "int64", "term_id": "int64"}


@catalogued
@dg.asset(partitions_def=benchmark_partitions(TERM), group_name=GROUP, kinds={"pandas", "parquet"}, pool=JUDGE_POOL)
def term_incorrect_type_judgements(
    context: dg.AssetExecutionContext,
    config: TermJudgeConfig,
    term_labels: pd.DataFrame,
    term_prompts: pd.DataFrame,
    models: ModelRegistryResource,
    upstream: SCTCUpstreamResource,
) -> dg.Output[pd.DataFrame]:
    """The judge's raw answers to Appendix B.4's question (a different concept, or the same concept less commonly
    used?) about each incorrect answer of the first trial of prompt variant 1, labelled by the `judge` source where
    the partition has it, else by `rules`; refusals left out. Through the response cache and the budget like
    every call. Empty without a judge, and for replay models (their published annotations are Table 19's rows)."""
    model, lang = model_and_lang(context)
    judge_key = config.judge or os.environ.get(JUDGE_ENV_VAR) or None
    empty = empty_table(TYPE_JUDGEMENT_COLUMNS, TYPE_JUDGEMENT_DTYPES)
    if not judge_key:
        return dg.Output(empty, metadata={"judge": "none", "dagster/row_count": 0})
    if traits(models.entry(model).backend).replays_benchmark("term"):
        return dg.Output(empty, metadata={"judge": judge_key, "dagster/row_count": 0,
                                          "note": "a replay model: Table 19 reads its published annotations"})
    incorrect, source = first_trial_incorrect(term_labels)
    if incorrect.empty:
        return dg.Output(empty, metadata={"judge": judge_key, "label_source": source or "none",
                                          "dagster/row_count": 0})
    answers = incorrect[ITEM_KEYS + ["response"]].merge(term_prompts[ITEM_KEYS + ["gt"]], on=ITEM_KEYS, how="left")
    judge = models.backend(judge_key, open_upstream=upstream.open)
    requests = [GenerationRequest.user(incorrect_type_prompt(strip_reasoning(record["response"]), record["gt"]))
                for record in answers.to_dict("records")]
    results = judge.generate(requests, cache=models.cache(), progress=ProgressReporter(
        f"term_incorrect_type_judgements {model}/{lang} by {judge_key}", context.log.info))
    frame = answers.assign(model=model, judge_model=judge_key, label_source=source,
                           judge_answer=[result.text for result in results],
                           judge_outcome=[result.outcome for result in results])[TYPE_JUDGEMENT_COLUMNS]
    return dg.Output(frame, data_version=content_version(frame), metadata=table_metadata(
        frame, judge=judge_key, label_source=source, **usage_metadata(results, judge.pricing())))


def live_incorrect_types(judgements: pd.DataFrame) -> list[dict]:
    """One Table 19 row per judged model × lang × judge: the judge's answers parsed (a failed call or an answer
    naming no single type counts under `n_other_label`, never guessed)."""
    rows = []
    if judgements.empty:
        return rows
    for (model, lang, judge, source), group in judgements.groupby(["model", "lang", "judge_model", "label_source"],
                                                                  sort=True):
        types = pd.Series([parse_incorrect_type(answer) if outcome == "ok" else None
                           for answer, outcome in zip(group["judge_answer"], group["judge_outcome"])],
                          dtype="Int64")
        rows.append(live_incorrect_type_shares(model, lang, judge, source, types))
    return rows


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def term_incorrect_types(upstream: SCTCUpstreamResource,
                         term_incorrect_type_judgements: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Per model and prompting script: the share (0–100) of the classified incorrect first-trial answers that are
    entirely wrong (type 1) and that use the same concept in an uncommon form (type 2). The 11 paper LLMs: the
    authors' GPT-4o-mini annotations as tab_19.py prints them (Llama-3-8B from its `llama3_*` files); every other
    model the judge of `term_incorrect_type_judgements` classified, its answers parsed here (re-scoring calls no
    model), with the judge named in `judge`."""
    source, rows, missing = upstream.open(), [], []
    for model in PAPER_MODELS:
        for lang in LANGS:
            relative = incorrect_type_file(model, lang)
            try:
                rows.append(incorrect_type_shares(model, lang, source.read_csv(relative, ["label"]),
                                                  source_name=relative))
            except UpstreamFileMissing:
                missing.append(relative)
    live = live_incorrect_types(term_incorrect_type_judgements)
    table = pd.DataFrame(rows + live)
    layout = pd.DataFrame()
    if not table.empty:
        table = table.astype({"source_file": "string"})
        wide = table.pivot_table(index=["model", "judge"], columns="lang",
                                 values=["pct_entirely_wrong", "pct_uncommon_usage"])
        layout = wide.index.to_frame(index=False)
        for lang in LANGS:
            for measure in ("pct_entirely_wrong", "pct_uncommon_usage"):
                if (measure, lang) in wide.columns:
                    layout[f"{lang} {measure[4:]}"] = wide[(measure, lang)].round(2).to_numpy()
        order = {model: position for position, model in enumerate(PAPER_MODELS)}
        layout = (layout.assign(_order=layout["model"].map(order).fillna(len(order)))
                  .sort_values(["_order", "model", "judge"]).drop(columns="_order").reset_index(drop=True))
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, preview_rows=22, paper_layout="Table 19: rows the 11 LLMs (then the judged models); columns "
                                             "Simplified (entirely wrong, uncommon usage), Traditional (entirely "
                                             "wrong, uncommon usage), %",
        table_19=dg.MetadataValue.md(markdown_table(layout, rows=len(layout) or 11)),
        live_models=len({row["model"] for row in live}), missing_files=dg.MetadataValue.json(missing)))
