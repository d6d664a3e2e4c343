"""Table 19: the kinds of incorrect answer, from the authors' GPT-4o-mini annotations.

`response/regional_term/incorrect_response_type_annotated_by_gpt/{model}_{simplified,traditional}.csv` (`gt`,
`response`, `label`) holds the first-trial answers of prompt variant 1 labelled incorrect; `label` 1 means
"entirely wrong", 2 "the same concept, uncommon usage". `tab_19.py` prints, per model and language, each label's
share of the file's rows (Llama-3-8B's files are named `llama3_*`, which the script does not expect).
"""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib.sctc_upstream import UPSTREAM_LANG

TYPES = {1: "entirely_wrong", 2: "uncommon_usage"}
# The published file names where they differ from the model's usual prefix.
FILE_PREFIX = {"llama3-8b": "llama3"}


def incorrect_type_file(model: str, lang: str) -> str:
    prefix = FILE_PREFIX.get(model, model)
    return f"response/regional_term/incorrect_response_type_annotated_by_gpt/{prefix}_{UPSTREAM_LANG[lang]}.csv"


def incorrect_type_shares(model: str, lang: str, annotations: pd.DataFrame, *, source_name: str) -> dict:
    """Percent of rows with label 1 and with label 2 (0–100), as `tab_19.py`; other labels are counted apart."""
    labels = pd.to_numeric(annotations["label"], errors="coerce")
    n = len(labels)
    row = {"model": model, "lang": lang, "n_annotated": n, "source_file": source_name}
    for code, name in TYPES.items():
        count = int((labels == code).sum())
        row[f"n_{name}"] = count
        row[f"pct_{name}"] = 100 * count / n if n else float("nan")
    row["n_other_label"] = int((~labels.isin(list(TYPES))).sum())
    return row
