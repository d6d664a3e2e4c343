"""The deterministic name extractor's invalid-answer classes against the authors' human annotations (Table 20).

`supplementary_data/regional_name/invalid_response_type_annotated_by_human/{model}_simplified_labeled.csv`
(`response`, `label` ∈ insufficient / multiple / out-of-list): 100 sampled invalid `main` answers per model
(ChatGLM-2, Breeze, GPT-4o, Simplified prompts). The sample's candidate lists are not published with it, so the
extractor matches every one of the 352 names (`candidate_scope` all_names, as for `main` answers without lists).
"""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib.name.extraction import MULTIPLE, OUT_OF_LIST, REFUSAL, RULE_STATUSES, matcher_for

HUMAN_TO_RULES = {"insufficient": REFUSAL, "multiple": MULTIPLE, "out-of-list": OUT_OF_LIST}
ANNOTATED_MODELS = ("chatglm2", "breeze", "gpt4o")


def annotation_file(model: str, lang: str = "simplified") -> str:
    return f"supplementary_data/regional_name/invalid_response_type_annotated_by_human/{model}_{lang}_labeled.csv"


def classify(responses: pd.Series, names: list[str]) -> list[str]:
    matcher = matcher_for(names)
    return [matcher.extract(text if isinstance(text, str) else None).status for text in responses]


def class_agreement(model: str, annotations: pd.DataFrame, names: list[str], *, source_name: str) -> pd.DataFrame:
    """Per human class: how many answers the humans gave it, how many the rules put in the same class, and the
    rules' classes for the rest (`rules_<status>` counts, one column per status the rules can give, so every
    table has the same columns); plus an `all` row (overall agreement)."""
    unknown = sorted(set(annotations["label"].dropna()) - set(HUMAN_TO_RULES))
    if unknown:
        raise ValueError(f"{source_name}: unknown label(s) {unknown}; expected {sorted(HUMAN_TO_RULES)}")
    frame = pd.DataFrame({"human": annotations["label"].to_numpy(),
                          "rules": classify(annotations["response"], names)})
    frame["agree"] = frame["rules"] == frame["human"].map(HUMAN_TO_RULES)
    rows = []
    for human, group in [*frame.groupby("human", sort=True), ("all", frame)]:
        row = {"model": model, "human_class": human, "rules_class": HUMAN_TO_RULES.get(human, "—"),
               "n_human": len(group), "n_agree": int(group["agree"].sum()),
               "agreement": float(group["agree"].mean()) if len(group) else float("nan"),
               "pct_of_sample": 100 * len(group) / len(frame) if len(frame) else float("nan")}
        row.update({f"rules_{status}": int((group["rules"] == status).sum()) for status in RULE_STATUSES})
        rows.append(row)
    return pd.DataFrame(rows)
