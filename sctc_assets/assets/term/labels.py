"""Labels (correct / misaligned / incorrect) for one model × lang partition, from every available source."""

import dagster as dg
import pandas as pd

from sctc_assets.benchmarks.term import TERM
from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.sctc_upstream import term_judgement_file, term_prompt_file
from sctc_assets.lib.term import lexicon_labels
from sctc_assets.lib.term.labelling import LABEL_COLUMNS, REFUSAL, judge_labels, rules_labels, scorable, upstream_labels
from sctc_assets.lib.term.terms import OTHER_LANG
from sctc_assets.lib.term.upstream_labels import clean_judgements
from sctc_assets.lib.upstream_source import UpstreamFileMissing, UpstreamSchemaError, UpstreamSource
from sctc_assets.assets.partitions import benchmark_partitions, model_and_lang
from sctc_assets.resources.io_manager import OPTIONAL_INPUT
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

GROUP = "term"


def published_label_inputs(
    source: UpstreamSource, upstream_name: str, lang: str, rows_needed: dict[int, int]
) -> tuple[dict[int, list[str]], dict[int, list[int]], list[str]]:
    """The other language's `gt` column and the cleaned GPT-4o-mini verdicts per variant, plus what is missing.

    `rows_needed[variant]` is how many rows the replayed responses of that variant use; a shorter file is an error
    naming it (it would otherwise surface as an IndexError deep in the labelling)."""
    other_gt, verdicts, missing = {}, {}, []
    for variant, needed in sorted(rows_needed.items()):
        prompt_file = term_prompt_file(OTHER_LANG[lang], variant)
        judgement_file = term_judgement_file(upstream_name, lang, variant)
        try:
            gt = source.read_csv(prompt_file, ["gt"])["gt"].tolist()
            raw = source.read_csv(judgement_file, ["correct"])["correct"].tolist()
        except UpstreamFileMissing as exc:
            missing.append(exc.relative_path)
            continue
        for file, values in ((prompt_file, gt), (judgement_file, raw)):
            if len(values) < needed:
                raise UpstreamSchemaError(
                    f"{file}: {len(values)} rows, but the published {upstream_name} {lang} responses of prompt"
                    f" variant {variant} have {needed}: the file is cut short or belongs to another version")
        other_gt[variant] = gt
        verdicts[variant] = clean_judgements(raw, upstream_name=upstream_name, lang=lang, variant=variant,
                                             file=judgement_file)
    return other_gt, verdicts, missing


def lexicon_source_labels(rules: pd.DataFrame, prompts: pd.DataFrame, lexicon_table: pd.DataFrame,
                          upstream_name: str | None) -> pd.DataFrame:
    """The `lexicon` source for the rows the `rules` source labelled (the same answers). `upstream_name`: the paper
    model a replay partition replays (its own published labels are left out, and its answers are read as the
    judge saw them), None for any other model."""
    items = rules[["lang", "prompt_variant", "trial", "term_id"]].merge(
        prompts[["lang", "prompt_variant", "trial", "term_id", "expected", "other_region_term"]], how="left",
        on=["lang", "prompt_variant", "trial", "term_id"])
    frame = rules.reset_index(drop=True).assign(expected=items["expected"].to_numpy(),
                                                other_region_term=items["other_region_term"].to_numpy())
    lexicon = lexicon_labels.lexicon_from_table(lexicon_table) if not lexicon_table.empty else None
    forms = lexicon_labels.misaligned_forms(frame)
    decided = lexicon_labels.label_frame(frame, [bool(found) for found in forms], lexicon,
                                         exclude_model=upstream_name, upstream_name=upstream_name)
    label = decided["label"].to_numpy(dtype=object)
    if "outcome" in frame:  # a refusal is incorrect for every source (see lib/term/labelling.py)
        label[(frame["outcome"] == REFUSAL).to_numpy()] = "incorrect"
    labels = frame.assign(label_source="lexicon", label=label, misaligned_forms=[", ".join(found) for found in forms])
    return labels[LABEL_COLUMNS]


@catalogued
@dg.asset(partitions_def=benchmark_partitions(TERM), group_name=GROUP, kinds={"pandas", "parquet"},
          ins={"term_verdict_lexicon": dg.AssetIn(metadata={OPTIONAL_INPUT: True})})
def term_labels(
    context: dg.AssetExecutionContext,
    term_responses: pd.DataFrame,
    term_prompts: pd.DataFrame,
    term_judgements: pd.DataFrame,
    term_verdict_lexicon: pd.DataFrame,
    models: ModelRegistryResource,
    upstream: SCTCUpstreamResource,
) -> dg.Output[pd.DataFrame]:
    """Long label table: `model, lang, prompt_variant, term_id, trial, response, label_source, label` (+ the
    misaligned forms found and the answer's `outcome`).
    A refusal is `incorrect` in every source (`outcome` = refusal tells it apart); errors are left out.

    Sources: `rules` (ours, always), `lexicon` (ours: answer extraction, the authors' misalignment test and the
    published-label lexicon, never with a paper model's own labels; without `term_verdict_lexicon` its fixed rules
    alone),
    `upstream` (replay models: the authors' published GPT-4o-mini verdicts with their misalignment rule,
    reproducing the paper's numbers) and `judge` (when `term_judgements` has verdicts).
    Scoring never calls a model; re-materializing this asset only re-reads stored answers."""
    model, lang = model_and_lang(context)
    frames = [rules_labels(term_responses, term_prompts)] if not term_responses.empty else []
    notes: list[str] = []
    entry = models.entry(model)
    replayed = traits(entry.backend).replays_benchmark("term")  # the paper's published answers and labels
    if frames:
        own = str(entry.settings["upstream_name"]) if replayed else None
        frames.append(lexicon_source_labels(frames[0], term_prompts, term_verdict_lexicon, own))
    if replayed and not term_responses.empty:
        answered = scorable(term_responses)
        rows_needed = {int(variant): int(rows.max()) + 1 for variant, rows in answered.groupby("prompt_variant")["row"]}
        other_gt, verdicts, missing = published_label_inputs(
            upstream.open(), str(entry.settings["upstream_name"]), lang, rows_needed)
        notes += [f"upstream labels skipped: file missing {path}" for path in missing]
        frames.append(upstream_labels(term_responses, other_gt, verdicts))
    without_verdict = 0
    if not term_judgements.empty:
        judged, without_verdict = judge_labels(term_responses, term_prompts, term_judgements)
        frames.append(judged)
        if without_verdict:
            notes.append(f"judge labels: {without_verdict} answers left out (the judge gave no verdict and the"
                         " answer is not misaligned)")
    for note in notes:
        context.log.warning(f"term_labels {model}/{lang}: {note}")
    labels = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=LABEL_COLUMNS)
    distribution = (labels.groupby(["label_source", "label"]).size().unstack(fill_value=0).to_dict("index")
                    if not labels.empty else {})
    excluded = int((~term_responses["outcome"].isin(["ok", "refusal"])).sum()) if not term_responses.empty else 0
    refusals = int((term_responses["outcome"] == "refusal").sum()) if not term_responses.empty else 0
    return dg.Output(labels, data_version=content_version(labels), metadata=table_metadata(
        labels, label_distribution=dg.MetadataValue.json(distribution), notes=dg.MetadataValue.json(notes),
        excluded_errors=excluded, refusals_labelled_incorrect=refusals, judge_without_verdict=without_verdict))
