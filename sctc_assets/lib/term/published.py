"""The paper models' published term answers with the authors' labels, read straight from the upstream data.

What the `lexicon` label source learns from, and what the label-source comparison measures against: every
answer of the 11 LLMs (both languages, the prompt variants present) with its `upstream` label (GPT-4o-mini
verdict + the authors' misalignment rule) and its `rules` label.
"""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from sctc_assets.lib.sctc_upstream import (PAPER_MODELS, term_judgement_file, term_prompt_file,
                                           term_response_file)
from sctc_assets.lib.term.labels import label_answer, term_forms
from sctc_assets.lib.term.prompts import PROMPT_VARIANTS
from sctc_assets.lib.term.terms import LANGS, OTHER_LANG
from sctc_assets.lib.term.upstream_labels import clean_judgements, upstream_label, upstream_misaligned
from sctc_assets.lib.upstream_source import UpstreamFileMissing, UpstreamSource

PUBLISHED_COLUMNS = ["model", "lang", "prompt_variant", "term_id", "trial", "row", "response", "expected",
                     "other_region_term", "upstream_label", "rules_label"]


def published_term_labels(
    source: UpstreamSource, prompts: pd.DataFrame, *, models: Iterable[str] = PAPER_MODELS,
    variants: Iterable[int] = PROMPT_VARIANTS,
) -> tuple[pd.DataFrame, list[str]]:
    """All published answers with their `upstream` and `rules` labels, and the upstream files that are missing.

    `prompts` is the `term_prompts` table (it supplies the term, trial, expected and other-region forms of each
    row). DeepSeek-R1 is read from its `_no_think` files, as the authors and the replay backend do."""
    frames, missing = [], []
    for variant in variants:
        for lang in LANGS:
            block = prompts[(prompts["lang"] == lang) & (prompts["prompt_variant"] == variant)].sort_values("row")
            if block.empty:
                continue
            try:
                other_gt = source.read_csv(term_prompt_file(OTHER_LANG[lang], variant), ["gt"])["gt"].tolist()
            except UpstreamFileMissing as exc:
                missing.append(exc.relative_path)
                continue
            forms = [term_forms(lang, expected, other) for expected, other in
                     zip(block["expected"], block["other_region"])]
            for model in models:
                try:
                    responses = source.read_csv(term_response_file(model, lang, variant, no_think=model == "ds"),
                                                ["response"])["response"].tolist()
                    file = term_judgement_file(model, lang, variant)
                    verdicts = clean_judgements(source.read_csv(file, ["correct"])["correct"].tolist(),
                                                upstream_name=model, lang=lang, variant=variant, file=file)
                except UpstreamFileMissing as exc:
                    missing.append(exc.relative_path)
                    continue
                rows = block.iloc[:min(len(responses), len(verdicts), len(block))]
                answers = [value if isinstance(value, str) else None for value in responses[:len(rows)]]
                frame = rows[["lang", "prompt_variant", "term_id", "trial", "row", "expected",
                              "other_region_term"]].copy()
                frame.insert(0, "model", model)
                frame["response"] = answers
                frame["upstream_label"] = [
                    upstream_label(upstream_misaligned(other_gt[row], answer, lang), verdicts[row])
                    for row, answer in zip(rows["row"], answers)]
                frame["rules_label"] = [label_answer(answer, form) for answer, form in zip(answers, forms)]
                frames.append(frame)
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=PUBLISHED_COLUMNS)
    return table[PUBLISHED_COLUMNS], missing


def agreement_by_group(truth: pd.Series, predicted: pd.Series, model: pd.Series, lang: pd.Series) -> pd.DataFrame:
    """Share of rows where `predicted` equals `truth`, per model × lang, with the counts behind it."""
    frame = pd.DataFrame({"model": model.to_numpy(), "lang": lang.to_numpy(),
                          "agree": (truth.to_numpy() == predicted.to_numpy())})
    grouped = frame.groupby(["model", "lang"])["agree"]
    return pd.DataFrame({"n": grouped.size(), "n_agree": grouped.sum().astype(int),
                         "agreement": grouped.mean()}).reset_index()
