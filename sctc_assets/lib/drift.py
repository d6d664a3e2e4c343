"""Drift: one registry key's answers at two times, compared item by item, from the response cache alone.

An epoch tag enters the request's cache identity (`lib/cache_common.request_identity`): asking again under a new tag
(`--sovereignty-epoch`, or the `served-<12hex>` tag of an observed entry's served version, `lib/served_model.py`) is a
new sample, and the cache keeps both answers; without a tag the keys are the ones they always were, named `none`
here. A drift table never calls a model: it rebuilds each epoch's requests as the responses asset builds them, reads
their answers from the cache (`cached_answers`), scores them with the benchmark's own rules, and pairs the two
epochs' outcomes on the items answered in both: exact McNemar (b = the outcome in A and not in B, c = the reverse,
`paired_flips`). An answer the cache lacks is missing (counted, never a failure). Each side's served model ids and
system fingerprints (what the API reported, `served_versions`) are listed beside, so a change of served version shows
next to the drift it brought. The sovereignty benchmark's table is `lib/sovereignty/drift.py`; the term and name
benchmarks' are `lib/term/drift.py` and `lib/name/drift.py`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from sctc_assets.lib import stats
from sctc_assets.lib.cache_common import cache_key
from sctc_assets.lib.generation import GenerationRequest, GenerationResult, result_columns

# The name of the untagged answers (no epoch tag): their keys carry no epoch.
NO_EPOCH = "none"
EPOCH_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")


def epoch_tag(value: Any, *, where: str = "--sovereignty-epoch") -> str | None:
    """A valid epoch tag, or None for no tag (unset, empty or `none`)."""
    if value is None or value == "" or value == NO_EPOCH:
        return None
    if not isinstance(value, str) or not EPOCH_PATTERN.match(value):
        raise ValueError(f"{where}: epoch tag {value!r}: expected letters, digits, '.', '_', ':' or '-' (at most 64, "
                         "starting with a letter or digit), e.g. 2026-08")
    return value


def drift_epochs(epochs: Sequence[str], where: str) -> dict[str, str | None]:
    """Each of the two epochs named (`where`: the option or config naming them) → its tag (None: untagged)."""
    if len(epochs) != 2 or epochs[0] == epochs[1]:
        raise ValueError(f"{where}: expected two different epoch tags, got {list(epochs)}")
    return {epoch: epoch_tag(epoch, where=where) for epoch in epochs}


def with_epoch(requests: Sequence[GenerationRequest], epoch: str | None) -> list[GenerationRequest]:
    return [dataclasses.replace(request, epoch=epoch) for request in requests] if epoch else list(requests)


def cached_answers(backend: Any, cache: Any, requests: Sequence[GenerationRequest]) -> list[GenerationResult | None]:
    """Each request's stored answer (None: not in the cache), keyed as `ModelBackend.generate` keys it (the
    backend's seed for the trial filled in); never a model call."""
    identity = backend.identity()
    seeded = [request if request.seed is not None else
              dataclasses.replace(request, seed=backend.request_seed(request)) for request in requests]
    keys = [cache_key(identity, request) for request in seeded]
    found = cache.get_many(list(dict.fromkeys(keys)))
    return [found.get(key) for key in keys]


def found_responses(selected: pd.DataFrame, results: Sequence[GenerationResult | None]) -> pd.DataFrame:
    """The prompt rows that have a stored answer, with the answer's columns as the responses assets store them
    (`response`, `outcome`, `served_model`, …); the rows without one are left out."""
    found = [index for index, result in enumerate(results) if result is not None]
    rows = selected.iloc[found].reset_index(drop=True)
    return rows.assign(**result_columns([results[index] for index in found])) if found else \
        rows.assign(response=pd.Series(dtype=object), outcome=pd.Series(dtype=object))


def served_versions(frame: pd.DataFrame) -> list[str]:
    """`served_model=…` and `system_fingerprint=…` of every version the answers report, sorted."""
    found = []
    for column in ("served_model", "system_fingerprint"):
        if column in frame:
            found += [f"{column}={value}" for value in sorted({str(v) for v in frame[column].dropna() if str(v)})]
    return found


def paired_flips(a: pd.Series, b: pd.Series) -> dict[str, Any]:
    """Two epochs' 0/1 outcomes per item (boolean Series indexed by the item) paired on the items present in both:
    the pairs, the items with the outcome in A and not in B (`mcnemar_b`) and the reverse (`mcnemar_c`), and the
    exact (binomial) McNemar p of b against c."""
    both = a.index.intersection(b.index)
    pass_a, pass_b = a.loc[both].astype(bool), b.loc[both].astype(bool)
    lost = list(both[(pass_a & ~pass_b).to_numpy()])
    gained = list(both[(~pass_a & pass_b).to_numpy()])
    _, _, p_exact = stats.mcnemar(len(lost), len(gained))
    return {"n_pairs": len(both), "mcnemar_b": len(lost), "mcnemar_c": len(gained), "p_exact": p_exact,
            "lost": lost, "gained": gained}


def side_columns(epochs: Sequence[str], design: int, found: Mapping[str, int], pairs: Mapping[str, Any],
                 served: Mapping[str, list[str]], name_items: Callable[[list], list[str]]) -> dict[str, Any]:
    """The columns a term or name drift row has about its two sides: the epochs, the answers the design asks and
    how many each epoch has (`found`) or lacks, the pairing (`paired_flips`) with the flipped items named by
    `name_items`, and each side's served versions."""
    a, b = epochs
    return {"epoch_a": a, "epoch_b": b, "n_design": design, "missing_a": design - found[a],
            "missing_b": design - found[b], "n_a": found[a], "n_b": found[b], "n_pairs": pairs["n_pairs"],
            "mcnemar_b": pairs["mcnemar_b"], "mcnemar_c": pairs["mcnemar_c"], "p_exact": pairs["p_exact"],
            "flipped_from": name_items(pairs["lost"]), "flipped_to": name_items(pairs["gained"]),
            "served_a": served[a], "served_b": served[b]}
