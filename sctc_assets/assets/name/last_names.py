"""Preferences for specific characters (Section 4.5, Appendix C.8): regional_names → last_name_pairs →
last_name_logprobs (per model) → last_name_agreement (Table 35), last_name_region_tests (Table 36)."""

from typing import Literal, Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import GENERATION_POOL, catalogued, content_version
from sctc_assets.assets.metadata import markdown_table, table_metadata, upstream_comparison_result
from sctc_assets.backends.replay import ReplayBackend
from sctc_assets.lib.name import last_names as ln
from sctc_assets.lib.progress import ProgressReporter
from sctc_assets.lib.upstream_source import UpstreamFileMissing, UpstreamSource
from sctc_assets.assets.partitions import models_partitions
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "name"
FRAGMENT_START = "{'firstname'"


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def last_name_pairs(regional_names: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Names sharing given name, popularity decile and region (Table 34, grouped as `tab_34.py` does), paired
    within each group and shown in both orders, with the conditioned prompt per language: 98 prompts per language
    in the upstream files' order. `prompt` ends with the pair's given name (the paper's method, scored by default);
    `published_prompt` is the upstream file's text, whose fragment names the first pair's given name on every row."""
    groups = ln.last_name_groups(regional_names)
    pairs = ln.last_name_pairs(regional_names)
    table_34 = groups.assign(names=groups["names"].map("、".join))[["given_name", "decile", "region", "names"]]
    return dg.Output(pairs, data_version=content_version(pairs), metadata=table_metadata(
        pairs, groups=len(groups), pairs_per_lang=int(pairs["pair"].nunique()),
        table_34=dg.MetadataValue.md(markdown_table(table_34, rows=len(table_34))),
    ))


@dg.asset_check(asset=last_name_pairs, description="published_prompt equals the upstream prompt files row by row, "
                                                    "and prompt differs from them only in the fragment's given name.")
def last_name_prompts_match_upstream(last_name_pairs: pd.DataFrame,
                                     upstream: SCTCUpstreamResource) -> dg.AssetCheckResult:
    source = upstream.open()
    compared, mismatches, missing, fragment_differs = 0, [], [], 0
    for lang, block in last_name_pairs.groupby("lang", sort=False):
        relative = ln.prompt_file(lang)
        try:
            published = source.read_csv(relative, ["prompt"])["prompt"].tolist()
        except UpstreamFileMissing:
            missing.append(relative)
            continue
        compared += 1
        block = block.sort_values("row")
        if len(block) != len(published):
            mismatches.append(f"{relative}: {len(published)} rows, ours {len(block)}")
            continue
        for row, ours, scored, theirs in zip(block["row"], block["published_prompt"], block["prompt"], published):
            if ours != theirs or scored.split(FRAGMENT_START)[0] != theirs.split(FRAGMENT_START)[0]:
                mismatches.append(f"{relative} row {row}")
            fragment_differs += scored != theirs
    return upstream_comparison_result(compared, mismatches, missing,
                                      scored_prompts_with_their_own_given_name=fragment_differs)


class LastNameLogprobsConfig(dg.Config):
    prompt_column: Literal["prompt", "published_prompt"] = Field(
        default="prompt", description="Conditioned prompts to score: `prompt` (each pair's given name in the "
                                      "fragment, as the paper describes) or `published_prompt` (as the upstream files).")
    langs: Optional[list[str]] = Field(default=None, description="Prompting languages to score (default: the "
                                                                 "registry's `benchmarks.last_names.langs`, else all).")
    pairs: Optional[int] = Field(default=None, description="Pairs to score, drawn with `seed` (default: registry "
                                                           "`benchmarks.last_names.pairs`, else all 49).")
    names: Optional[int] = Field(default=None, description="Names per region with raw scores, drawn with `seed`, plus "
                                                           "the pairs' names (default: registry, else all 352 names).")
    seed: Optional[int] = Field(default=None, description=f"Seed of the draws (default: registry, else "
                                                          f"{ln.DEFAULT_SEED}).")


def _published(source: UpstreamSource, upstream_name: str, regional_names: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The authors' published log-probabilities of one model and the files the upstream copy lacks."""
    raw_file = ln.published_raw_file(upstream_name)
    raw = source.read_csv(raw_file, ["name", "prob"])
    conditioned, missing = {}, []
    for lang in ln.LANGS:
        relative = ln.published_conditioned_file(upstream_name, lang)
        try:
            conditioned[lang] = source.read_csv(relative, ["firstname", "lastname", "prob"])
        except UpstreamFileMissing:
            missing.append(relative)
    return ln.published_logprobs(raw, conditioned, regional_names), missing


def _skipped(context: dg.AssetExecutionContext, reason: str, metadata: dict) -> dg.Output[pd.DataFrame]:
    context.log.warning(f"last_name_logprobs {context.partition_key}: skipped, {reason}")
    return dg.Output(pd.DataFrame(columns=ln.LOGPROB_COLUMNS),
                     metadata={**metadata, "note": f"skipped: {reason}", "dagster/row_count": 0})


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet"}, pool=GENERATION_POOL)
def last_name_logprobs(
    context: dg.AssetExecutionContext,
    config: LastNameLogprobsConfig,
    last_name_pairs: pd.DataFrame,
    regional_names: pd.DataFrame,
    models: ModelRegistryResource,
    upstream: SCTCUpstreamResource,
) -> dg.Output[pd.DataFrame]:
    """Log-probabilities of the last names (teacher forcing): `raw` after `{'firstname': <given name>, 'lastname': `
    alone, for every name; `conditioned` after each name-choice prompt, for both names of its pair. Local models
    (backends with log-probabilities) compute them through the response cache's score table, all of them unless a
    reduced run is configured (`benchmarks.last_names` in the registry); replay models read the authors'
    published values; other backends are skipped with a note."""
    model = context.partition_key
    backend = models.backend(model, open_upstream=upstream.open)
    entry = models.entry(model)
    metadata: dict = {"backend": entry.backend}
    if isinstance(backend, ReplayBackend):
        try:
            frame, missing = _published(upstream.open(), backend.upstream_name, regional_names)
        except UpstreamFileMissing as exc:
            return _skipped(context, f"no published log-probabilities for {backend.upstream_name} ({exc})", metadata)
        frame = frame.assign(model=model, source="published", cached=False)
        metadata.update(files_missing=dg.MetadataValue.json(missing),
                        pair_mismatches=dg.MetadataValue.json(ln.pair_mismatches(frame, last_name_pairs)[:20]))
    elif backend.supports_logprobs:
        registry = entry.benchmark_settings("last_names")
        chosen = {name: getattr(config, name) if getattr(config, name) is not None else registry.get(name)
                  for name in ("langs", "pairs", "names", "seed")}
        items = ln.reduce_items(ln.scoring_items(last_name_pairs, regional_names, config.prompt_column),
                                langs=chosen["langs"], pairs=chosen["pairs"], names_per_region=chosen["names"],
                                seed=chosen["seed"] if chosen["seed"] is not None else ln.DEFAULT_SEED)
        if any(chosen[name] is not None for name in ("langs", "pairs", "names")):
            metadata["note"] = f"reduced run: {chosen} (the paper: every language, pair and name)"
        scores = backend.score(items["prompt"].tolist(), items["continuation"].tolist(), cache=models.cache(),
                               progress=ProgressReporter(f"last_name_logprobs {model}", context.log.info))
        frame = items.assign(model=model, source="computed", logprob=[value for value, _ in scores],
                             cached=[cached for _, cached in scores])
        cached = int(frame["cached"].sum())
        metadata.update(prompt_column=config.prompt_column, cached_scores=cached, new_scores=len(frame) - cached)
    else:
        return _skipped(context, f"the {backend.backend_name} backend cannot give log-probabilities", metadata)
    frame = frame[ln.LOGPROB_COLUMNS]
    return dg.Output(frame, data_version=content_version(frame), metadata=table_metadata(frame, **metadata))


def _with_columns(logprobs: pd.DataFrame) -> pd.DataFrame:
    """No materialized partition with rows gives a frame without columns; the tables then come out empty."""
    return logprobs if not logprobs.empty else pd.DataFrame(columns=ln.LOGPROB_COLUMNS)


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def last_name_agreement(last_name_logprobs: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Table 35: per model, the % of conditioned prompts (98 per language, pooled) whose two last names the raw
    and the conditioned log-probabilities order the same way (`tab_35.py`'s rule; ties count as "first higher"),
    per language, and a one-sided z-test of agreement above 50 % (ours; the prompts are not independent draws)."""
    table = ln.agreement(_with_columns(last_name_logprobs))
    return dg.Output(table, metadata=table_metadata(table, preview_rows=20))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def last_name_region_tests(last_name_logprobs: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Table 36: per model, mean and SD (ddof 1) of the raw last-name log-likelihood of Mainland and of Taiwanese
    names, and Welch's t-test made one-sided (H1: Mainland < Taiwan) as `tab_36.py` does."""
    table = ln.region_tests(_with_columns(last_name_logprobs))
    return dg.Output(table, metadata=table_metadata(table, preview_rows=20))


LAST_NAME_ASSETS = [last_name_pairs, last_name_logprobs, last_name_agreement, last_name_region_tests]
LAST_NAME_CHECKS = [last_name_prompts_match_upstream]
