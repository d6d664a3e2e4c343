"""A tiny benchmark built the way a new one is added, from its spec, its library, its assets and its table schemas
alone, outside the package: `test_extra_benchmark` runs it through `sctc run` and the report with
`$SCTC_BENCHMARK_MODULES=sctc_assets_tests.tiny_benchmark`.

Each model names the colour of three things in each script; an answer is right when it holds the expected word.
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from sctc_assets.benchmarks.spec import CROSS_MODEL, GENERATION, INPUTS, MODEL_LANG, PER_MODEL, AssetEntry, \
    BenchmarkSpec
from sctc_assets.lib.cost_estimate import PartitionDesign, RequestSet
from sctc_assets.lib.varieties import SIMPLIFIED, TRADITIONAL
from sctc_assets_tests.tiny_benchmark import lib
from sctc_assets_tests.tiny_benchmark.schemas import SCHEMAS


def tiny_summary_text(tables: Mapping[str, pd.DataFrame], models: list[str]) -> str:
    summary = tables.get("tiny_summary")
    if summary is None or summary.empty:
        return "no tiny_summary was produced"
    rows = summary[summary["model"].isin(models)]
    return "Tiny colours (share of answers with the expected word)\n" + "\n".join(
        f"{row.model} {row.lang}: {row.share_right:.2f}" for row in rows.itertuples())


def tiny_design(models: list[Any], options: Mapping[str, Any]) -> list[PartitionDesign]:
    """Every model asks every question of each script, as `tiny_responses` does."""
    prompts = lib.prompt_table()
    designs = []
    for lang in (SIMPLIFIED.code, TRADITIONAL.code):
        selected = prompts[prompts["lang"] == lang].reset_index(drop=True)
        requests = RequestSet(lib.requests(selected))
        designs += [PartitionDesign(entry.key, lang, selected, requests, None) for entry in models]
    return designs


SPEC = BenchmarkSpec(
    name="tiny",
    paper="tiny-colours",
    langs=(SIMPLIFIED.code, TRADITIONAL.code),
    assets={
        "tiny_prompts": AssetEntry(INPUTS, "The tiny benchmark's questions in both scripts."),
        "tiny_responses": AssetEntry(MODEL_LANG, "One model's answers to the tiny questions of one script.",
                                     calls=GENERATION),
        "tiny_scores": AssetEntry(PER_MODEL, "Whether each of one model's answers holds the expected word."),
        "tiny_summary": AssetEntry(CROSS_MODEL, "The share of right answers per model and script."),
    },
    response_asset="tiny_responses",
    summary=tiny_summary_text,
    report_tables=("tiny_summary",),
    schemas=SCHEMAS,
    assets_module="sctc_assets_tests.tiny_benchmark.assets",
    design=tiny_design,
    skip_unchanged=True,
)
