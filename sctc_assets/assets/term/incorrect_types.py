"""Table 19: the types of incorrect answer (GPT-4o-mini annotations of the first trial, prompt variant 1)."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import markdown_table, table_metadata
from sctc_assets.lib.sctc_upstream import PAPER_MODELS
from sctc_assets.lib.term.incorrect_types import incorrect_type_file, incorrect_type_shares
from sctc_assets.lib.term.terms import LANGS
from sctc_assets.lib.upstream_source import UpstreamFileMissing
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "term"


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def term_incorrect_types(upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Per paper model and prompting script: the share (0–100) of the annotated incorrect first-trial answers
    that are entirely wrong (label 1) and that use the same concept in an uncommon form (label 2), as tab_19.py
    prints them (Llama-3-8B from its `llama3_*` files)."""
    source, rows, missing = upstream.open(), [], []
    for model in PAPER_MODELS:
        for lang in LANGS:
            relative = incorrect_type_file(model, lang)
            try:
                rows.append(incorrect_type_shares(model, lang, source.read_csv(relative, ["label"]),
                                                  source_name=relative))
            except UpstreamFileMissing:
                missing.append(relative)
    table = pd.DataFrame(rows)
    layout = pd.DataFrame()
    if not table.empty:
        wide = table.pivot_table(index="model", columns="lang", values=["pct_entirely_wrong", "pct_uncommon_usage"])
        layout = pd.DataFrame({"model": wide.index})
        for lang in LANGS:
            for measure in ("pct_entirely_wrong", "pct_uncommon_usage"):
                if (measure, lang) in wide.columns:
                    layout[f"{lang} {measure[4:]}"] = wide[(measure, lang)].round(2).to_numpy()
        layout = layout.set_index("model").reindex([m for m in PAPER_MODELS if m in wide.index]).reset_index()
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, preview_rows=22, paper_layout="Table 19: rows the 11 LLMs; columns Simplified (entirely wrong, "
                                             "uncommon usage), Traditional (entirely wrong, uncommon usage), %",
        table_19=dg.MetadataValue.md(markdown_table(layout, rows=11)), missing_files=dg.MetadataValue.json(missing)))
