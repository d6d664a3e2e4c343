"""The 110 regional terms: Mainland and Taiwanese forms, definitions in both scripts, category, definition source."""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib.sctc_upstream import TERM_COLUMNS
from sctc_assets.lib.varieties import MAINLAND, SIMPLIFIED, TAIWAN, TRADITIONAL

# The task prompts in the two Chinese scripts only; each script expects its region's term.
LANGS = (SIMPLIFIED.code, TRADITIONAL.code)
# The other script's prompt files hold the other region's term (`gt`), which the misalignment test reads.
OTHER_LANG = {SIMPLIFIED.code: TRADITIONAL.code, TRADITIONAL.code: SIMPLIFIED.code}


def split_alternatives(term: str) -> list[str]:
    """`一米线/一米等待线` → ['一米线', '一米等待线']; alternatives are trimmed and empty ones dropped."""
    if not isinstance(term, str):
        return []
    return [part.strip() for part in term.split("/") if part.strip()]


def parse_terms(raw: pd.DataFrame, *, source_name: str = "regional terms") -> pd.DataFrame:
    """Normalise the upstream term table; rows keep their upstream order (the prompt files rely on it)."""
    absent = [column for column in TERM_COLUMNS if column not in raw.columns]
    if absent:
        raise ValueError(f"{source_name}: missing required column(s) {absent}")
    rows = []
    for position, record in enumerate(raw.to_dict("records")):
        mainland = split_alternatives(record[MAINLAND.upstream_spelling])
        taiwan = split_alternatives(record[TAIWAN.upstream_spelling])
        if not mainland or not taiwan:
            raise ValueError(f"{source_name}: row {position} (conceptId {record['conceptId']}) has an empty term")
        for column in ("definition_simplified", "definition_traditional"):
            if not isinstance(record[column], str) or not record[column].strip():
                raise ValueError(f"{source_name}: row {position} (conceptId {record['conceptId']}) has no {column}")
        rows.append(
            {
                "term_id": int(record["conceptId"]),
                "position": position,
                "term_mainland": record[MAINLAND.upstream_spelling],
                "term_taiwan": record[TAIWAN.upstream_spelling],
                "mainland_alternatives": mainland,
                "taiwan_alternatives": taiwan,
                "definition_simplified": record["definition_simplified"],
                "definition_traditional": record["definition_traditional"],
                "category": record["category"],
                "definition_source": record["definition_source"],
            }
        )
    terms = pd.DataFrame(rows)
    duplicated = terms["term_id"][terms["term_id"].duplicated()].tolist()
    if duplicated:
        raise ValueError(f"{source_name}: duplicated conceptId values {duplicated}")
    return terms


def expected_alternatives(term: dict, lang: str) -> list[str]:
    """The terms a correct answer uses: the Mainland form for Simplified prompts, the Taiwanese for Traditional."""
    return list(term["mainland_alternatives"] if lang == SIMPLIFIED.code else term["taiwan_alternatives"])


def other_region_alternatives(term: dict, lang: str) -> list[str]:
    return list(term["taiwan_alternatives"] if lang == SIMPLIFIED.code else term["mainland_alternatives"])
