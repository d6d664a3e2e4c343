"""What each condition (system prompt or persona) changes against the baseline `none`, across models."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.sovereignty.condition_effects import condition_effects

GROUP = "sovereignty"


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def sovereignty_condition_effects(context: dg.AssetExecutionContext,
                                  sovereignty_results: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Per model, scoring rule, prompt set, prompting language and condition (`sctc run --sovereignty-conditions`)
    against the baseline `none`, paired per prompt and sample: passes and scores under each, McNemar b (passes
    under none only) and c (passes under the condition only), the exact McNemar p, BH-adjusted across the table
    (per rule and prompt set), the prompts that flipped each way, and the paper's LBS (ZH-Hant − EN) within the
    condition and within the baseline. Empty when no condition besides `none` was asked."""
    table = condition_effects(sovereignty_results)
    conditions = sorted(set(table["condition"])) if not table.empty else []
    context.log.info(f"sovereignty_condition_effects: {len(table)} row(s), conditions "
                     f"{', '.join(conditions) or '(none besides the baseline)'}")
    significant = int((table["p_exact_bh"] < 0.05).sum()) if not table.empty else 0
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, preview_rows=20, conditions=dg.MetadataValue.json(conditions), significant_bh=significant))
