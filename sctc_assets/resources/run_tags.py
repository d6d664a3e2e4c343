"""The `sctc/*` tags of a run that `sctc run` did not start (a UI materialization, a backfill the daemon launches, a
job run from the launchpad), so that the Runs page filters every run of a model or benchmark alike: `sctc run` tags
its own runs (`BenchmarkSpec.run_tags`); any other run is tagged the same way when it starts, from its asset
selection (or its named job) and its partition, by the I/O manager every asset uses (`ParquetIOManager`)."""

from __future__ import annotations

from typing import Iterable, Mapping

import dagster as dg

from sctc_assets.benchmarks import SPECS
from sctc_assets.benchmarks.spec import BenchmarkSpec

PARTITION_TAG = "dagster/partition"
DIMENSION_TAG = "dagster/partition/"


def _stages(assets: Iterable[str], job_name: str) -> dict[tuple[str, str], tuple[BenchmarkSpec, str]]:
    """(benchmark, stage) → (spec, stage) of every asset of the run, else of its named job."""
    found = {(spec.name, spec.run_stage(name)): (spec, spec.run_stage(name))
             for name in assets for spec in SPECS.values() if name in spec.assets}
    if not found:  # a named job whose run carries no asset selection
        found = {(spec.name, stage): (spec, stage) for spec in SPECS.values()
                 for stage, (name, _) in spec.job_selections().items() if name == job_name}
    return found


def sctc_run_tags(assets: Iterable[str], job_name: str, tags: Mapping[str, str]) -> dict[str, str]:
    """The `sctc/*` tags of a run of `assets` (or of the job `job_name`) with Dagster's own `tags`: none unless the
    run belongs to one benchmark; its stage where it runs one; the model and the second dimension's key where it
    has one partition (a run over a range has neither)."""
    stages = _stages(assets, job_name)
    if len({name for name, _ in stages}) != 1:
        return {}
    if len(stages) > 1:  # e.g. the inputs and the cross-model tables selected together in the asset graph
        spec = next(iter(stages.values()))[0]
        return {"sctc/benchmark": spec.name}
    spec, stage = next(iter(stages.values()))
    model = tags.get(f"{DIMENSION_TAG}model")
    key = tags.get(f"{DIMENSION_TAG}{spec.dimension}")
    if model is None and stage == "per_model":
        model = tags.get(PARTITION_TAG)  # partitioned by model alone
    return spec.run_tags(stage, model=model, key=key)


def tag_run(context: dg.InitResourceContext) -> None:
    """Adds the `sctc/*` tags to the run `context` initializes a resource for, unless it has them already."""
    run, instance = context.dagster_run, context.instance
    if run is None or instance is None or any(key.startswith("sctc/") for key in run.tags):
        return
    assets = [key.to_user_string() for key in (run.asset_selection or ())]
    tags = sctc_run_tags(assets, run.job_name, run.tags)
    if tags:
        instance.add_run_tags(run.run_id, tags)

