"""Frame-level labelling of one (model, lang) partition, for each label source.

A refusal (outcome `refusal`, whatever text came with it) is labelled `incorrect` by every source, as the paper
counts an answer without the term; the `outcome` column keeps it apart, so the rates can count refusals
(`n_refusal`) among the incorrect answers. An `ok` answer without text is an answer without the term (incorrect).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from sctc_assets.lib.generation import stored_text, strip_reasoning
from sctc_assets.lib.term.labels import combine_with_judge, find_misaligned, label_answer, term_forms
from sctc_assets.lib.term.upstream_labels import upstream_label, upstream_misaligned

ITEM_KEYS = ["lang", "prompt_variant", "trial", "term_id"]
LABEL_COLUMNS = ["model", "lang", "prompt_variant", "term_id", "trial", "response", "label_source", "label",
                 "misaligned_forms", "outcome"]
SCORABLE_OUTCOMES = ("ok", "refusal")
REFUSAL = "refusal"


def scorable(responses: pd.DataFrame) -> pd.DataFrame:
    """Answers a label can be given to: transport errors and replay gaps are left out (and reported)."""
    return responses[responses["outcome"].isin(SCORABLE_OUTCOMES)]


def _with_prompts(responses: pd.DataFrame, prompts: pd.DataFrame) -> pd.DataFrame:
    columns = ITEM_KEYS + ["expected", "other_region", "gt", "prompt"]
    merged = scorable(responses).merge(prompts[columns].rename(columns={"prompt": "prompt_text"}), on=ITEM_KEYS,
                                       how="left", validate="one_to_one")
    unknown = merged["expected"].isna()
    if unknown.any():
        first = merged.loc[unknown, ITEM_KEYS].iloc[0].to_dict()
        raise ValueError(f"{int(unknown.sum())} responses have no matching prompt (first: {first})")
    return merged


def rules_labels(responses: pd.DataFrame, prompts: pd.DataFrame) -> pd.DataFrame:
    merged = _with_prompts(responses, prompts)
    labels, hits = [], []
    for record in merged.to_dict("records"):
        if record["outcome"] == REFUSAL:
            hits.append("")
            labels.append("incorrect")
            continue
        forms = term_forms(record["lang"], record["expected"], record["other_region"])
        hits.append(", ".join(find_misaligned(strip_reasoning(record["response"]), forms)))
        labels.append(label_answer(record["response"], forms))
    merged["label_source"] = "rules"
    merged["label"] = labels
    merged["misaligned_forms"] = hits
    return merged[LABEL_COLUMNS]


def upstream_labels(
    responses: pd.DataFrame,
    other_region_gt: Mapping[int, Sequence[str]],
    judged_correct: Mapping[int, Sequence[int]],
) -> pd.DataFrame:
    """The authors' labels for replayed responses.

    `other_region_gt[variant][row]` is the other language's `gt` from its upstream prompt file and
    `judged_correct[variant][row]` the cleaned GPT-4o-mini verdict; variants absent from either are skipped. Both
    must reach every row of the responses (`published_label_inputs` checks this, naming the file).
    """
    frame = scorable(responses)
    frame = frame[frame["prompt_variant"].isin(set(other_region_gt) & set(judged_correct))].copy()
    labels = []
    for record in frame.to_dict("records"):
        if record["outcome"] == REFUSAL:
            labels.append("incorrect")
            continue
        variant, row = int(record["prompt_variant"]), int(record["row"])
        misaligned = upstream_misaligned(other_region_gt[variant][row], stored_text(record["response"]),
                                         record["lang"])
        labels.append(upstream_label(misaligned, judged_correct[variant][row]))
    frame["label_source"] = "upstream"
    frame["label"] = labels
    frame["misaligned_forms"] = ""
    return frame[LABEL_COLUMNS]


def judge_labels(
    responses: pd.DataFrame, prompts: pd.DataFrame, judgements: pd.DataFrame
) -> tuple[pd.DataFrame, int]:
    """The judge's correct/incorrect verdict combined with the rules' misalignment test (misaligned wins).

    Answers without a verdict (the judge failed, refused or answered neither 0 nor 1) are left out unless they are
    misaligned, which needs no verdict; counting them as incorrect would blame the model for the judge. A refusal
    of the model is incorrect whatever the judge says. Returns the labels and the number of answers left out.
    """
    verdicts = judgements[ITEM_KEYS + ["judge_correct"]]
    merged = _with_prompts(responses, prompts).merge(verdicts, on=ITEM_KEYS, how="inner")
    labels, hits = [], []
    for record in merged.to_dict("records"):
        if record["outcome"] == REFUSAL:
            hits.append("")
            labels.append("incorrect")
            continue
        forms = term_forms(record["lang"], record["expected"], record["other_region"])
        found = find_misaligned(strip_reasoning(record["response"]), forms)
        hits.append(", ".join(found))
        verdict = record["judge_correct"]
        labels.append(combine_with_judge(bool(found), None if pd.isna(verdict) else bool(verdict)))
    merged["label_source"] = "judge"
    merged["label"] = labels
    merged["misaligned_forms"] = hits
    kept = merged[merged["judge_correct"].notna().to_numpy() | (merged["label"] == "misaligned").to_numpy()
                  | (merged["outcome"] == REFUSAL).to_numpy()]
    return kept[LABEL_COLUMNS], len(merged) - len(kept)
