"""Drift: one registry key's answers at two times (two epoch tags, `--sovereignty-epoch`), compared prompt by prompt.

How epochs, the cache lookup and the pairing work is `lib/drift.py`'s, shared with the term and name benchmarks.
`drift_table` never calls a model: it rebuilds each epoch's requests, reads their answers from the cache
(`cached_answers`), scores them with the benchmark's rules (`code` and `paper`; reviews and the judge are not applied)
and, per scoring rule and language, pairs the two epochs' outcomes: exact McNemar (b = pass in A and fail in B,
c = the reverse), and the prompts that flipped. An answer the cache lacks is `missing` (counted, never a failure);
with several samples per prompt the pairs are prompts, passing by a strict majority of their samples, as in
`metrics`. Each side's served model ids and system fingerprints (what the API reported) are listed beside, so a
change of served version shows next to the drift it brought.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from sctc_assets.lib import stats
from sctc_assets.lib.drift import drift_epochs, epoch_tag, served_versions, with_epoch
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.lib.sovereignty.flags import flag_table, missing_answer
from sctc_assets.lib.sovereignty.scoring import score

DRIFT_RULES = ("code", "paper")
DRIFT_COLUMNS = ["model", "scoring_rule", "prompt_set", "lang", "epoch_a", "epoch_b", "unit", "n_design",
                 "answered_a", "answered_b", "missing_a", "missing_b", "n_pairs", "passed_a", "passed_b",
                 "mcnemar_b", "mcnemar_c", "p_exact", "flipped", "flipped_to_fail", "flipped_to_pass", "served_a",
                 "served_b"]


def run_epoch(configured: str | None, model_settings: Mapping[str, Any] | None) -> str | None:
    """The run's epoch tag: the configured one, else the registry's `benchmarks.sovereignty.epoch`, else none."""
    if configured:
        return epoch_tag(configured)
    return epoch_tag((model_settings or {}).get("epoch"), where="registry benchmarks.sovereignty.epoch")


def answer_rows(items: Sequence[Mapping[str, Any]], results: Sequence[GenerationResult | None]) -> pd.DataFrame:
    """The answers found as `sovereignty_responses` rows hold them (an empty answer is no answer)."""
    rows = []
    for item, result in zip(items, results):
        if result is None:
            continue
        record = {**item, **result.to_record()}
        if record["outcome"] == "ok" and missing_answer(record["text"]):
            continue
        rows.append({**record, "response": record.pop("text")})
    return pd.DataFrame(rows)


def _units(passed: pd.DataFrame, several: bool) -> pd.Series:
    """Pass/fail per pairing unit: the answer (prompt, sample), or with several samples the prompt by majority."""
    if not several:
        return passed.set_index(["prompt_set", "prompt_id", "sample"])["passed"].astype(bool)
    grouped = passed.groupby(["prompt_set", "prompt_id"])["passed"]
    return (grouped.sum() * 2 > grouped.size()).rename("passed")


def _label(key: tuple) -> str:
    """A unit's name: the prompt id, with `#sample` for a later sample of a prompt (one answer per unit)."""
    return str(key[1]) if len(key) == 2 or key[2] == 0 else f"{key[1]}#{key[2]}"


def compare_epochs(model: str, lang: str, epochs: tuple[str, str], design: int, samples: int,
                   scored: Mapping[str, pd.DataFrame], served: Mapping[str, list[str]],
                   answered: Mapping[str, int]) -> list[dict[str, Any]]:
    """One row per rule and prompt set: the two epochs' outcomes paired, McNemar and the flips."""
    several = samples > 1
    rows = []
    first, second = (scored[epoch] for epoch in epochs)
    prompt_sets = sorted(set(first.get("prompt_set", pd.Series(dtype=str))) |
                         set(second.get("prompt_set", pd.Series(dtype=str))))
    for rule in DRIFT_RULES:
        for prompt_set in prompt_sets or [""]:
            sides = []
            for frame in (first, second):
                part = frame[(frame["scoring_rule"] == rule) & (frame["prompt_set"] == prompt_set)] \
                    if not frame.empty else frame
                sides.append(_units(part, several) if not part.empty else pd.Series(dtype=bool))
            a, b = sides
            if len(a) and len(b):
                both = a.index.intersection(b.index)
                pass_a, pass_b = a.loc[both].astype(bool), b.loc[both].astype(bool)
                to_fail = sorted(_label(key) for key in both[(pass_a & ~pass_b).to_numpy()])
                to_pass = sorted(_label(key) for key in both[(~pass_a & pass_b).to_numpy()])
            else:  # an epoch with no answer here: nothing to pair
                both, pass_a, pass_b, to_fail, to_pass = [], pd.Series(dtype=bool), pd.Series(dtype=bool), [], []
            _, _, p_exact = stats.mcnemar(len(to_fail), len(to_pass))
            rows.append({"model": model, "scoring_rule": rule, "prompt_set": prompt_set, "lang": lang,
                         "epoch_a": epochs[0], "epoch_b": epochs[1], "unit": "prompt" if several else "response",
                         "n_design": design, "answered_a": answered[epochs[0]], "answered_b": answered[epochs[1]],
                         "missing_a": design - answered[epochs[0]], "missing_b": design - answered[epochs[1]],
                         "n_pairs": len(both), "passed_a": int(pass_a.sum()), "passed_b": int(pass_b.sum()),
                         "mcnemar_b": len(to_fail), "mcnemar_c": len(to_pass), "p_exact": p_exact,
                         "flipped": sorted(to_fail + to_pass), "flipped_to_fail": to_fail, "flipped_to_pass": to_pass,
                         "served_a": served[epochs[0]], "served_b": served[epochs[1]]})
    return rows


def drift_table(model: str, langs: Sequence[str], epochs: Sequence[str], red_flags: Any, samples: int,
                requests_for: Callable[[str], tuple[list[dict[str, Any]], list[GenerationRequest]]],
                lookup: Callable[[list[GenerationRequest]], list[GenerationResult | None]]) -> pd.DataFrame:
    """Per scoring rule and language: `epochs[0]` against `epochs[1]` for one model. `requests_for(lang)` builds the
    language's untagged items and requests as `sovereignty_responses` does; `lookup` reads answers from the cache."""
    tags = drift_epochs(epochs, "--sovereignty-drift")
    rows: list[dict[str, Any]] = []
    for lang in langs:
        items, requests = requests_for(lang)
        scored, served, answered = {}, {}, {}
        for epoch in epochs:
            answers = answer_rows(items, lookup(with_epoch(requests, tags[epoch])))
            answered[epoch] = len(answers)
            served[epoch] = served_versions(answers)
            scored[epoch] = score(flag_table(answers, red_flags), None, errors_are_data=False) \
                if not answers.empty else pd.DataFrame(columns=["scoring_rule", "prompt_set"])
        rows += compare_epochs(model, lang, (epochs[0], epochs[1]), len(items), samples, scored, served, answered)
    return pd.DataFrame(rows, columns=DRIFT_COLUMNS)
