"""Appendix tables from the authors' published name annotations: descriptive words in explanations (Tables
31–33) and the deterministic extractor's invalid-answer classes against the human annotations (Table 20)."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import markdown_table, table_metadata
from sctc_assets.lib.name import explanations, invalid_validation
from sctc_assets.lib.sctc_upstream import UPSTREAM_LANG
from sctc_assets.lib.upstream_source import UpstreamFileMissing
from sctc_assets.lib.varieties import REGIONS, SIMPLIFIED, TRADITIONAL
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "name"
EXPLAINING_MODELS = ("baichuan2", "qwen")
# The authors collected explanations for the two Chinese prompting scripts only.
CHINESE = (SIMPLIFIED.code, TRADITIONAL.code)
PAPER_LAYOUT_31 = ("Tables 31 (Baichuan-2) and 32 (Qwen-1.5): rank 1–10 rows; columns Mainland names prompted in "
                   "Simplified | Traditional, Taiwanese names prompted in Simplified | Traditional; a word in one "
                   "region's top 10 but not the other's is highlighted (`only_in_this_region`).")


def _read_explanations(upstream: SCTCUpstreamResource) -> tuple[pd.DataFrame, list[str]]:
    source, frames, missing = upstream.open(), [], []
    for model in EXPLAINING_MODELS:
        for lang in CHINESE:
            relative = f"response/regional_name/explanation/{model}_{UPSTREAM_LANG[lang]}.csv"
            try:
                frame = source.read_csv(relative, ["adjective", "name", "region"])
            except UpstreamFileMissing:
                missing.append(relative)
                continue
            frames.append(frame.assign(model=model, lang=lang))
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), missing


def _paper_layout(table: pd.DataFrame, model: str, source: str) -> str:
    chosen = table[(table["model"] == model) & (table["word_source"] == source)]
    if chosen.empty:
        return "_(no data)_"
    chosen = chosen.assign(cell=chosen["word"] + chosen["only_in_this_region"].map({True: " ◆", False: ""}))
    wide = chosen.pivot_table(index="rank", columns=["region", "lang"], values="cell", aggfunc="first")
    wide.columns = [f"{region} names, {lang}" for region, lang in wide.columns]
    order = [c for c in (f"{region.name} names, {lang}" for region in REGIONS for lang in CHINESE) if c in wide.columns]
    return markdown_table(wide[order].reset_index(), rows=10)


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def name_explanation_words(upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Tables 31–32: the 10 most frequent descriptive words in Baichuan-2's and Qwen-1.5's explanations of
    Mainland and of Taiwanese names, per prompting script, counted two ways (`word_source`): `scripts` (tab_31.py's
    splitting and normalisation, reproduced exactly) and `jieba` (jieba 0.42.1 POS tags: adjectives, idioms, fixed
    expressions, status words). ◆ in the metadata layout = the paper's blue highlight."""
    frame, missing = _read_explanations(upstream)
    table = explanations.top_region_exclusive(explanations.top_words(frame)) if not frame.empty else pd.DataFrame()
    layouts = {f"table_{31 if model == 'baichuan2' else 32}_{source}": dg.MetadataValue.md(_paper_layout(table, model, source))
               for model in EXPLAINING_MODELS for source in ("scripts", "jieba")} if not table.empty else {}
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, preview_rows=20, paper_layout=PAPER_LAYOUT_31, missing_files=dg.MetadataValue.json(missing), **layouts))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def name_talent_examples(upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Table 33: the three Taiwanese names Baichuan-2 and Qwen-1.5 most often describe as talented or wise
    (才华横溢, 有才华, 智慧, 才智, 才华出众 in the extracted words), per prompting script, as tab_31.py
    --name_example computes it."""
    frame, missing = _read_explanations(upstream)
    table = explanations.talent_names(frame) if not frame.empty else pd.DataFrame()
    layout = (table.groupby(["model", "lang"])["name"].agg(", ".join).unstack("lang").reset_index()
              if not table.empty else pd.DataFrame())
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, paper_layout="Table 33: rows Baichuan-2, Qwen-1.5; columns prompted in Simplified | Traditional; "
                            "each cell the top three names",
        layout=dg.MetadataValue.md(markdown_table(layout)), missing_files=dg.MetadataValue.json(missing)))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def name_invalid_class_validation(regional_names: pd.DataFrame,
                                  upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """The deterministic extractor's class for each of the 100 human-annotated invalid answers per model
    (ChatGLM-2, Breeze, GPT-4o; Simplified prompts, Table 20) against the human class: agreement per class and
    model (insufficient ↔ refusal/insufficient_information, multiple ↔ multiple, out-of-list ↔ out_of_list), the
    rules' classes of the rest, and `pct_of_sample` = Table 20's cell (the human breakdown)."""
    source, frames, missing = upstream.open(), [], []
    names = regional_names["name"].tolist()
    for model in invalid_validation.ANNOTATED_MODELS:
        relative = invalid_validation.annotation_file(model)
        try:
            annotations = source.read_csv(relative, ["response", "label"])
        except UpstreamFileMissing:
            missing.append(relative)
            continue
        frames.append(invalid_validation.class_agreement(model, annotations, names, source_name=relative))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    layout = (table[table["human_class"] != "all"].pivot_table(index="human_class", columns="model",
                                                                values="pct_of_sample").reset_index()
              if not table.empty else pd.DataFrame())
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, preview_rows=12, paper_layout="Table 20: rows insufficient / multiple / out-of-list; columns "
                                             "ChatGLM-2, Breeze, GPT-4o; % of the 100 sampled invalid answers",
        table_20=dg.MetadataValue.md(markdown_table(layout)), missing_files=dg.MetadataValue.json(missing)))
