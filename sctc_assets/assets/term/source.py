"""Model-independent inputs of the regional term task: the 110 terms and every prompt."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata, upstream_comparison_result
from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE, term_prompt_file
from sctc_assets.lib.term.prompts import PAPER_TRIALS, PROMPT_VARIANTS, build_prompts
from sctc_assets.lib.term.terms import LANGS, parse_terms
from sctc_assets.lib.upstream_source import UpstreamFileMissing
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "term"


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def regional_terms(context: dg.AssetExecutionContext, upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """The 110 regional terms (Mainland and Taiwanese forms, `/` alternatives split and trimmed), their
    definitions in both scripts, category and definition source, from the SC-TC-Bench source data."""
    source = upstream.open()
    terms = parse_terms(source.read_csv(TERMS_FILE, TERM_COLUMNS), source_name=TERMS_FILE)
    context.log.info(f"{len(terms)} regional terms from {source.origin}")
    return dg.Output(terms, data_version=content_version(terms), metadata=table_metadata(
        terms,
        categories=dg.MetadataValue.json(terms["category"].value_counts().to_dict()),
        definition_sources=dg.MetadataValue.json(terms["definition_source"].value_counts().to_dict()),
        **upstream.provenance(),
    ))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def term_prompts(regional_terms: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Every prompt of the task: 3 prompt variants × 2 scripts × 110 terms × 15 trials, with the answers
    that count as correct (`expected`) and as the other region's term (`other_region`). Row r of each
    (lang, variant) block asks about term r % 110 in trial r // 110, as in the upstream prompt files."""
    prompts = build_prompts(regional_terms, langs=LANGS, variants=PROMPT_VARIANTS, trials=PAPER_TRIALS)
    return dg.Output(prompts, data_version=content_version(prompts),
                     metadata=table_metadata(prompts, per_lang_variant=len(regional_terms) * PAPER_TRIALS))


@dg.asset_check(asset=term_prompts, description="Generated prompts equal the upstream prompt files, row by row.")
def term_prompts_match_upstream(term_prompts: pd.DataFrame, upstream: SCTCUpstreamResource) -> dg.AssetCheckResult:
    source = upstream.open()
    compared, mismatches, missing = 0, [], []
    for (lang, variant), block in term_prompts.groupby(["lang", "prompt_variant"]):
        relative = term_prompt_file(lang, int(variant))
        try:
            published = source.read_csv(relative, ["prompt"])
        except UpstreamFileMissing:
            missing.append(relative)
            continue
        ours = block.sort_values("row")["prompt"].tolist()
        theirs = published["prompt"].tolist()
        compared += 1
        if len(ours) != len(theirs):
            mismatches.append(f"{relative}: {len(theirs)} rows, ours {len(ours)}")
            continue
        mismatches += [f"{relative} row {row}" for row, (a, b) in enumerate(zip(ours, theirs)) if a != b][:5]
    return upstream_comparison_result(compared, mismatches, missing)
