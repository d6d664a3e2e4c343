"""What `sctc run --benchmarks corpus` materializes and prints. `--corpora KEY…` also counts those corpora's shards,
one after the other in this process; for full-size corpora, backfill `corpus_counts` instead (UI, `dagster asset
materialize`, or a deployment that spreads runs over machines: README)."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.benchmark_options import OPTIONS
from sctc_assets.lib.corpus.registry import CorpusRegistryError
from sctc_assets.lib.corpus.tables import paper_layout
from sctc_assets.resources.corpora import CorpusRegistryResource
from sctc_assets.runner import BenchmarkPlan


def _corpus_shards(options: Mapping[str, Any]) -> list[tuple[tuple[str, ...], list[str]]]:
    chosen = options.get("corpora") or []
    if not chosen:
        return []
    registry = CorpusRegistryResource()
    entries = registry.entries()
    unknown = [key for key in chosen if key not in entries]
    if unknown:
        raise CorpusRegistryError(f"{registry.path()}: no corpus {', '.join(map(repr, unknown))} "
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
              "backfill of corpus_counts, see README)")


CORPUS_PLAN = BenchmarkPlan(
    **OPTIONS["corpus"].plan_fields(),
    inputs=("regional_terms", "corpus_shards", "corpus_patterns"),
    per_model_lang=(),
    per_model=(),
    cross_model=("corpus_term_counts", "corpus_name_counts", "corpus_term_frequency_tables"),
    summary=corpus_summary,
    partitioned_inputs=_corpus_shards,
    jobs={"partitioned_inputs": "corpus_count_shards", "cross_model": "corpus_tables"},
)
