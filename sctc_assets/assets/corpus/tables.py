"""Tables 11, 13 and 18 of SC-TC-Bench from the project's corpus counts and the authors' published counts."""

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.corpus.layout import paper_layout
from sctc_assets.lib.corpus.tables import (PAPER_MISALIGNED_TERM_IDS, frequency_tables,
                                           project_misaligned_term_ids)

GROUP = "corpus"


class CorpusTablesConfig(dg.Config):
    majority: float = Field(default=0.5, description="Share of models that must misalign a term (≥3 of 15 "
                                                     "Traditional-prompt trials) for Table 18 (paper: at least half).")
    prompt_variant: int = Field(default=1, description="Prompt variant whose misalignment decides (paper: 1).")
    label_source: str = Field(default="upstream", description="Label source of term_misalignment_by_term: "
                                                              "`upstream` (the paper's labels) or `rules`.")
    include_incomplete: bool = Field(default=False, description="Also tabulate corpora whose shards are not all "
                                                                "counted yet.")


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def corpus_term_frequency_tables(config: CorpusTablesConfig, corpus_term_counts: pd.DataFrame,
                                 term_misalignment_by_term: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Table 13 (mean ± SD of records containing the Mainland vs the Taiwanese terms), Table 11 (terms whose two
    forms both occur) and Table 18 (misaligned vs other terms, Simplified/Traditional ratio of means) for every
    count source (`upstream`: the authors' counts; `project`: ours) and corpus. Table 18's misaligned terms come
    from the paper's fixed list of 29 (`misaligned_from = paper`) and from this platform's own
    `term_misalignment_by_term` (`project`: ≥3/15 in at least `majority` of the models)."""
    counts = corpus_term_counts
    if not config.include_incomplete and not counts.empty:
        counts = counts[counts["complete"].astype(bool)]
    ours, n_models = project_misaligned_term_ids(term_misalignment_by_term, majority=config.majority,
                                                 prompt_variant=config.prompt_variant,
                                                 label_source=config.label_source)
    lists = {"paper": set(PAPER_MISALIGNED_TERM_IDS)}
    if ours:
        lists["project"] = ours
    tables = frequency_tables(counts, lists)
    extra = {f"table_{number}": dg.MetadataValue.md(paper_layout(tables, number).to_markdown(index=False))
             for number in ("11", "13", "18") if (tables["table"] == number).any()}
    return dg.Output(tables, data_version=content_version(tables), metadata=table_metadata(
        tables, preview_rows=20, **extra,
        project_misaligned_terms=dg.MetadataValue.json(sorted(ours)), project_misaligned_models=n_models,
        paper_only=dg.MetadataValue.json(sorted(PAPER_MISALIGNED_TERM_IDS - ours)),
        project_only=dg.MetadataValue.json(sorted(ours - PAPER_MISALIGNED_TERM_IDS))))
