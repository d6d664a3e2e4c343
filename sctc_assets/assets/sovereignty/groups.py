"""Chinese-origin models against the others: the paper's central comparison as a test with the model as the unit."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.sovereignty.groups import origin_tests
from sctc_assets.resources.model_registry import ModelRegistryResource

GROUP = "sovereignty"


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def sovereignty_origin_tests(context: dg.AssetExecutionContext, sovereignty_summary: pd.DataFrame,
                             models: ModelRegistryResource) -> dg.Output[pd.DataFrame]:
    """Per scoring rule, prompt set and prompting language: the mean pass rate of Chinese-origin models (registry
    `origin.country` CN; the replayed models from the paper's Table 2) against the others, and per language pair the
    mean LBS of the two groups (`comparison` = language_gap). The model is the unit: a permutation test over models
    (exact up to 50,000 relabellings, else Monte Carlo) gives `p_permutation`, the primary p; a logistic GEE
    clustered by model gives `p_gee` for comparison (few clusters: its sandwich errors are unreliable). Models
    without an origin are left out and named in the metadata."""
    entries = models.entries()
    present = sorted(sovereignty_summary["model"].unique()) if not sovereignty_summary.empty else []
    countries = {model: (entries[model].origin.get("country") if model in entries else None) for model in present}
    unknown = [model for model, country in countries.items() if not country]
    if unknown:
        context.log.warning(f"sovereignty_origin_tests: no `origin` in the registry for {', '.join(unknown)}; "
                            "left out of the groups")
    table = origin_tests(sovereignty_summary, countries)
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, preview_rows=20, origins=dg.MetadataValue.json({m: c for m, c in countries.items() if c}),
        without_origin=dg.MetadataValue.json(unknown)))
