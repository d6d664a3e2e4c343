"""Model-independent input: the benchmark's prompts in Traditional Chinese, Simplified Chinese and English."""

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.sovereignty.prompt_file import custom_prompt_table, prompt_files_digest
from sctc_assets.lib.sovereignty.prompts import SIMPLIFIED_CONFIG, prompt_table
from sctc_assets.lib.sovereignty.upstream import MAIN_PROMPT_SET, PROMPT_SETS, prompt_items
from sctc_assets.resources.tsb_upstream import TSBUpstreamResource

GROUP = "sovereignty"


class SovereigntyPromptsConfig(dg.Config):
    extra_prompt_sets: list[str] = Field(
        default=[], description=f"Prompt sets besides {MAIN_PROMPT_SET}: "
                                f"{', '.join(name for name in PROMPT_SETS if name != MAIN_PROMPT_SET)}.")


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def sovereignty_prompts(context: dg.AssetExecutionContext, config: SovereigntyPromptsConfig,
                        tsb_upstream: TSBUpstreamResource) -> dg.Output[pd.DataFrame]:
    """The 10 stage-1 prompts (S1-001 … S1-010) and any extra prompt sets, read from the upstream prompt files:
    Traditional Chinese and English as published, Simplified converted from the Traditional prompt with OpenCC
    (script only); then any custom prompt sets (`--sovereignty-prompt-file`, `lib/sovereignty/prompt_file.py`),
    whose file digest enters the data version."""
    roots = tsb_upstream.roots()
    chosen = list(dict.fromkeys([MAIN_PROMPT_SET, *config.extra_prompt_sets]))
    prompts = prompt_table({name: prompt_items(roots, name) for name in chosen})
    context.log.info(f"{prompts['prompt_id'].nunique()} prompts from {roots.benchmark}")
    # Custom prompt files (--sovereignty-prompt-file): their digest is part of the data version, so an edited red-flag
    # list or judge text makes everything downstream stale even where the prompts' text is the same.
    custom = tsb_upstream.custom_prompt_sets()
    version = content_version(prompts)
    if custom:
        prompts = pd.concat([prompts, custom_prompt_table(custom)], ignore_index=True)
        version = dg.DataVersion(f"{content_version(prompts).value}-{prompt_files_digest(custom)}")
        context.log.info(f"custom prompt sets: {', '.join(f'{name} ({s.source})' for name, s in custom.items())}")
    return dg.Output(prompts, data_version=version, metadata=table_metadata(
        prompts, preview_rows=30, prompt_sets=dg.MetadataValue.json([*chosen, *custom]),
        simplified_conversion=f"OpenCC {SIMPLIFIED_CONFIG}", **tsb_upstream.provenance(),
        **({"prompt_files": dg.MetadataValue.json({name: {"file": s.source, "sha256": s.digest}
                                                   for name, s in custom.items()})} if custom else {})))
