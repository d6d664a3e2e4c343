"""Frame-level labelling of one (model, lang) partition, for each label source.

A refusal (outcome `refusal`, whatever text came with it) is labelled `incorrect` by every source, as the paper
counts an answer without the term; the `outcome` column keeps it apart, so the rates can count refusals
(`n_refusal`) among the incorrect answers. An `ok` answer without text is an answer without the term (incorrect).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from sctc_assets.lib.generation import stored_text, strip_reasoning
from sctc_assets.lib.term.labels import combine_with_judge, find_misaligned, term_forms
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


def _forms_key(lang: object, expected: object, other_region: object) -> tuple | None:
    """What `term_forms` depends on, hashable (None: not hashable, computed for the row alone)."""
    try:
        key = (lang, tuple(expected), tuple(other_region))
        hash(key)
    except TypeError:
        return None
    return key


def _rules_label(response: object, forms) -> tuple[str, str]:
    """The misaligned forms found (joined) and the label of one answer: `label_answer`, with the answer's
    reasoning stripped and its misaligned forms searched once."""
    text = strip_reasoning(response)
    found = find_misaligned(text, forms)
    if found:
        return ", ".join(found), "misaligned"
    return "", "correct" if any(term in text for term in forms.expected) else "incorrect"


def rules_labels(responses: pd.DataFrame, prompts: pd.DataFrame) -> pd.DataFrame:
    """Each term's forms are built once, and each distinct answer to a term labelled once (answers repeat)."""
    merged = _with_prompts(responses, prompts)
    labels, hits = [], []
    forms_of: dict[tuple, object] = {}
    labelled: dict[tuple, tuple[str, str]] = {}
    for outcome, lang, expected, other_region, response in zip(
            merged["outcome"].tolist(), merged["lang"].tolist(), merged["expected"].tolist(),
            merged["other_region"].tolist(), merged["response"].tolist()):
        if outcome == REFUSAL:
            hits.append("")
            labels.append("incorrect")
            continue
        key = _forms_key(lang, expected, other_region)
        if key is None:
            hit, label = _rules_label(response, term_forms(lang, expected, other_region))
        else:
            text = stored_text(response)
            answer = (key, text)
            if answer not in labelled:
                if key not in forms_of:
                    forms_of[key] = term_forms(lang, expected, other_region)
                labelled[answer] = _rules_label(text, forms_of[key])
            hit, label = labelled[answer]
        hits.append(hit)
        labels.append(label)
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
    misaligned_of: dict[tuple, bool] = {}  # answers repeat: each distinct (term, answer, lang) tested once
    for outcome, variant, row, response, lang in zip(
            frame["outcome"].tolist(), frame["prompt_variant"].tolist(), frame["row"].tolist(),
            frame["response"].tolist(), frame["lang"].tolist()):
        if outcome == REFUSAL:
            labels.append("incorrect")
            continue
        variant, row = int(variant), int(row)
        key = (other_region_gt[variant][row], stored_text(response), lang)
        if key not in misaligned_of:
            misaligned_of[key] = upstream_misaligned(*key)
        labels.append(upstream_label(misaligned_of[key], judged_correct[variant][row]))
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
