"""Name drift: one model's name answers under two epoch tags, rated as `name_choice_rates` rates them and paired
answer by answer (`lib/drift.py` says how epochs and the cache lookup work; never a model call).

Each epoch's answers are the cached answers to the requests `name_responses` makes (`prompts_to_ask`, the paper's
wording, the same experiments, lists, shuffles and list source), extracted by the deterministic `rules` extractor
(`rules_selections`; the published extraction and a judge are not applied) and rated by `metrics.choice_rates`.
Per language, experiment and candidate scope: the Mainland rate among the valid answers in each epoch, its change,
and the exact McNemar test on the answers valid in both epochs (the unit is the answer: candidate list × shuffle),
b = the Mainland candidate chosen in A and not in B, c = the reverse.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pandas as pd

from sctc_assets.lib.drift import (drift_epochs, found_responses, paired_flips, served_versions, side_columns,
                                   with_epoch)
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.lib.name import metrics
from sctc_assets.lib.name.selections import ROW_KEYS, SCORABLE_OUTCOMES, rules_selections

EXTRACTION_SOURCE = "rules"
MEASURE = "mainland"
# The prompt columns `name_responses` keeps beside each answer.
PROMPT_COLUMNS = ["lang", "prompt_variant", "experiment", "list_source", "list_id", "shuffle", "row", "prompt"]
NAME_DRIFT_COLUMNS = ["model", "lang", "experiment", "candidate_scope", "extraction_source", "measure", "epoch_a",
                      "epoch_b", "n_design", "missing_a", "missing_b", "n_a", "n_b", "n_valid_a", "n_valid_b",
                      "rate_a", "rate_b", "difference", "n_pairs", "mcnemar_b", "mcnemar_c", "p_exact",
                      "flipped_from", "flipped_to", "served_a", "served_b"]


def _items(keys: list[tuple]) -> list[str]:
    """Answers (`ROW_KEYS` tuples) as the flip lists name them, `<list_source>:<list_id>#<shuffle>`."""
    return [f"{source}:{list_id}#{int(shuffle)}" for _, source, list_id, shuffle, _ in sorted(keys)]


def epoch_selections(model: str, selected: pd.DataFrame, results: Sequence[GenerationResult | None],
                     lists: pd.DataFrame, names: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One epoch's `rules` selections of the answers found, and the served versions they report."""
    found = found_responses(selected[PROMPT_COLUMNS], results).assign(model=model)
    answers = found[found["outcome"].isin(SCORABLE_OUTCOMES)]
    if answers.empty:
        return pd.DataFrame(columns=["model", "lang", *ROW_KEYS, "candidate_scope", "region", "status"]), []
    return rules_selections(answers, lists, names), served_versions(answers)


def name_drift_table(model: str, langs: Sequence[str], epochs: Sequence[str], lists: pd.DataFrame,
                     names: pd.DataFrame,
                     requests_for: Callable[[str], tuple[pd.DataFrame, list[GenerationRequest]]],
                     lookup: Callable[[list[GenerationRequest]], list[GenerationResult | None]],
                     where: str = "--name-drift") -> pd.DataFrame:
    """`epochs[0]` against `epochs[1]` for one model, per language, experiment and candidate scope.
    `requests_for(lang)` gives the language's prompt rows (the paper's wording) and untagged requests as
    `name_responses` selects them; `lookup` reads answers from the cache."""
    tags = drift_epochs(epochs, where)
    rows: list[dict[str, Any]] = []
    for lang in langs:
        selected, requests = requests_for(lang)
        chosen, served, rates = {}, {}, {}
        for epoch in epochs:
            chosen[epoch], served[epoch] = epoch_selections(model, selected, lookup(with_epoch(requests, tags[epoch])),
                                                            lists, names)
            rates[epoch] = metrics.choice_rates(chosen[epoch])
        groups = sorted({(r["experiment"], r["candidate_scope"]) for epoch in epochs
                         for r in rates[epoch][["experiment", "candidate_scope"]].to_dict("records")})
        for experiment, scope in groups:
            design = int((selected["experiment"] == experiment).sum())
            sides, rated = {}, {}
            for epoch in epochs:
                frame = chosen[epoch]
                part = frame[(frame["experiment"] == experiment) & (frame["candidate_scope"] == scope)
                             & frame["region"].notna()]
                sides[epoch] = (part.set_index(ROW_KEYS)["region"] == MEASURE)
                table = rates[epoch]
                rated[epoch] = table[(table["experiment"] == experiment) & (table["candidate_scope"] == scope)]
            n = {epoch: int(rated[epoch]["n"].iloc[0]) if not rated[epoch].empty else 0 for epoch in epochs}
            valid = {epoch: int(rated[epoch]["n_valid"].iloc[0]) if not rated[epoch].empty else 0 for epoch in epochs}
            rate = {epoch: float(rated[epoch]["mainland_rate"].iloc[0]) if valid[epoch] else float("nan")
                    for epoch in epochs}
            pairs = paired_flips(sides[epochs[0]], sides[epochs[1]])
            rows.append({
                "model": model, "lang": lang, "experiment": experiment, "candidate_scope": scope,
                "extraction_source": EXTRACTION_SOURCE, "measure": MEASURE,
                **side_columns(epochs, design, n, pairs, served, _items),
                "n_valid_a": valid[epochs[0]], "n_valid_b": valid[epochs[1]], "rate_a": rate[epochs[0]],
                "rate_b": rate[epochs[1]], "difference": rate[epochs[1]] - rate[epochs[0]]})
    return pd.DataFrame(rows, columns=NAME_DRIFT_COLUMNS)
