"""The `rules` label source: deterministic correct / misaligned / incorrect labels.

- correct: the answer contains one of the expected terms, in the prompting script;
- misaligned: it contains the other region's term, as written or converted to the prompting script with OpenCC
  (character by character and phrase-aware, with OpenCC's standard and Taiwan character variants); misaligned wins over correct, as in the paper;
- incorrect: anything else.

Two refinements over the authors' scripts, both documented on the term page: a misaligned form found only inside an
occurrence of an expected term (等待线 inside 一米等待线) does not count, and a converted form identical to an
expected term is not a misaligned form (it cannot be told apart from a correct answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from sctc_assets.lib.conversion import convert, convert_chars
from sctc_assets.lib.generation import strip_reasoning
from sctc_assets.lib.varieties import MAINLAND, SIMPLIFIED, TAIWAN, TRADITIONAL

LABELS = ("correct", "misaligned", "incorrect")
# OpenCC configurations that write the other region's term in the prompting script: OpenCC's standard
# characters and Taiwan's variants (s2t gives 麪包車 where Taiwan writes 麵包車).
_TO_PROMPT_SCRIPT = {SIMPLIFIED.code: (SIMPLIFIED.opencc_config, MAINLAND.opencc_script),
                     TRADITIONAL.code: (TRADITIONAL.opencc_config, TAIWAN.opencc_script)}


@dataclass(frozen=True)
class TermForms:
    expected: tuple[str, ...]
    misaligned: tuple[str, ...]


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for value in values:
        if value and value not in seen:
            seen[value] = None
    return tuple(seen)


def term_forms(lang: str, expected: Sequence[str], other_region: Sequence[str]) -> TermForms:
    """Expected answers and misaligned answers for one term prompted in `lang`."""
    try:
        configs = _TO_PROMPT_SCRIPT[lang]
    except KeyError:
        raise ValueError(f"term labels are defined for {' and '.join(_TO_PROMPT_SCRIPT)}, not {lang!r}") from None
    expected_forms = _unique(alternative.strip() for alternative in expected)
    other = [alternative.strip() for alternative in other_region]
    converted = [convert_fn(term, config) for config in configs for convert_fn in (convert_chars, convert)
                 for term in other]
    candidates = _unique([*other, *converted])
    return TermForms(expected=expected_forms, misaligned=tuple(form for form in candidates if form not in expected_forms))


def _occurrences(text: str, needle: str) -> list[tuple[int, int]]:
    spans, start = [], text.find(needle)
    while start != -1:
        spans.append((start, start + len(needle)))
        start = text.find(needle, start + 1)
    return spans


def find_misaligned(text: str, forms: TermForms) -> list[str]:
    """Misaligned forms occurring in `text` somewhere other than inside an expected term."""
    expected_spans = [span for term in forms.expected for span in _occurrences(text, term)]
    hits = []
    for form in forms.misaligned:
        for start, end in _occurrences(text, form):
            if not any(a <= start and end <= b for a, b in expected_spans):
                hits.append(form)
                break
    return hits


def label_answer(response: str | None, forms: TermForms) -> str:
    text = strip_reasoning(response)
    if find_misaligned(text, forms):
        return "misaligned"
    if any(term in text for term in forms.expected):
        return "correct"
    return "incorrect"


def combine_with_judge(misaligned: bool, judge_correct: bool | None) -> str:
    """The paper's rule with a judge's verdict: misaligned wins, then the judge decides correct vs incorrect.

    Without a verdict this gives `incorrect`; `judge_labels` leaves such answers out rather than keep that label."""
    if misaligned:
        return "misaligned"
    return "correct" if judge_correct else "incorrect"
