"""The sovereignty part's tables for #42's points 1 and 3: Chinese-origin models against the others
(`sovereignty_origin_tests`) and one drift table per model (`sovereignty_drift`), when those tables have rows."""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib.report import models as model_order
from sctc_assets.lib.report.document import Cell, TableSpec
from sctc_assets.lib.report.drift import joined as _names, lang_name as _lang, sort_key as _sort
from sctc_assets.lib.report.formatting import fixed

MAIN_PROMPT_SET = "stage1_sovereignty"


def origin_table(tests: pd.DataFrame, rule: str) -> TableSpec | None:
    """Per prompting language and language pair: the two groups' mean rates, their difference and the p-values."""
    if tests.empty:
        return None
    rows_of = tests[(tests["scoring_rule"] == rule) & (tests["prompt_set"] == MAIN_PROMPT_SET)]
    if rows_of.empty:
        return None
    rows = []
    for r in rows_of.to_dict("records"):
        what = (f"pass rate, {_lang(r['lang_a'])}" if r["comparison"] == "pass_rate"
                else f"LBS {_lang(r['lang_a'])} − {_lang(r['lang_b'])}")
        rows.append([Cell(what), Cell(f"{int(r['n_models_a'])} / {int(r['n_models_b'])}"),
                     Cell(fixed(r["rate_a"], 2), sort=_sort(r["rate_a"])),
                     Cell(fixed(r["rate_b"], 2), sort=_sort(r["rate_b"])),
                     Cell(fixed(r["difference"], 2, signed=True), sort=_sort(r["difference"])),
                     Cell(fixed(r["p_permutation"], 3), sort=_sort(r["p_permutation"])), Cell(str(r["permutations"])),
                     Cell(fixed(r["p_gee"], 3) if pd.notna(r["p_gee"]) else "–")])
    return TableSpec(
        title=f"Chinese-origin models against the others ({rule} rule, stage-1 prompts)",
        columns=["Comparison", "Models CN / other", "CN", "other", "Difference", "p (permutation)", "Relabellings",
                 "p (GEE)"], rows=rows, table_id=f"sovereignty-origin-{rule}",
        caption="Each model counts once (its pass rate, or its LBS); p: a permutation test over models, the origin "
                "labels reassigned with the group sizes kept (the primary test). The GEE p (logistic, clustered by "
                "model) is for comparison only: with this few models its sandwich errors are unreliable. Origins "
                "from the registry (`origin`); the replayed models' from the paper's Table 2.",
        source=f"sovereignty_origin_tests; scoring rule {rule}")


def drift_tables(drift: pd.DataFrame, rule: str = "code") -> list[TableSpec]:
    """One table per model: each prompting language's passes under the two epochs, McNemar and the flips."""
    if drift.empty:
        return []
    chosen = drift[drift["scoring_rule"] == rule]
    tables = []
    for model in model_order.ordered(chosen["model"].unique()):
        rows = []
        part = chosen[chosen["model"] == model]
        for r in part.to_dict("records"):
            rows.append([Cell(_lang(r["lang"])), Cell(str(r["prompt_set"])),
                         Cell(f"{int(r['passed_a'])}/{int(r['n_pairs'])}", sort=int(r["passed_a"])),
                         Cell(f"{int(r['passed_b'])}/{int(r['n_pairs'])}", sort=int(r["passed_b"])),
                         Cell(f"{int(r['mcnemar_b'])}/{int(r['mcnemar_c'])}"),
                         Cell(fixed(r["p_exact"], 3), sort=_sort(r["p_exact"])),
                         Cell(_names(r["flipped_to_fail"])), Cell(_names(r["flipped_to_pass"])),
                         Cell(f"{int(r['missing_a'])} / {int(r['missing_b'])}")])
        first = part.iloc[0]
        tables.append(TableSpec(
            title=f"Drift of {model}: epoch {first['epoch_a']} → {first['epoch_b']} ({rule} rule)",
            columns=["Prompting language", "Prompt set", f"Passed {first['epoch_a']}", f"Passed {first['epoch_b']}",
                     "b/c", "exact McNemar p", "Now failing", "Now passing", "Missing A / B"],
            rows=rows, table_id=f"sovereignty-drift-{model}",
            caption="The same registry key's answers under two epoch tags, paired prompt by prompt (read from the "
                    "response cache, no model called). b = passed in the first epoch and fails in the second, c = the "
                    "reverse; answers the cache lacks are missing, not failing. Served versions: "
                    f"{_names(first['served_a'])} → {_names(first['served_b'])}.",
            source=f"sovereignty_drift; scoring rule {rule}"))
    return tables
