"""Term drift: one model's term answers under two epoch tags, rated as `term_choice_rates` rates them and paired
answer by answer (`lib/drift.py` says how epochs and the cache lookup work; never a model call).

Each epoch's answers are the cached answers to the requests `term_responses` makes (`term_requests`, the same trials
and prompt variants), labelled with the `rules` source (`rules_labels`: the other sources need the published labels
or a judge) and rated by `metrics.choice_rates` on all terms. Per language, prompt variant and measure (`correct`,
`misaligned`): the two rates, their difference, and the exact McNemar test on the answers present in both epochs
(the unit is the answer: term × trial), b = answers with the label in A and without it in B, c = the reverse.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pandas as pd

from sctc_assets.lib.drift import (drift_epochs, found_responses, paired_flips, served_versions, side_columns,
                                   with_epoch)
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.lib.term import metrics
from sctc_assets.lib.term.labelling import rules_labels, scorable

MEASURES = ("correct", "misaligned")
LABEL_SOURCE = "rules"
ANSWER_KEYS = ["prompt_variant", "term_id", "trial"]
# The prompt columns `term_responses` keeps beside each answer.
PROMPT_COLUMNS = ["lang", "prompt_variant", "term_id", "trial", "row", "prompt"]
TERM_DRIFT_COLUMNS = ["model", "lang", "prompt_variant", "label_source", "measure", "epoch_a", "epoch_b", "n_design",
                      "missing_a", "missing_b", "n_a", "n_b", "pct_a", "pct_b", "diff_pct_points", "n_pairs",
                      "mcnemar_b", "mcnemar_c", "p_exact", "flipped_from", "flipped_to", "served_a", "served_b"]


def _items(keys: list[tuple]) -> list[str]:
    """Answers (`ANSWER_KEYS` tuples) as the flip lists name them, `<term_id>#<trial>`, in term and trial order."""
    return [f"{int(term_id)}#{int(trial)}" for _, term_id, trial in sorted(keys)]


def epoch_labels(model: str, selected: pd.DataFrame, results: Sequence[GenerationResult | None],
                 prompts: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One epoch's `rules` labels of the answers found, and the served versions they report."""
    found = found_responses(selected[PROMPT_COLUMNS], results)
    answers = scorable(found.assign(model=model)) if not found.empty else found
    if answers.empty:
        return pd.DataFrame(columns=["model", "lang", *ANSWER_KEYS, "label"]), []
    return rules_labels(answers, prompts), served_versions(answers)


def term_drift_table(model: str, langs: Sequence[str], epochs: Sequence[str], prompts: pd.DataFrame,
                     requests_for: Callable[[str], tuple[pd.DataFrame, list[GenerationRequest]]],
                     lookup: Callable[[list[GenerationRequest]], list[GenerationResult | None]],
                     where: str = "--term-drift") -> pd.DataFrame:
    """`epochs[0]` against `epochs[1]` for one model, per language, prompt variant and measure. `requests_for(lang)`
    gives the language's prompt rows and untagged requests as `term_responses` selects them; `lookup` reads answers
    from the cache."""
    tags = drift_epochs(epochs, where)
    all_terms = {metrics.SUBSET_ALL: set(prompts["term_id"])}
    rows: list[dict[str, Any]] = []
    for lang in langs:
        selected, requests = requests_for(lang)
        labels, served, rates = {}, {}, {}
        for epoch in epochs:
            labels[epoch], served[epoch] = epoch_labels(model, selected, lookup(with_epoch(requests, tags[epoch])),
                                                        prompts)
            rates[epoch] = metrics.choice_rates(labels[epoch], all_terms) if not labels[epoch].empty \
                else metrics.empty_rates()
        for variant in sorted(set(selected["prompt_variant"].astype(int))):
            design = int((selected["prompt_variant"] == variant).sum())
            sides = {epoch: labels[epoch][labels[epoch]["prompt_variant"] == variant].set_index(ANSWER_KEYS)["label"]
                     for epoch in epochs}
            rated = {epoch: rates[epoch][rates[epoch]["prompt_variant"] == variant] for epoch in epochs}
            for measure in MEASURES:
                a, b = (sides[epoch] == measure for epoch in epochs)
                pct = {epoch: float(rated[epoch][f"pct_{measure}"].iloc[0]) if not rated[epoch].empty
                       else float("nan") for epoch in epochs}
                n = {epoch: int(rated[epoch]["n"].iloc[0]) if not rated[epoch].empty else 0 for epoch in epochs}
                pairs = paired_flips(a, b)
                rows.append({
                    "model": model, "lang": lang, "prompt_variant": variant, "label_source": LABEL_SOURCE,
                    "measure": measure, **side_columns(epochs, design, n, pairs, served, _items),
                    "pct_a": pct[epochs[0]], "pct_b": pct[epochs[1]],
                    "diff_pct_points": pct[epochs[1]] - pct[epochs[0]]})
    return pd.DataFrame(rows, columns=TERM_DRIFT_COLUMNS)
