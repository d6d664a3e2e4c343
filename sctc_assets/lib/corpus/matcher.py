"""Multi-pattern matching in one pass per record and the per-shard tally.

The automaton is `ahocorasick_rs` (Python bindings of the Rust `aho-corasick` crate): on Chinese text it scans
about 8 times faster than pyahocorasick, measured here, with the same matches.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import ahocorasick_rs


class FormMatcher:
    """Which forms (sets of alternative strings) a text contains, found in a single scan of the text.

    Overlapping matching reports every occurrence, those inside longer patterns included, so a term that is a
    substring of another term is still found.
    """

    def __init__(self, forms: Sequence[Sequence[str]]):
        owners: dict[str, set[int]] = {}
        for form_id, alternatives in enumerate(forms):
            if not alternatives or not all(isinstance(p, str) and p for p in alternatives):
                raise ValueError(f"form {form_id}: needs at least one non-empty pattern (got {alternatives!r})")
            for pattern in alternatives:
                owners.setdefault(pattern, set()).add(form_id)
        self.n_forms = len(forms)
        self.n_patterns = len(owners)
        self._owners = [tuple(sorted(form_ids)) for form_ids in owners.values()]
        self._automaton = ahocorasick_rs.AhoCorasick(list(owners)) if owners else None

    def forms_in(self, text: str) -> set[int]:
        if self._automaton is None:
            return set()
        try:
            matches = self._automaton.find_matches_as_indexes(text, overlapping=True)
        except UnicodeEncodeError:
            # Web text decoded from JSON can hold lone surrogates, which have no UTF-8 form: they become U+FFFD,
            # which no pattern contains.
            matches = self._automaton.find_matches_as_indexes(
                text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"), overlapping=True)
        found: set[int] = set()
        for pattern in {index for index, _, _ in matches}:
            found.update(self._owners[pattern])
        return found


@dataclass
class Tally:
    """Records containing each form (each record counted once per form), records and UTF-8 bytes scanned."""

    counts: list[int]
    records: int = 0
    bytes: int = 0
    seconds: float = 0.0


def count_texts(texts: Iterable[str], matcher: FormMatcher, *, progress: Callable[[Tally], None] | None = None,
                progress_every_s: float = 30.0) -> Tally:
    tally = Tally(counts=[0] * matcher.n_forms)
    counts = tally.counts
    started = last = time.monotonic()
    for text in texts:
        tally.records += 1
        tally.bytes += len(text.encode("utf-8", "surrogatepass"))
        for form_id in matcher.forms_in(text):
            counts[form_id] += 1
        if progress is not None and tally.records % 1000 == 0 and time.monotonic() - last >= progress_every_s:
            last = time.monotonic()
            tally.seconds = last - started
            progress(tally)
    tally.seconds = time.monotonic() - started
    return tally
