"""Table 19: the kinds of incorrect answer, from the authors' GPT-4o-mini annotations and, for any other model, a
registered judge asked the same question (below).

Published: `response/regional_term/incorrect_response_type_annotated_by_gpt/{model}_{simplified,traditional}.csv` (`gt`,
`response`, `label`) holds the first-trial answers of prompt variant 1 labelled incorrect; `label` 1 means
"entirely wrong", 2 "the same concept, uncommon usage". `tab_19.py` prints, per model and language, each label's
share of the file's rows (Llama-3-8B's files are named `llama3_*`, which the script does not expect).
"""

from __future__ import annotations

import re

import pandas as pd

from sctc_assets.lib.generation import strip_reasoning
from sctc_assets.lib.sctc_upstream import UPSTREAM_LANG

TYPES = {1: "entirely_wrong", 2: "uncommon_usage"}
# The published file names where they differ from the model's usual prefix.
FILE_PREFIX = {"llama3-8b": "llama3"}


def incorrect_type_file(model: str, lang: str) -> str:
    prefix = FILE_PREFIX.get(model, model)
    return f"response/regional_term/incorrect_response_type_annotated_by_gpt/{prefix}_{UPSTREAM_LANG[lang]}.csv"


def incorrect_type_shares(model: str, lang: str, annotations: pd.DataFrame, *, source_name: str) -> dict:
    """Percent of rows with label 1 and with label 2 (0–100), as `tab_19.py`; other labels are counted apart."""
    return _type_counts({"model": model, "lang": lang, "judge": PUBLISHED_JUDGE,
                         "label_source": PUBLISHED_LABEL_SOURCE}, annotations["label"], source_name)


def _type_counts(row: dict, types: pd.Series, source_name: str | None) -> dict:
    """`row` with `n_annotated`, `source_file`, each type's count and percent of `n_annotated`, and the others."""
    labels = pd.to_numeric(types, errors="coerce")
    n = len(labels)
    row = {**row, "n_annotated": n, "source_file": source_name}
    for code, name in TYPES.items():
        count = int((labels == code).sum())
        row[f"n_{name}"] = count
        row[f"pct_{name}"] = 100 * count / n if n else float("nan")
    row["n_other_label"] = int((~labels.isin(list(TYPES))).sum())
    return row


# --- Table 19 for any model: a judge asked the paper's Appendix B.4 question ----------------------------------------
#
# The authors asked GPT-4o-mini, of each incorrect first-trial answer (prompt variant 1), whether it names a
# different concept (answer 1) or the same concept in a less common form (answer 2). `incorrect_type_prompt` asks a
# registered judge the same question word for word; `parse_incorrect_type` reads its answer back (the one type it
# names, else None: never guessed); `live_incorrect_type_shares` counts them as `incorrect_type_shares` counts the
# published labels, an unparsed answer under `n_other_label`.

INCORRECT_TYPE_TEMPLATE = (
    "Do the terms {response} and {ground_truth} refer to completely different things, or are they the same concept, "
    "with {response} simply being less commonly used? Only respond 1 if they refer to completely different things, 2 "
    "if the terms refer to the same concept but {response} is less commonly used. Do not include explanations. Note "
    "that you may need to extract the term from {response} as it may contain irrelevant words.")
# The published annotations' judge and label source, named in the table beside the live rows.
PUBLISHED_JUDGE = "gpt-4o-mini (the authors' published annotation)"
PUBLISHED_LABEL_SOURCE = "upstream"
# The answers the paper classifies: the first trial of prompt variant 1.
PAPER_PROMPT_VARIANT = 1
_TYPE_DIGIT = re.compile(r"(?<![0-9.])([12])(?![0-9]|\.[0-9])")


def incorrect_type_prompt(response: str | None, ground_truth: str) -> str:
    return INCORRECT_TYPE_TEMPLATE.format(response="" if response is None else response, ground_truth=ground_truth)


def parse_incorrect_type(answer: object) -> int | None:
    """1 (a different concept) or 2 (the same concept, less common) from a judge's answer, extra text allowed
    ("1", "答案：2。", "2 - same concept"); None when it names neither or both (an echo of the question's "respond 1
    … 2 …"), or names a number such as 12 or 1.5: such an answer is counted as invalid, never guessed."""
    text = strip_reasoning(answer)
    if not text:
        return None
    found = {int(match) for match in _TYPE_DIGIT.findall(text)}
    return found.pop() if len(found) == 1 else None


def first_trial_incorrect(labels: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The answers the paper classifies: labelled incorrect in the first trial of prompt variant 1, refusals left
    out (no term to classify). Labels of the `judge` source where the partition has them (the paper's: a judge's
    correctness verdicts), else of `rules`. Returns them and the label source used (None: neither)."""
    if labels.empty:
        return labels, None
    sources = set(labels["label_source"])
    source = "judge" if "judge" in sources else "rules" if "rules" in sources else None
    if source is None:
        return labels.iloc[0:0], None
    first = labels[(labels["label_source"] == source) & (labels["prompt_variant"] == PAPER_PROMPT_VARIANT)]
    if first.empty:
        return first, source
    first = first[first["trial"] == first["trial"].min()]
    chosen = first[(first["label"] == "incorrect") & (first["outcome"] != "refusal")]
    return chosen.reset_index(drop=True), source


def live_incorrect_type_shares(model: str, lang: str, judge: str, label_source: str, types: pd.Series) -> dict:
    """`incorrect_type_shares`' row for one partition's judged answers (`types`: 1, 2 or missing per answer)."""
    return _type_counts({"model": model, "lang": lang, "judge": judge, "label_source": label_source}, types, None)
