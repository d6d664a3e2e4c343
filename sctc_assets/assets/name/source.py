"""Model-independent inputs of the regional name task: the 352 names, the candidate lists and every prompt."""

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata, upstream_comparison_result
from sctc_assets.lib.name.candidates import DEFAULT_SEED, EXPERIMENTS
from sctc_assets.lib.name.lists import candidate_lists
from sctc_assets.lib.name.names import NAME_COLUMNS, NAMES_FILE, parse_names
from sctc_assets.lib.name.prompts import build_prompts
from sctc_assets.lib.sctc_upstream import name_prompt_file
from sctc_assets.lib.upstream_source import UpstreamFileMissing
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "name"


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def regional_names(context: dg.AssetExecutionContext, upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """The 352 names (152 Mainland in Simplified script, 200 Taiwanese in Traditional) with their count of
    bearers, popularity decile within the region, region and gender, split into last and given name."""
    source = upstream.open()
    names = parse_names(source.read_csv(NAMES_FILE, NAME_COLUMNS), source_name=NAMES_FILE)
    context.log.info(f"{len(names)} regional names from {source.origin}")
    summary = names.groupby("region").agg(names=("name", "size"), last_names=("last_name", "nunique"),
                                          given_names=("given_name", "nunique"),
                                          male=("gender", lambda g: int((g == "male").sum())),
                                          mean_count=("count", "mean")).reset_index()
    return dg.Output(names, data_version=content_version(names), metadata=table_metadata(
        names, by_region=dg.MetadataValue.md(summary.to_markdown(index=False)), **upstream.provenance()))


class CandidateListsConfig(dg.Config):
    seed: int = Field(default=DEFAULT_SEED, description="Seed of the generated lists: the same seed gives the "
                                                        "same lists and shuffles.")
    lists: dict[str, int] = Field(default={}, description="Generated lists per experiment, e.g. {main: 200} "
                                                          "(default: the paper's).")
    shuffles: dict[str, int] = Field(default={}, description="Shuffles per generated list and experiment, e.g. "
                                                             "{main: 380} for Figure 6 (default: the paper's).")


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def name_candidate_lists(context: dg.AssetExecutionContext, config: CandidateListsConfig,
                         regional_names: pd.DataFrame, upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Candidate lists of the four experiments: `generated` (seeded: main, popularity, gender_balanced,
    same_name_script, the paper's list and shuffle counts unless configured) and `upstream` (the authors' lists,
    where the upstream copy has `source_data/candidate_name_list/prompt_id_<P>.csv`). Row r of an experiment is
    list r // shuffles, shuffle r % shuffles."""
    unknown = sorted((set(config.lists) | set(config.shuffles)) - set(EXPERIMENTS))
    if unknown:
        raise ValueError(f"name_candidate_lists: unknown experiment(s) {unknown}; expected {list(EXPERIMENTS)}")
    lists, missing = candidate_lists(regional_names, upstream.open(), seed=config.seed, lists=config.lists,
                                     shuffles=config.shuffles)
    for relative in missing:
        context.log.warning(f"name_candidate_lists: {relative} is missing; the replayed answers to it are scored "
                            "against all 352 names, and the tables that need the lists skip them")
    shape = (lists.groupby(["experiment", "list_source"])
             .agg(lists=("list_id", "nunique"), rows=("row", "size")).reset_index())
    return dg.Output(lists, data_version=content_version(lists), metadata=table_metadata(
        lists, seed=config.seed, design=dg.MetadataValue.md(shape.to_markdown(index=False)),
        upstream_files_missing=dg.MetadataValue.json(missing)))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def name_prompts(name_candidate_lists: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """The job-candidate prompt of every candidate-list row in each prompting language (paper Table 1(b))."""
    prompts = build_prompts(name_candidate_lists)
    counts = prompts.groupby(["experiment", "list_source", "lang"]).size().rename("prompts").reset_index()
    return dg.Output(prompts, data_version=content_version(prompts),
                     metadata=table_metadata(prompts, counts=dg.MetadataValue.md(counts.to_markdown(index=False))))


@dg.asset_check(asset=name_prompts, description="Prompts of the authors' lists equal the upstream prompt files, "
                                                "row by row.")
def name_prompts_match_upstream(name_prompts: pd.DataFrame, upstream: SCTCUpstreamResource) -> dg.AssetCheckResult:
    source = upstream.open()
    compared, mismatches, missing = [], [], []
    published = name_prompts[name_prompts["list_source"] == "upstream"]
    for (name, lang), block in published.groupby(["experiment", "lang"]):
        relative = name_prompt_file(lang, EXPERIMENTS[name].prompt_id)
        try:
            theirs = source.read_csv(relative, ["prompt"])["prompt"].tolist()
        except UpstreamFileMissing:
            missing.append(relative)
            continue
        ours = block.sort_values("row")["prompt"].tolist()
        compared.append(relative)
        if len(ours) != len(theirs):
            mismatches.append(f"{relative}: {len(theirs)} rows, ours {len(ours)}")
            continue
        mismatches += [f"{relative} row {row}" for row, (a, b) in enumerate(zip(ours, theirs)) if a != b][:5]
    return upstream_comparison_result(len(compared), mismatches, missing,
                                      files=dg.MetadataValue.json(compared))
