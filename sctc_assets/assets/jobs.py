"""The named jobs of every benchmark, one per stage, derived from its spec (the stage each asset's catalog entry
states): `sctc run` runs each stage as one run of its job, and the UI lists the runs under it."""

from __future__ import annotations

import dagster as dg

from sctc_assets.benchmarks import SPECS
from sctc_assets.benchmarks.spec import BenchmarkSpec

DESCRIPTIONS = {
    "inputs": "The model-independent inputs.",
    "partitioned_inputs": "Model-independent work partitioned by its own key (one run per partition).",
    "per_model_lang": "Generate, judge and score one or more model × {dimension} partitions.",
    "per_model": "Per-model tables.",
    "cross_model": "Model-independent inputs and the cross-model tables.",
}


def benchmark_jobs(spec: BenchmarkSpec) -> list[dg.UnresolvedAssetJobDefinition]:
    return [dg.define_asset_job(name, selection=dg.AssetSelection.assets(*selection),
                                description=DESCRIPTIONS[stage].format(dimension=spec.dimension))
            for stage, (name, selection) in spec.job_selections().items()]


JOBS = [job for spec in SPECS.values() for job in benchmark_jobs(spec)]
