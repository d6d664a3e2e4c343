"""The assets of one item set's term benchmark (`sctc_assets.benchmarks.item_sets`), made per set so each set is a
lineage of its own: items → prompts → responses (model × variety) → judgements (an optional judge model) → labels →
per-model tables → cross-model tables. Thin: the library loads, prompts, labels and scores; these load, call it,
write and attach metadata."""


import os
from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.automation import SERVED_MODEL_KEY
from sctc_assets.assets.catalog import GENERATION_POOL, JUDGE_POOL, catalogued, content_version
from sctc_assets.assets.metadata import generation_metadata, table_metadata, usage_metadata
from sctc_assets.assets.item_sets.corpus import item_set_corpus_assets
from sctc_assets.benchmarks.item_sets import loaded
from sctc_assets.benchmarks.spec import BenchmarkSpec
from sctc_assets.lib.frames import empty_table
from sctc_assets.lib.generation import GenerationRequest, result_columns, strip_reasoning
from sctc_assets.lib.progress import ProgressReporter
from sctc_assets.lib.term import variety_metrics
from sctc_assets.lib.term.item_sources import ItemSetEntry
from sctc_assets.lib.term.items import ItemSet, item_set_from_frame
from sctc_assets.lib.term.judge import parse_region_verdict, region_judge_label, region_judge_prompt, region_names
from sctc_assets.lib.term.prompts import PAPER_TRIALS, generation_overrides
from sctc_assets.lib.term.region_labels import PAPER_RULE, label_frame, rule_for
from sctc_assets.lib.term.requests import variety_requests
from sctc_assets.lib.term.variety_prompts import build_variety_prompts
from sctc_assets.lib.varieties import load_catalog
from sctc_assets.assets.partitions import benchmark_partitions, models_partitions
from sctc_assets.resources.model_registry import ModelRegistryResource

RESPONSE_COLUMNS = ["model", "variety", "region", "prompt_variant", "concept_id", "trial", "row", "prompt",
                    "response", "outcome", "outcome_message", "input_tokens", "output_tokens", "finish_reason",
                    "cached", "latency_s", "seed", "served_model", "system_fingerprint", "batch_id", "reasoning",
                    "reasoning_tokens"]
LABEL_COLUMNS = ["model", "variety", "region", "prompt_variant", "concept_id", "trial", "response", "outcome",
                 "label_source", "label", "regions_found", "misaligned_forms", "definition_source"]
KINDS = {"pandas", "parquet"}
ITEM_KEYS = ["variety", "prompt_variant", "concept_id", "trial"]
JUDGEMENT_COLUMNS = ["model", "variety", "region", "prompt_variant", "concept_id", "trial", "judge_model",
                     "judge_answer", "judge_outcome", "judge_regions"]
JUDGEMENT_DTYPES = {"prompt_variant": "int64", "trial": "int64"}


class ItemSetResponsesConfig(dg.Config):
    trials: Optional[int] = Field(
        default=None, description=f"Trials per prompt (paper: {PAPER_TRIALS}); default: the model's registry "
                                  "`benchmarks.term.trials`, else the paper's.")
    prompt_variants: Optional[list[int]] = Field(
        default=None, description="Prompt variants 1–3; default: the registry's `benchmarks.term.prompt_variants`, "
                                  "else all.")


class ItemSetJudgeConfig(dg.Config):
    judge: Optional[str] = Field(
        default=None, description="Registry key of the judge model (`sctc run --judge`); default $SCTC_TERM_JUDGE; "
                                  "unset: no `judge` labels.")


def _judged(responses: pd.DataFrame) -> pd.DataFrame:
    """The answers a judge is asked about: answered with text (a refusal or an empty answer is incorrect anyway)."""
    return responses[(responses["outcome"] == "ok")
                     & responses["response"].map(lambda text: bool(strip_reasoning(text)))].reset_index(drop=True)


def judge_label_rows(answered: pd.DataFrame, judgements: pd.DataFrame, item_set: ItemSet) -> tuple[pd.DataFrame, int]:
    """The `judge` labels of the answered rows (ok/refusal) of concepts asked in their variety: a refusal or an
    empty answer is incorrect, any other answer labelled from its verdict (`region_judge_label`); answers without
    a verdict are left out. Returns the rows (label, regions_found, misaligned_forms "") and how many were left out."""
    keyed = judgements[ITEM_KEYS + ["judge_regions"]].assign(concept_id=judgements["concept_id"].astype(str))
    merged = answered.assign(concept_id=answered["concept_id"].astype(str)).merge(
        keyed, on=ITEM_KEYS, how="left", validate="many_to_one")
    misaligned_first = rule_for(item_set) == PAPER_RULE
    labels, found = [], []
    for outcome, response, region, verdict in zip(merged["outcome"].tolist(), merged["response"].tolist(),
                                                  merged["region"].tolist(), merged["judge_regions"].tolist()):
        if outcome != "ok" or not strip_reasoning(response):
            labels.append("incorrect")
            found.append("")
            continue
        regions = None if verdict is None or (not isinstance(verdict, str) and pd.isna(verdict)) else \
            tuple(code for code in str(verdict).split(",") if code)
        label, named = region_judge_label(regions, str(region), misaligned_first)
        labels.append(label)
        found.append(named)
    merged = merged.drop(columns=["judge_regions"]).assign(label=labels, regions_found=found, misaligned_forms="",
                                                          label_source="judge")
    kept = merged[merged["label"].notna()].reset_index(drop=True)
    return kept, len(merged) - len(kept)


def _model_and_variety(context: dg.AssetExecutionContext) -> tuple[str, str]:
    keys = context.partition_key.keys_by_dimension  # type: ignore[union-attr]
    return keys["model"], keys["variety"]


def item_set_assets(spec: BenchmarkSpec, entry: ItemSetEntry) -> list:
    """Every asset of `spec`, the benchmark of the registered set `entry`."""
    prefix, group = spec.name, spec.name
    partitions = benchmark_partitions(spec)

    @catalogued
    @dg.asset(name=f"{prefix}_items", group_name=group, kinds=KINDS)
    def items(context: dg.AssetExecutionContext) -> dg.Output[pd.DataFrame]:
        """The set as its source gives it (extended by its `extend_from` sources), refused with the file, row and
        column at fault before any model is asked; every concept needs a definition (`sctc terms define`)."""
        chosen = loaded(entry)
        frame = chosen.item_set.frame()
        for source, matched in chosen.extensions:
            context.log.info(f"{prefix}_items: {matched} of {len(frame)} concepts matched {source}")
        sources = frame["definition_source"].fillna("").astype(str)
        return dg.Output(frame, data_version=content_version(frame), metadata=table_metadata(
            frame, source=entry.source, varieties=dg.MetadataValue.json(list(chosen.varieties)), cue=entry.cue,
            forms_per_region=dg.MetadataValue.json({region: chosen.item_set.count_forms(region)
                                                    for region in chosen.item_set.regions}),
            extended_from=dg.MetadataValue.json([{"source": source, "concepts_matched": matched}
                                                 for source, matched in chosen.extensions]),
            model_written_definitions=int(sources.str.startswith("model:").sum())))

    @catalogued
    @dg.asset(name=f"{prefix}_prompts", group_name=group, kinds=KINDS, ins={"items": dg.AssetIn(f"{prefix}_items")})
    def prompts(items: pd.DataFrame) -> dg.Output[pd.DataFrame]:
        """The paper's three prompt variants × 15 trials of every concept in each prompting variety (script-only
        conversion; the entry's region cue), except where the concept has no form of the variety's region."""
        item_set = item_set_from_frame(items, entry.name)
        catalog = load_catalog()
        table = build_variety_prompts(item_set, [catalog.variety(code) for code in spec.langs], cue=entry.cue)
        return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
            table, cue=entry.cue, per_variety=dg.MetadataValue.json(
                table.groupby("variety").size().astype(int).to_dict())))

    @catalogued
    @dg.asset(name=f"{prefix}_responses", group_name=group, kinds=KINDS, partitions_def=partitions,
              ins={"prompts": dg.AssetIn(f"{prefix}_prompts")}, pool=GENERATION_POOL,
              deps=[SERVED_MODEL_KEY])
    def responses(context: dg.AssetExecutionContext, config: ItemSetResponsesConfig, prompts: pd.DataFrame,
                  models: ModelRegistryResource) -> dg.Output[pd.DataFrame]:
        """One model's answers in one prompting variety, through its backend and the response cache. Errors after
        retries stay with outcome `error` and are asked again next time."""
        model, variety = _model_and_variety(context)
        model_entry = models.entry(model)
        trials, variants = spec.run_settings(config.model_dump(), model_entry)
        overrides = generation_overrides(model_entry.benchmark_settings("term"))
        selected, requests = variety_requests(prompts, variety, trials, variants, benchmark=prefix)
        backend = models.backend(model, overrides=overrides)
        label = f"{prefix}_responses {model}/{variety}"
        results = backend.generate(requests, cache=models.cache(), progress=ProgressReporter(label, context.log.info))
        frame = selected[["variety", "region", "prompt_variant", "concept_id", "trial", "row", "prompt"]].copy()
        frame.insert(0, "model", model)
        frame = frame.assign(**result_columns(results))[RESPONSE_COLUMNS]
        errors = int((frame["outcome"] == "error").sum())
        if errors:
            context.log.warning(f"{label}: {errors} answers failed after retries; they are not cached and will be "
                                "asked again on the next materialization")
        return dg.Output(frame, data_version=content_version(frame), metadata=table_metadata(
            frame, backend=model_entry.backend, trials=trials, prompt_variants=dg.MetadataValue.json(variants),
            overrides=dg.MetadataValue.json(overrides), errors=errors,
            **generation_metadata(context.log, label, backend, results)))

    @catalogued
    @dg.asset(name=f"{prefix}_judgements", group_name=group, kinds=KINDS, partitions_def=partitions,
              ins={"responses": dg.AssetIn(f"{prefix}_responses"), "items": dg.AssetIn(f"{prefix}_items")},
              pool=JUDGE_POOL)
    def judgements(context: dg.AssetExecutionContext, config: ItemSetJudgeConfig, responses: pd.DataFrame,
                   items: pd.DataFrame, models: ModelRegistryResource) -> dg.Output[pd.DataFrame]:
        """Optional judge verdicts: for each answer with text, which region's form it gives, the judge shown every
        region's forms (`region_judge_prompt`), through the response cache. Empty when no judge is configured;
        the `judge` labels of `_labels` come from them."""
        model, variety = _model_and_variety(context)
        judge_key = config.judge or (os.environ.get(spec.judge.env_var) if spec.judge else None) or None
        asked = _judged(responses) if judge_key else responses.iloc[0:0]
        if asked.empty:
            return dg.Output(empty_table(JUDGEMENT_COLUMNS, JUDGEMENT_DTYPES), metadata={
                "judge": judge_key or "none", "dagster/row_count": 0})
        catalog = load_catalog()
        concepts = {concept.concept_id: concept for concept in item_set_from_frame(items, entry.name).concepts}
        prompting = catalog.variety(variety)
        forms = [concepts[str(concept_id)].forms for concept_id in asked["concept_id"]]
        requests = [GenerationRequest.user(region_judge_prompt(prompt, concept_forms, prompting, response, catalog))
                    for prompt, concept_forms, response in zip(asked["prompt"], forms, asked["response"])]
        judge = models.backend(judge_key)
        label = f"{prefix}_judgements {model}/{variety} by {judge_key}"
        results = judge.generate(requests, cache=models.cache(), progress=ProgressReporter(label, context.log.info))
        verdicts = [parse_region_verdict(result.text, region_names(catalog, [code for code, listed
                                                                             in concept_forms.items() if listed]))
                    if result.outcome == "ok" else None for result, concept_forms in zip(results, forms)]
        frame = asked[["variety", "region", "prompt_variant", "concept_id", "trial"]].copy()
        frame.insert(0, "model", model)
        frame = frame.assign(judge_model=judge_key, judge_answer=[result.text for result in results],
                             judge_outcome=[result.outcome for result in results],
                             judge_regions=[None if verdict is None else ",".join(verdict) for verdict in verdicts])
        frame = frame[JUDGEMENT_COLUMNS]
        return dg.Output(frame, data_version=content_version(frame), metadata=table_metadata(
            frame, judge=judge_key, unparsed_verdicts=int(frame["judge_regions"].isna().sum()),
            **usage_metadata(results, judge.pricing())))

    @catalogued
    @dg.asset(name=f"{prefix}_labels", group_name=group, kinds=KINDS, partitions_def=partitions,
              ins={"responses": dg.AssetIn(f"{prefix}_responses"), "items": dg.AssetIn(f"{prefix}_items"),
                   "judgements": dg.AssetIn(f"{prefix}_judgements")})
    def labels(responses: pd.DataFrame, items: pd.DataFrame, judgements: pd.DataFrame) -> dg.Output[pd.DataFrame]:
        """The `rules` labels for N regions: correct (a form of the prompted variety's region), misaligned (only
        other regions' forms; `regions_found` names them all), incorrect; forms compared across scripts, a form
        shared by regions counts as each one's, a refusal is incorrect, errors are left out. Never calls a model.
        With judge verdicts (`_judgements`), the `judge` labels too: correct when the judge names the prompted
        region, misaligned when it names only others, incorrect when none; answers without a verdict left out."""
        item_set = item_set_from_frame(items, entry.name)
        answered = responses[responses["outcome"].isin(["ok", "refusal"])].reset_index(drop=True)
        labelled = label_frame(answered, item_set, load_catalog(), answered=True)
        asked = labelled["label"].notna()
        rules = labelled[asked].reset_index(drop=True).assign(label_source="rules")
        frames, without_verdict = [rules], 0
        if not judgements.empty:
            judged, without_verdict = judge_label_rows(answered[asked.to_numpy()].reset_index(drop=True), judgements,
                                                       item_set)
            frames.append(judged)
        frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else rules
        sources = dict(zip(items["concept_id"].astype(str), items["definition_source"].fillna("").astype(str)))
        frame = frame.assign(definition_source=frame["concept_id"].astype(str).map(sources).fillna(""))[LABEL_COLUMNS]
        counts = {source: block.groupby("label").size().astype(int).to_dict()
                  for source, block in frame.groupby("label_source", sort=False)} if not frame.empty else {}
        return dg.Output(frame, data_version=content_version(frame), metadata=table_metadata(
            frame, label_distribution=dg.MetadataValue.json(counts),
            excluded_errors=int(len(responses) - len(answered)),
            judge_left_out=without_verdict))

    @catalogued
    @dg.asset(name=f"{prefix}_by_concept", group_name=group, kinds=KINDS, partitions_def=models_partitions,
              ins={"labels": dg.AssetIn(f"{prefix}_labels")})
    def by_concept(labels: pd.DataFrame) -> dg.Output[pd.DataFrame]:
        """Label counts over the trials per concept × variety × prompt variant."""
        frame = variety_metrics.by_concept(labels)
        return dg.Output(frame, metadata=table_metadata(frame))

    @catalogued
    @dg.asset(name=f"{prefix}_rates", group_name=group, kinds=KINDS, partitions_def=models_partitions,
              ins={"labels": dg.AssetIn(f"{prefix}_labels")})
    def rates(labels: pd.DataFrame) -> dg.Output[pd.DataFrame]:
        """Correct, misaligned (overall and by the region answered) and incorrect rates per variety and prompt
        variant with Wilson 95 % intervals; model-written definitions separately when the set has any."""
        frame = variety_metrics.variety_rates(labels)
        return dg.Output(frame, metadata=table_metadata(frame, preview_rows=24))

    @catalogued
    @dg.asset(name=f"{prefix}_matrix", group_name=group, kinds=KINDS, partitions_def=models_partitions,
              ins={"labels": dg.AssetIn(f"{prefix}_labels"), "items": dg.AssetIn(f"{prefix}_items")})
    def matrix(labels: pd.DataFrame, items: pd.DataFrame) -> dg.Output[pd.DataFrame]:
        """Prompted variety × answered region: the share of answers holding each region's form (`none`: no
        region's form, refusals included)."""
        regions = [column.removeprefix("term_") for column in items.columns if column.startswith("term_")]
        frame = variety_metrics.variety_region_matrix(labels, regions)
        return dg.Output(frame, metadata=table_metadata(frame, preview_rows=24))

    @catalogued
    @dg.asset(name=f"{prefix}_contrasts", group_name=group, kinds=KINDS,
              ins={"by_concept": dg.AssetIn(f"{prefix}_by_concept")})
    def contrasts(by_concept: pd.DataFrame) -> dg.Output[pd.DataFrame]:
        """Every pair of varieties per model and prompt variant, on the correct and the misaligned rate, paired by
        concept (paired t and Wilcoxon over the concepts), BH-adjusted across the family."""
        frame = variety_metrics.variety_contrasts(by_concept, spec.langs)
        return dg.Output(frame, metadata=table_metadata(frame, preview_rows=20))

    @catalogued
    @dg.asset(name=f"{prefix}_power", group_name=group, kinds=KINDS,
              ins={"by_concept": dg.AssetIn(f"{prefix}_by_concept")})
    def power(by_concept: pd.DataFrame) -> dg.Output[pd.DataFrame]:
        """The smallest variety difference the design run can detect, and the concepts a 5 or 10 pp one needs."""
        frame = variety_metrics.variety_power(by_concept, spec.langs)
        return dg.Output(frame, metadata=table_metadata(frame))

    return [items, prompts, responses, judgements, labels, by_concept, rates, matrix, contrasts, power,
            *(catalogued(assets_def) for assets_def in item_set_corpus_assets(prefix, group))]
