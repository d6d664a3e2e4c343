"""What is counted: every regional term form and every name, in the script it is written in and converted.

A form is a set of alternative strings; a record "contains" the form when it contains any of them. Terms give six
forms each (Mainland and Taiwanese, each as Simplified, as Traditional and in either script; `/` alternatives
split as in `regional_terms`), names three (as written, converted to the other script, either script).
Conversion is OpenCC's script-only s2t/t2s, so a form differs from its original only in characters.
"""

from __future__ import annotations

import hashlib
import json

import pandas as pd

from sctc_assets.lib.conversion import to_simplified, to_traditional
from sctc_assets.lib.varieties import MAINLAND, SIMPLIFIED, TAIWAN, TRADITIONAL

FORM_COLUMNS = ["form_id", "kind", "item_id", "item", "region", "script", "as_written", "alternatives"]
WRITTEN_SCRIPT = {MAINLAND.name: SIMPLIFIED.script, TAIWAN.name: TRADITIONAL.script}
ANY_SCRIPT = "any"


def _in_script(alternatives: list[str], script: str) -> list[str]:
    convert = to_simplified if script == "simplified" else to_traditional
    return [convert(text) for text in alternatives]


def _region_forms(kind: str, item_id: int, item: str, region: str, alternatives: list[str]) -> list[dict]:
    written = WRITTEN_SCRIPT[region]
    other = "traditional" if written == "simplified" else "simplified"
    by_script = {written: list(alternatives), other: _in_script(alternatives, other)}
    by_script[ANY_SCRIPT] = list(dict.fromkeys(by_script[written] + by_script[other]))
    return [{"kind": kind, "item_id": item_id, "item": item, "region": region, "script": script,
             "as_written": script == written, "alternatives": values} for script, values in by_script.items()]


def build_forms(terms: pd.DataFrame, names: pd.DataFrame) -> pd.DataFrame:
    """`terms`: the `regional_terms` table; `names`: `parse_names` output (name, region). One row per form."""
    rows: list[dict] = []
    for term in terms.to_dict("records"):
        rows += _region_forms("term", int(term["term_id"]), term["term_mainland"], "mainland",
                              list(term["mainland_alternatives"]))
        rows += _region_forms("term", int(term["term_id"]), term["term_taiwan"], "taiwan",
                              list(term["taiwan_alternatives"]))
    for position, name in enumerate(names.to_dict("records")):
        if name["region"] not in WRITTEN_SCRIPT:
            raise ValueError(f"name {name['name']!r}: unknown region {name['region']!r}")
        rows += _region_forms("name", position, name["name"], name["region"], [name["name"]])
    forms = pd.DataFrame(rows)
    forms.insert(0, "form_id", range(len(forms)))
    return forms[FORM_COLUMNS]


def forms_digest(forms: pd.DataFrame) -> str:
    """Identifies the exact patterns counted; shard counts made with other patterns are not summed with these."""
    payload = [[row.kind, int(row.item_id), row.region, row.script, list(row.alternatives)]
               for row in forms.itertuples(index=False)]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()[:16]
