"""What Dagster derives from each asset's catalog entry (its code version, stage, whether it calls models, and a
one-sentence headline), which its benchmark's spec states (`sctc_assets.benchmarks`, `ASSETS` in each spec module).

Every asset decorator goes through `@catalogued`, which reads the entry and sets what Dagster derives from it:
- `code_version`: bump it (in the spec, nowhere else) whenever a change to the asset's body or to the library code it
  calls can change what it writes. Dagster then shows its materializations as stale ("has a new code version")
  and "Materialize stale" redoes exactly those; an unchanged version keeps every stored partition up to date.
- owners and tags: `sctc/benchmark`, `sctc/paper`, `sctc/stage` and `sctc/calls_models` (filter on them in the UI's
  asset catalog, e.g. `tag:sctc/calls_models=true` for the assets that spend model calls);
- the description: the headline as its first line, then the function's docstring;
- the column schema (`dagster/column_schema`, from the schemas the spec carries), shown before any materialization;
- the automation condition (`sctc_assets.assets.automation`), acted on only when the automation sensor is on.

Data versions: assets whose table depends on more than their code and their inputs' data versions (upstream files,
model calls, run config) return a content hash of their table (`content_version`); the others get Dagster's
logical version (code version + input versions), so re-materializing an unchanged input changes nothing downstream.
"""

from __future__ import annotations

import warnings

import dagster as dg
import pandas as pd

from sctc_assets.assets import automation
from sctc_assets.benchmarks import CATALOG, PAPERS, TABLE_SCHEMAS
from sctc_assets.benchmarks.spec import (CROSS_MODEL, GENERATION, INPUTS, JUDGE, MODEL_LANG, PER_MODEL,  # noqa: F401
                                         STAGES, AssetEntry)
from sctc_assets.lib.content_hash import table_hash
from sctc_assets.lib.schemas import TableSchemaSpec

# `Output(data_version=...)` is a beta parameter of Dagster 1.13; the content versions rely on it deliberately.
warnings.filterwarnings("ignore", message="Parameter `data_version` of initializer `Output.__init__`",
                        category=dg.BetaWarning)

OWNERS = ("team:sctc-assets",)

# The Dagster concurrency pool of the assets that call models, one per kind of call: an asset's partitions span every
# model, so no static pool can name a model's endpoint or backend (`sctc run` bounds each endpoint itself, see
# `sctc_assets.running.concurrent`). The limits are instance settings (sctc_assets/deploy/local/dagster.yaml).
GENERATION_POOL, JUDGE_POOL = "sctc_generation", "sctc_judge"
POOLS = {GENERATION: GENERATION_POOL, JUDGE: JUDGE_POOL}


class CatalogError(LookupError):
    pass


def catalog_entry(name: str) -> AssetEntry:
    if name not in CATALOG:
        raise CatalogError(f"asset {name!r} has no catalog entry: add its stage, headline and code version to the "
                           "`ASSETS` of its benchmark's spec (sctc_assets/benchmarks/<benchmark>.py)")
    return CATALOG[name]


def asset_tags(entry: AssetEntry) -> dict[str, str]:
    return {"sctc/benchmark": entry.benchmark, "sctc/paper": PAPERS[entry.benchmark], "sctc/stage": entry.stage,
            "sctc/calls_models": "true" if entry.calls_models else "false"}


def column_schema(schema: TableSchemaSpec) -> dg.TableSchema:
    return dg.TableSchema(columns=[dg.TableColumn(name=column.name, type=column.type, description=column.description)
                                   for column in schema.columns])


def describe(entry: AssetEntry, docstring: str | None) -> str:
    return entry.headline if not docstring else f"{entry.headline}\n\n{docstring}"


def catalogued(assets_def: dg.AssetsDefinition) -> dg.AssetsDefinition:
    """The asset with its catalog entry applied (see the module docstring); put it above `@dg.asset`."""
    name = assets_def.key.to_user_string()
    entry = catalog_entry(name)
    schema = TABLE_SCHEMAS.get(name)
    if entry.table and schema is None:
        raise CatalogError(f"asset {name!r} is a table without a column schema: declare its columns in "
                           "sctc_assets/lib/schemas/ and name them in its benchmark's spec (`schemas`), or mark its "
                           "catalog entry `table=False`")

    pool = POOLS.get(entry.calls) if entry.calls else None
    if assets_def.node_def.pool != pool:
        raise CatalogError(f"asset {name!r}: its concurrency pool is {assets_def.node_def.pool!r}, its catalog entry "
                           f"wants {pool!r} (set `pool=` in its @dg.asset)")

    if entry.calls == GENERATION and entry.stage == MODEL_LANG and \
            automation.SERVED_MODEL_KEY not in {dep.asset_key for dep in assets_def.specs_by_key[assets_def.key].deps}:
        raise CatalogError(f"asset {name!r} asks a model: give its @dg.asset `deps=[SERVED_MODEL_KEY]` "
                           "(assets/automation.py), so a change of the served model can start it again")

    def apply(spec: dg.AssetSpec) -> dg.AssetSpec:
        metadata = {"dagster/column_schema": column_schema(schema)} if schema is not None else {}
        return spec.merge_attributes(owners=list(OWNERS), tags=asset_tags(entry), metadata=metadata).replace_attributes(
            code_version=entry.code_version,
            description=describe(entry, spec.description),
            automation_condition=automation.condition_for(entry.stage, entry.calls),
        )

    return assets_def.map_asset_specs(apply)


def content_version(frame: pd.DataFrame) -> dg.DataVersion:
    """The data version of a table that depends on more than its code and inputs: a hash of its content."""
    return dg.DataVersion(table_hash(frame))
