"""Corpus term and name counts (SC-TC-Bench appendix, Tables 11, 13 and 18): the benchmark's spec.

`--corpora KEY…` also counts those corpora's shards, one after the other in this process; for full-size corpora,
backfill `corpus_counts` instead (UI, `dagster asset materialize`, or a deployment that spreads runs over machines).
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.benchmarks.spec import CROSS_MODEL, INPUTS, AssetEntry, BenchmarkSpec, OptionRange, present
from sctc_assets.lib.corpus.corpus_registry import CorpusRegistryError, load_corpora
from sctc_assets.lib.corpus.layout import paper_layout
from sctc_assets.lib.paths import default_corpora_path
from sctc_assets.lib.schemas import corpus as corpus_schemas

ASSETS = {
    "corpus_shards": AssetEntry(INPUTS, "Every shard of every registered corpus."),
    "corpus_patterns": AssetEntry(INPUTS, "The term and name forms that the corpus counts search for."),
    "corpus_counts": AssetEntry(INPUTS, "Records containing each form in one corpus shard.", sharded=True),
    "corpus_term_counts": AssetEntry(CROSS_MODEL, "Records containing each term's Mainland and Taiwanese forms, per "
                                                  "corpus."),
    "corpus_name_counts": AssetEntry(CROSS_MODEL, "Records containing each name, per corpus."),
    "corpus_term_frequency_tables": AssetEntry(CROSS_MODEL, "Corpus frequencies of the terms (Tables 11, 13 and 18)."),
}


def corpus_arguments(parser: Any) -> None:
    group = parser.add_argument_group("corpus counts")
    group.add_argument("--corpora", nargs="+", metavar="KEY",
                       help="count every shard of these registered corpora in this run (default: none; the "
                            "tables then use the shards counted so far and the authors' counts)")
    group.add_argument("--corpus-majority", type=float, metavar="SHARE",
                       help="share of models that must misalign a term for Table 18's project list, in (0, 1] "
                            "(default 0.5)")
    group.add_argument("--corpus-label-source", choices=["upstream", "rules"],
                       help="label source deciding Table 18's project list (default upstream)")


def corpus_config(options: Mapping[str, Any]) -> dict:
    settings = {"majority": options.get("corpus_majority"), "label_source": options.get("corpus_label_source")}
    return {"corpus_term_frequency_tables": present(settings)}


def corpus_shards(options: Mapping[str, Any]) -> list[tuple[tuple[str, ...], list[str]]]:
    """Every shard of the corpora `--corpora` names, as `corpus_counts` partitions."""
    chosen = options.get("corpora") or []
    if not chosen:
        return []
    path = str(default_corpora_path())
    entries = load_corpora(path)
    unknown = [key for key in chosen if key not in entries]
    if unknown:
        raise CorpusRegistryError(f"{path}: no corpus {', '.join(map(repr, unknown))} "
                                  f"(known: {', '.join(sorted(entries))})")
    return [(("corpus_counts",), [shard for key in chosen for shard in entries[key].shard_keys()])]


def corpus_summary(tables: Mapping[str, pd.DataFrame], models: list[str]) -> str:
    frequency = tables.get("corpus_term_frequency_tables")
    if frequency is None or frequency.empty:
        return "no corpus_term_frequency_tables were produced"
    counted = tables.get("corpus_term_counts", pd.DataFrame())
    project = sorted(set(counted.loc[counted["count_source"] == "project", "corpus"])) if not counted.empty else []
    return ("Corpus counts, Table 18 (mean records containing the Mainland (S) and Taiwanese (T) form of the "
            "misaligned and the other terms; count_source upstream = the authors' counts)\n"
            + tabulate(paper_layout(frequency, "18"), headers="keys", tablefmt="github", showindex=False)
            + f"\n\nCorpora counted by the project: {', '.join(project) or 'none yet'} (count shards with a "
              "backfill of corpus_counts, see docs/benchmarks/corpus.md)")


CORPUS = BenchmarkSpec(
    name="corpus",
    paper="sc-tc-bench",
    langs=(),
    assets=ASSETS,
    schemas=tuple(corpus_schemas.TABLES),
    reads=("regional_terms",),  # the term list whose forms are counted
    add_arguments=corpus_arguments,
    option_ranges=(OptionRange("corpus_majority", 0, 1, low_open=True),),
    config=corpus_config,
    # Counting calls no model; Table 18 reads whatever term results exist.
    default_models=False,
    summary=corpus_summary,
    partitioned_inputs=corpus_shards,
    jobs={"partitioned_inputs": "corpus_count_shards", "cross_model": "corpus_tables"},
)
