"""The `lexicon` label source's inputs and the comparison of every label source with the published verdicts."""

import dagster as dg
import pandas as pd

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import markdown_table, table_metadata
from sctc_assets.lib.term import lexicon_labels
from sctc_assets.lib.term.published import agreement_by_group, published_term_labels
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "term"


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def term_published_labels(term_prompts: pd.DataFrame, upstream: SCTCUpstreamResource) -> dg.Output[pd.DataFrame]:
    """Every published answer of the 11 paper LLMs (both languages, all prompt variants) with the authors' label
    (`upstream_label`: GPT-4o-mini verdict + their misalignment rule) and the `rules` label: what the `lexicon`
    source learns from and what `term_label_source_agreement` measures against."""
    table, missing = published_term_labels(upstream.open(), term_prompts)
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table.drop(columns=["response", "expected"]), missing_files=dg.MetadataValue.json(missing)))


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def term_verdict_lexicon(term_published_labels: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Per (lang, term, extracted answer, paper model): the shares of the authors' labels that answer got. The
    `lexicon` label source votes with the other models' shares (never the labelled model's own)."""
    lexicon = lexicon_labels.build_lexicon(term_published_labels.rename(columns={"upstream_label": "label"}))
    return dg.Output(lexicon.table, metadata=table_metadata(
        lexicon.table, keys=int(lexicon.table[["lang", "term_id", "answer_key"]].drop_duplicates().shape[0]),
        min_models=lexicon.min_models))


def lexicon_labels_of_published(published: pd.DataFrame, lexicon: lexicon_labels.VerdictLexicon,
                                settings: lexicon_labels.LexiconSettings) -> dict[str, pd.Series]:
    """The `lexicon` labels (with `settings`) of every published answer: `leave_one_model_out` (each model
    labelled without its own labels) and `in_sample` (with all of them)."""
    predicted: dict[str, list[pd.Series]] = {"leave_one_model_out": [], "in_sample": []}
    for model, frame in published.groupby("model", sort=False):
        misaligned = ([bool(found) for found in lexicon_labels.misaligned_forms(frame)]
                      if settings.authors_misalignment else frame["rules_label"] == "misaligned")
        fixed = lexicon_labels.fixed_labels(frame, misaligned, upstream_name=model, settings=settings)
        for evaluation, excluded in (("leave_one_model_out", (model,)), ("in_sample", ())):
            predicted[evaluation].append(lexicon_labels.apply_lexicon(
                fixed, frame, lexicon, exclude_models=excluded, settings=settings)["label"])
    return {evaluation: pd.concat(labels).reindex(published.index) for evaluation, labels in predicted.items()}


AGREEMENT_COLUMNS = ["label_source", "evaluation", "model", "lang", "n", "n_agree", "agreement"]


def _rows(truth: pd.Series, predicted: pd.Series, model: pd.Series, lang: pd.Series, source: str,
          evaluation: str) -> pd.DataFrame:
    table = agreement_by_group(truth, predicted, model, lang)
    table["label_source"], table["evaluation"] = source, evaluation
    return table


def label_source_agreement(published: pd.DataFrame, lexicon: pd.DataFrame,
                           labels: pd.DataFrame | None = None) -> pd.DataFrame:
    """Agreement with the authors' label per paper model × lang (their upstream file names) for: `rules`;
    `lexicon` leave-one-model-out (each model labelled with a lexicon without its own labels: what `term_labels`
    stores for the replay models) and in-sample (the lexicon with every model's labels); `lexicon_v1`, the first
    version's settings (`lexicon_labels.V1`, its own lexicon built here), for comparison only; and, where `labels`
    (the `term_labels` table) holds `judge` rows for replay models, the judge against their `upstream` rows.
    `mean` / `worst` rows per source and evaluation summarise the groups."""
    frames = [_rows(published["upstream_label"], published["rules_label"], published["model"], published["lang"],
                    "rules", "fixed_rules")]
    if not lexicon.empty:
        lexicons = {
            "lexicon": (lexicon_labels.lexicon_from_table(lexicon), lexicon_labels.CURRENT),
            "lexicon_v1": (lexicon_labels.build_lexicon(published.rename(columns={"upstream_label": "label"}),
                                                        lexicon_labels.V1), lexicon_labels.V1),
        }
        for source, (table, settings) in lexicons.items():
            for evaluation, predicted in lexicon_labels_of_published(published, table, settings).items():
                frames.append(_rows(published["upstream_label"], predicted, published["model"], published["lang"],
                                    source, evaluation))
    if labels is not None and not labels.empty and {"judge", "upstream"} <= set(labels["label_source"]):
        keys = ["model", "lang", "prompt_variant", "term_id", "trial"]
        truth = labels[labels["label_source"] == "upstream"].set_index(keys)["label"].rename("upstream_label")
        judged = labels[labels["label_source"] == "judge"].join(truth, on=keys, how="inner")
        if not judged.empty:
            frames.append(_rows(judged["upstream_label"], judged["label"], judged["model"], judged["lang"],
                                "judge", "fixed_rules"))
    groups = pd.concat(frames, ignore_index=True)
    summary = []
    for (source, evaluation), frame in groups.groupby(["label_source", "evaluation"], sort=False):
        worst = frame.loc[frame["agreement"].idxmin()]
        summary.append({"label_source": source, "evaluation": evaluation, "model": "mean", "lang": "all",
                        "n": int(frame["n"].sum()), "n_agree": int(frame["n_agree"].sum()),
                        "agreement": float(frame["agreement"].mean())})
        summary.append({"label_source": source, "evaluation": evaluation, "model": "worst",
                        "lang": f"{worst['model']}/{worst['lang']}", "n": int(worst["n"]),
                        "n_agree": int(worst["n_agree"]), "agreement": float(worst["agreement"])})
    table = pd.concat([groups, pd.DataFrame(summary)], ignore_index=True)
    return table[AGREEMENT_COLUMNS].reset_index(drop=True)


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def term_label_source_agreement(term_published_labels: pd.DataFrame, term_verdict_lexicon: pd.DataFrame,
                                term_labels: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Every label source against the authors' published labels (GPT-4o-mini verdicts + their misalignment rule),
    per paper model × lang over all prompt variants, with mean and worst group: `rules` (and a configured `judge`)
    as fixed rules, `lexicon` (and, for comparison, its first version `lexicon_v1`) leave-one-model-out and
    in-sample."""
    table = label_source_agreement(term_published_labels, term_verdict_lexicon, term_labels)
    summary = table[table["model"].isin(["mean", "worst"])]
    return dg.Output(table, metadata=table_metadata(
        table, preview_rows=40, summary=dg.MetadataValue.md(markdown_table(summary, rows=20))))
