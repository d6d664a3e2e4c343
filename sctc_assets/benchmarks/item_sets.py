"""Regional term choice on any item set, for any prompting varieties: one benchmark spec per registered set.

Each set of the item-set registry (`sctc_assets.lib.term.item_sources`: `$SCTC_ITEM_SETS`, and the sets `sctc run
--term-items` used) becomes the benchmark `terms_<set>`, with its own assets (`terms_<set>_items` → `_prompts` →
`_responses` → (`_judgements` →) `_labels` → `_by_concept`, `_rates`, `_matrix` → `_contrasts`, `_power`; corpus
counts in `_corpus_counts` → `_corpus_term_counts`), partitioned by model × prompting variety: a set is its own
lineage, so sets never make each other stale, and the default set stays the `term` benchmark with its keys. The
assets are made by `sctc_assets/assets/item_sets/` from these specs. No Dagster here.
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.benchmarks.corpus import corpus_shards
from sctc_assets.benchmarks.spec import (CROSS_MODEL, GENERATION, INPUTS, JUDGE, MODEL_LANG, PER_MODEL, AssetEntry,
                                         BenchmarkSpec, OptionRange, ReportPart)
from sctc_assets.benchmarks.term import TERM, TERM_ANSWER, term_partition_designs
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.cost_estimate import PartitionDesign
from sctc_assets.lib.term.item_sources import ItemSetEntry, LoadedSet, load_entry, registered_sets
from sctc_assets.lib.term.items import ItemSetError
from sctc_assets.lib.term.prompts import PAPER_TRIALS, PROMPT_VARIANTS, run_settings
from sctc_assets.lib.term.requests import variety_requests
from sctc_assets.lib.term.variety_prompts import build_variety_prompts
from sctc_assets.lib.upstream_source import UpstreamError
from sctc_assets.lib.varieties import load_catalog

ITEM_SET_PAPER = "sc-tc-bench"
REPORT_MODULE = "sctc_assets.lib.report.item_sets"


def asset_entries(prefix: str) -> dict[str, AssetEntry]:
    return {
        f"{prefix}_items": AssetEntry(INPUTS, "The item set's concepts with their forms per region and definitions."),
        f"{prefix}_prompts": AssetEntry(INPUTS, "Every prompt of the item set in each prompting variety, with the "
                                                "forms that count as correct."),
        f"{prefix}_responses": AssetEntry(MODEL_LANG, "One model's answers to the item set's prompts in one "
                                                      "prompting variety.", calls=GENERATION),
        f"{prefix}_judgements": AssetEntry(MODEL_LANG, "A judge model's verdicts on which region's form each of one "
                                                       "partition's answers gives.", calls=JUDGE),
        f"{prefix}_labels": AssetEntry(MODEL_LANG, "Correct, misaligned (with the regions) or incorrect labels of one "
                                                   "partition's answers, by label source."),
        f"{prefix}_by_concept": AssetEntry(PER_MODEL, "One model's label counts per concept, variety and prompt "
                                                      "variant."),
        f"{prefix}_rates": AssetEntry(PER_MODEL, "One model's correct, misaligned-by-region and incorrect rates per "
                                                 "variety, with 95 % intervals."),
        f"{prefix}_matrix": AssetEntry(PER_MODEL, "One model's prompted-variety × answered-region matrix."),
        f"{prefix}_contrasts": AssetEntry(CROSS_MODEL, "Pairwise variety contrasts paired by concept, BH-adjusted "
                                                       "across the family."),
        f"{prefix}_power": AssetEntry(CROSS_MODEL, "Minimum detectable variety differences of the design run."),
        f"{prefix}_corpus_counts": AssetEntry(INPUTS, "Records containing each of the set's forms in one corpus "
                                                      "shard.", sharded=True),
        f"{prefix}_corpus_term_counts": AssetEntry(CROSS_MODEL, "Records containing each concept's forms per region, "
                                                                "per corpus."),
    }


def serves_item_sets(entry: Any) -> bool:
    """Not a replay: published answers exist for the papers' prompts only (the 110 terms, not an item set's)."""
    return traits(entry.backend).replays is None


def _config(prefix: str):
    def config(options: Mapping[str, Any]) -> dict:
        return {f"{prefix}_responses": {"trials": options.get("trials"),
                                        "prompt_variants": options.get("prompt_variants")},
                f"{prefix}_judgements": {"judge": options.get("judge")}}
    return config


def _run_settings(values: Mapping[str, Any], entry: Any) -> tuple[int, list[int]]:
    """Trials and prompt variants as the default set's: the run's, else the registry's `benchmarks.term`, else the
    paper's."""
    return run_settings(values.get("trials"), values.get("prompt_variants"), entry.benchmark_settings("term"))


def loaded(item_entry: ItemSetEntry) -> LoadedSet:
    return load_entry(item_entry, catalog=load_catalog())


def _check(item_entry: ItemSetEntry):
    def check(options: Mapping[str, Any]) -> list[str]:
        try:
            loaded(item_entry)
        except (ItemSetError, UpstreamError, KeyError, OSError) as exc:
            return [f"item set {item_entry.name!r} ({item_entry.registry or 'sctc run --term-items'}): "
                    f"{exc.args[0] if isinstance(exc, KeyError) else exc}"]
        return []
    return check


def _design(item_entry: ItemSetEntry, spec_ref: list):
    def design(models: list[Any], options: Mapping[str, Any]) -> list[PartitionDesign]:
        spec = spec_ref[0]
        item_set, catalog = loaded(item_entry).item_set, load_catalog()

        def build(variety: str, trials: int, variants: list[int]):
            # Only the prompts this selection asks (the prompts asset holds every variant and PAPER_TRIALS trials,
            # in this order; `row` does not depend on which are built), then selected as the response asset does.
            wanted = set(variants)
            table = build_variety_prompts(item_set, [catalog.variety(variety)], cue=item_entry.cue,
                                          variants=[variant for variant in PROMPT_VARIANTS if variant in wanted],
                                          trials=min(trials, PAPER_TRIALS))
            return variety_requests(table, variety, trials, variants, benchmark=spec.name)

        return term_partition_designs(spec, models, options, build)
    return design


def _summary(prefix: str, set_name: str, varieties: tuple[str, ...]):
    def summary(tables: Mapping[str, pd.DataFrame], models: list[str]) -> str:
        rates = tables.get(f"{prefix}_rates")
        if rates is None or rates.empty:
            return f"no {prefix}_rates were produced"
        rates = rates[rates["model"].isin(models) & (rates["definitions"] == "all")
                      & (rates["measure"] == "correct")]
        if rates.empty:
            return f"no {prefix}_rates for the chosen models"
        wide = rates.pivot_table(index=["model", "label_source", "prompt_variant"], columns="variety", values="pct",
                                 sort=False)
        wide = wide[[variety for variety in varieties if variety in wide.columns]]
        return (f"Regional term choice on item set {set_name!r}: aligned % (answers with a form of the prompted "
                f"variety's region), per prompting variety\n"
                + tabulate(wide.round(1).reset_index(), headers="keys", tablefmt="github", showindex=False))
    return summary


def _schemas(prefix: str) -> tuple[Any, ...]:
    from sctc_assets.lib.schemas.item_set_corpus import item_set_corpus_schemas
    from sctc_assets.lib.schemas.item_sets import item_set_term_schemas

    return (*item_set_term_schemas(prefix, tuple(load_catalog().regions)), *item_set_corpus_schemas(prefix))


def item_set_spec(item_entry: ItemSetEntry, varieties: tuple[str, ...]) -> BenchmarkSpec:
    """The benchmark of one registered set, partitioned by model × its prompting varieties."""
    prefix = item_entry.prefix
    spec_ref: list[BenchmarkSpec] = []

    def corpus_inputs(options: Mapping[str, Any]) -> list[tuple[tuple[str, ...], list[str]]]:
        return [((f"{prefix}_corpus_counts",), keys) for _, keys in corpus_shards(options)]

    spec = BenchmarkSpec(
        name=prefix,
        paper=ITEM_SET_PAPER,
        langs=varieties,
        dimension="variety",
        assets=asset_entries(prefix),
        option_ranges=(OptionRange("trials", 1, PAPER_TRIALS),),
        check_options=_check(item_entry),
        config=_config(prefix),
        response_asset=f"{prefix}_responses",
        run_settings=_run_settings,
        design=_design(item_entry, spec_ref),
        expected_answer=TERM_ANSWER,
        settings_keys=frozenset({"trials", "prompt_variants", "max_new_tokens"}),
        judge=TERM.judge,  # the default set's `--judge` / $SCTC_TERM_JUDGE
        serves=serves_item_sets,
        summary=_summary(prefix, item_entry.name, varieties),
        partitioned_inputs=corpus_inputs,
        jobs={"partitioned_inputs": f"{prefix}_corpus_count_shards"},
        # The set's source file and registry entry are outside Dagster's lineage and the settings digest, so its
        # stages always run again (the answers come from the response cache).
        skip_unchanged=False,
        report_part=ReportPart(REPORT_MODULE, f"{prefix}_", f"Terms {item_entry.name}", factory="for_item_set",
                               arguments=(prefix, item_entry.name, varieties)),
        report_tables=(f"{prefix}_rates", f"{prefix}_matrix", f"{prefix}_contrasts", f"{prefix}_power"),
        schemas=_schemas(prefix),
    )
    spec_ref.append(spec)
    return spec


def varieties_of(item_entry: ItemSetEntry) -> tuple[str, ...]:
    """The partition keys of a set: its entry's varieties, else the varieties its regions allow (which needs the
    set itself; a set that cannot be read yet gets the built-in Chinese varieties, and its check says why)."""
    if item_entry.varieties:
        return item_entry.varieties
    try:
        return load_entry(item_entry, require_definitions=False).varieties
    except (ItemSetError, UpstreamError, KeyError, OSError):
        return tuple(load_catalog().varieties)


ITEM_SETS: dict[str, ItemSetEntry] = registered_sets()


def item_set_specs() -> dict[str, BenchmarkSpec]:
    return {entry.prefix: item_set_spec(entry, varieties_of(entry)) for entry in ITEM_SETS.values()}


def entry_of(spec: BenchmarkSpec) -> ItemSetEntry | None:
    """The registry entry behind an item-set benchmark, None for any other benchmark."""
    return next((entry for entry in ITEM_SETS.values() if entry.prefix == spec.name), None)
