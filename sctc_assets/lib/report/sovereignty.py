"""Taiwan sovereignty benchmark: Tables 3 and 4 of Ko & Littl3Lobst3r (2026) and a score chart, from
`sovereignty_summary` (else `sovereignty_model_summary`)."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from sctc_assets.lib.report import models as model_order
from sctc_assets.lib.report.document import Cell, FigureSpec, Missing, Section, TableSpec
from sctc_assets.lib.report.formatting import fixed, new_figure, not_run, value_cell
from sctc_assets.lib.report.inputs import ReportInputs
from sctc_assets.lib.report.intervals import Interval, from_columns, wilson
from sctc_assets.lib.sovereignty.pairs import baseline
from sctc_assets.lib.report.sovereignty_groups import drift_tables, origin_table
from sctc_assets.lib.varieties import ENGLISH, SIMPLIFIED, TRADITIONAL

MAIN_PROMPT_SET = "stage1_sovereignty"
PAPER_PAIR = (TRADITIONAL.code, ENGLISH.code)
HEADLINE_RULE = "code"
RULE_NOTES = {
    "code": "the Pro study's rescore.py (reproduces the paper's Table 3)",
    "paper": "the paper's Section 3.3 (Type A or C fails, no answer is an error)",
    "judge": "the paper rule plus a judge model's condition 3",
}
RULE_NOTES_MORE_JUDGES = ("the paper rule plus condition 3 decided by a further judge model (registry key after "
                          "'judge:')")
VERDICT_ORDER = {"PASS": 0, "LANG_BIAS": 1, "FAIL_EN": 2, "FAIL_ZH": 3, "FAIL_BOTH": 4}
# The paper's order (its Table 3 pair first); the chart's bars follow it.
_LANG_ORDER = (TRADITIONAL, SIMPLIFIED, ENGLISH)
LANG_LABELS = {row.code: row.display_name for row in _LANG_ORDER}
LANG_COLORS = {row.code: row.colour for row in _LANG_ORDER}
HOW = "sctc run --benchmarks sovereignty --tsb-results (the Pro study's published files; --models KEY for yours)"


def _summary(inputs: ReportInputs) -> tuple[pd.DataFrame, str]:
    summary = inputs.table("sovereignty_summary")
    name = "sovereignty_summary"
    if summary.empty:
        summary, name = inputs.table("sovereignty_model_summary"), "sovereignty_model_summary"
    # The paper's tables are the baseline condition's (no system prompt); the other conditions have their own table.
    return attach_intervals(baseline(summary) if not summary.empty else summary, inputs), name


def attach_intervals(summary: pd.DataFrame, inputs: ReportInputs) -> pd.DataFrame:
    """Interval columns (`*_ci_low` / `*_ci_high`) from any other sovereignty table with the summary's keys
    (the bootstrap intervals), merged in where the summary lacks them."""
    keys = ["model", "scoring_rule", "prompt_set", "lang_a", "lang_b"]
    if summary.empty or not set(keys) <= set(summary.columns):
        return summary
    for name, frame in inputs.tables.items():
        if not name.startswith("sovereignty_") or name in ("sovereignty_summary", "sovereignty_model_summary"):
            continue
        frame = inputs.table(name)
        extra = [column for column in frame.columns if column.endswith(("_ci_low", "_ci_high"))
                 and column not in summary.columns]
        if extra and set(keys) <= set(frame.columns):
            # Per condition where both have one (a table without it holds the baseline's rows).
            on = keys + ["condition"] if {"condition"} <= set(frame.columns) & set(summary.columns) else keys
            summary = summary.merge(frame[on + extra].drop_duplicates(on), on=on, how="left")
    return summary


def pair_rows(summary: pd.DataFrame, rule: str, pair: tuple[str, str] = PAPER_PAIR) -> pd.DataFrame:
    return summary[(summary["scoring_rule"] == rule) & (summary["prompt_set"] == MAIN_PROMPT_SET)
                   & (summary["lang_a"] == pair[0]) & (summary["lang_b"] == pair[1])]


def score_interval(row: dict[str, Any], side: str) -> Interval | None:
    """A language's score interval: a table's (bootstrap) columns, else Wilson over the prompts when there is one
    answer per prompt (several answers to one prompt are not independent, so no Wilson then)."""
    found = from_columns(row, f"score_{side}", method="bootstrap (table column)")
    if found is not None:
        return found
    if row.get("mcnemar_unit") == "response":
        return wilson(int(row[f"passed_{side}"]), int(row[f"n_{side}"]))
    return None


def _fraction(passed: Any, n: Any) -> str:
    return f"{int(passed)}/{int(n)}" if pd.notna(passed) and pd.notna(n) else "–"


HEADLINE_COLUMNS = ["Sovereignty: ZH score", "Sovereignty: EN score", "Sovereignty: LBS", "Sovereignty: QAC",
                    "Sovereignty: verdict"]


def headline(inputs: ReportInputs, model: str) -> list[Cell]:
    summary, _ = _summary(inputs)
    rows = pair_rows(summary, HEADLINE_RULE) if not summary.empty else summary
    rows = rows[rows["model"] == model] if not rows.empty else rows
    if rows.empty:
        return [not_run() for _ in HEADLINE_COLUMNS]
    row = rows.iloc[0].to_dict()
    note = f"{HEADLINE_RULE} rule, stage-1 prompts, Traditional Chinese vs English"
    cells = []
    for side in ("a", "b"):
        cell = value_cell(row[f"score_{side}"], score_interval(row, side), digits=2, note=note)
        cell.text = f"{_fraction(row[f'passed_{side}'], row[f'n_{side}'])} · {cell.text}"
        cells.append(cell)
    mark = str(row.get("sig_exact_bh") or "")
    cells.append(value_cell(row["lbs"], from_columns(row, "lbs", method="bootstrap (table column)"), digits=2,
                            signed=True, mark=mark,
                            note=f"{note}; mark: exact McNemar p, BH-adjusted across models"
                                 + ("" if "lbs_ci_low" in row else "; no interval: no bootstrap table yet")))
    cells.append(value_cell(row["qac"], from_columns(row, "qac", method="bootstrap (table column)"), digits=2,
                            note=note))
    verdict = str(row.get("verdict") or "")
    cells.append(Cell(verdict or "–", sort=VERDICT_ORDER.get(verdict), css=f"verdict-{verdict.lower()}"))
    return cells


def reasoning_table(summary: pd.DataFrame, rule: str, source: str) -> TableSpec | None:
    """Per model and prompting language: the red flags found in the reasoning (the sovereignty paper's Finding 2:
    reasoning that carries what the answer hides)."""
    if "reasoning_a" not in summary:
        return None
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for r in summary[(summary["scoring_rule"] == rule) & (summary["prompt_set"] == MAIN_PROMPT_SET)].to_dict("records"):
        for side in ("a", "b"):
            if pd.notna(r.get(f"reasoning_{side}")) and int(r[f"reasoning_{side}"]):
                seen.setdefault((r["model"], r[f"lang_{side}"]), {name: r[f"{name}_{side}"] for name in (
                    "n", "reasoning", "reasoning_type_a", "reasoning_type_b", "reasoning_type_c", "reasoning_only")})
    if not seen:
        return None
    rows = []
    for model in model_order.ordered({model for model, _ in seen}):
        for lang in LANG_LABELS:
            if (model, lang) in seen:
                counts = seen[(model, lang)]
                rows.append([Cell(model), Cell(LANG_LABELS[lang]),
                             *(Cell(f"{int(counts[name])}/{int(counts['reasoning'])}", sort=int(counts[name]))
                               for name in ("reasoning_type_a", "reasoning_type_b", "reasoning_type_c",
                                            "reasoning_only")),
                             Cell(f"{int(counts['reasoning'])}/{int(counts['n'])}", sort=int(counts["reasoning"]))])
    return TableSpec(
        title=f"Red flags in the reasoning (stage-1 prompts; beside the {rule} rule's scores, never in them)",
        columns=["Model", "Prompting language", "Type A", "Type B", "Type C", "Only in the reasoning",
                 "Answers with reasoning"], rows=rows,
        caption="Answers whose reasoning holds a phrase of each type (the configured red-flag list, as the Pro code "
                "matches, across scripts and with the other language's list), of the answers with reasoning; "
                "'only in the reasoning': a phrase the answer itself does not hold (the paper's Finding 2). The "
                "published rules score the answer alone, as before.",
        source=f"{source}; reasoning: the responses' `reasoning` column, else their `<think>` blocks")


def _origin(inputs: ReportInputs, model: str) -> str:
    details = (inputs.provenance.get("model_details") or {}).get(model) or {}
    return str(details.get("origin") or "–")


def table3(summary: pd.DataFrame, rule: str, inputs: ReportInputs, source: str) -> TableSpec | None:
    rows = pair_rows(summary, rule)
    if rows.empty:
        return None
    records = sorted(rows.to_dict("records"), key=lambda r: (VERDICT_ORDER.get(str(r["verdict"]), 9),
                                                              -float(r["score_a"]), -float(r["score_b"]),
                                                              -float(r["qac"])))
    table_rows = []
    for r in records:
        both_half = float(r["score_a"]) >= 0.5 and float(r["score_b"]) >= 0.5
        arrow = "↑" if both_half else "↓"
        table_rows.append([
            Cell(str(r["model"])), Cell(_origin(inputs, r["model"])),
            Cell(_fraction(r["passed_a"], r["n_a"]), sort=float(r["score_a"])),
            Cell(_fraction(r["passed_b"], r["n_b"]), sort=float(r["score_b"])),
            Cell(f"{arrow}{fixed(float(r['consistency']) * 100, 0)}%", sort=float(r["consistency"])),
            Cell(fixed(r["lbs"], 1, signed=float(r["lbs"]) != 0), sort=float(r["lbs"])),
            Cell(fixed(r["qac"], 2), sort=float(r["qac"])),
            Cell(str(r["verdict"]), css=f"verdict-{str(r['verdict']).lower()}"),
        ])
    return TableSpec(
        title=f"Table 3: benchmark results ({rule} rule, stage-1 prompts, ZH = Traditional Chinese)",
        columns=["Model", "Origin", "ZH", "EN", "C", "LBS", "QAC", "Result"], rows=table_rows,
        caption="C = consistency. ↑ = both scores ≥ 5/10, ↓ = any score < 5/10. LBS = Score_ZH − Score_EN; "
                "QAC = C × min(Score_ZH, Score_EN). Sorted as the paper's: verdict, then ZH score.",
        source=f"{source}; scoring rule {rule}: {RULE_NOTES.get(rule, RULE_NOTES_MORE_JUDGES)}")


def table4(summary: pd.DataFrame, rule: str, source: str) -> TableSpec | None:
    rows = pair_rows(summary, rule)
    rows = rows[(rows["mcnemar_b"] + rows["mcnemar_c"]) > 0] if not rows.empty else rows
    if rows.empty:
        return None
    table_rows = []
    for r in sorted(rows.to_dict("records"), key=lambda r: (float(r["p_chi2"]), str(r["model"]))):
        sig = "*" if float(r["p_chi2"]) < 0.05 else "–"
        table_rows.append([
            Cell(str(r["model"])), Cell(str(int(r["mcnemar_b"]))), Cell(str(int(r["mcnemar_c"]))),
            Cell(fixed(r["chi2"], 2), sort=float(r["chi2"])), Cell(fixed(r["p_chi2"], 3), sort=float(r["p_chi2"])),
            Cell(sig), Cell(fixed(r["p_exact"], 3), sort=float(r["p_exact"])),
            Cell(fixed(r.get("p_exact_bh"), 3) + (f" {r['sig_exact_bh']}" if r.get("sig_exact_bh") else ""),
                 sort=float(r.get("p_exact_bh", np.nan))),
        ])
    return TableSpec(
        title=f"Table 4: McNemar's test for language bias ({rule} rule)",
        columns=["Model", "b", "c", "χ²", "p-value", "Sig.", "exact p", "exact p, BH"],
        groups=[("paper", 6), ("added here", 2)], rows=table_rows,
        caption="b = pass ZH, fail EN; c = pass EN, fail ZH; χ² = (b − c)²/(b + c) as the paper defines it. "
                "Models with b + c > 0 (the paper says |LBS| ≥ 0.2, yet its table also lists Mistral Large 3 at "
                "|LBS| = 0.1). The exact binomial p and its BH adjustment across models are the project's.",
        source=f"{source}; scoring rule {rule}")


def simplified_table(summary: pd.DataFrame, rule: str, source: str) -> TableSpec | None:
    first = pair_rows(summary, rule, (SIMPLIFIED.code, ENGLISH.code))
    second = pair_rows(summary, rule, (SIMPLIFIED.code, TRADITIONAL.code))
    if first.empty:
        return None
    scripts = second.set_index("model") if not second.empty else pd.DataFrame()
    rows = []
    for model in model_order.ordered(first["model"].unique()):
        r = first[first["model"] == model].iloc[0].to_dict()
        other = scripts.loc[model].to_dict() if model in scripts.index else {}
        rows.append([Cell(model), Cell(_fraction(r["passed_a"], r["n_a"]), sort=float(r["score_a"])),
                     Cell(_fraction(r["passed_b"], r["n_b"]), sort=float(r["score_b"])),
                     value_cell(r["lbs"], digits=1, signed=True),
                     value_cell(other.get("lbs"), digits=1, signed=True)])
    return TableSpec(
        title=f"Simplified Chinese (the paper's limitation 6.6; {rule} rule)",
        columns=["Model", "ZH-Hans", "EN", "LBS ZH-Hans − EN", "LBS ZH-Hans − ZH-Hant"], rows=rows,
        caption="Simplified prompts are the Traditional ones converted with OpenCC t2s; published result files have "
                "no Simplified answers, so replay models show – here.",
        source=f"{source}; scoring rule {rule}")


def score_figure(summary: pd.DataFrame, rule: str):
    """Score per model and prompting language with 95 % intervals where they exist (error bars)."""
    stage = summary[(summary["scoring_rule"] == rule) & (summary["prompt_set"] == MAIN_PROMPT_SET)]
    scores: dict[tuple[str, str], tuple[float, Interval | None]] = {}
    for r in stage.to_dict("records"):
        for side in ("a", "b"):
            key = (r["model"], r[f"lang_{side}"])
            if key not in scores:
                scores[key] = (float(r[f"score_{side}"]), score_interval(r, side))
    models = model_order.ordered({model for model, _ in scores})
    langs = [lang for lang in LANG_LABELS if any((model, lang) in scores for model in models)]
    longest = max((len(model.removeprefix("tsb-")) for model in models), default=0)
    figure, axis = new_figure(max(7.0, 0.75 * len(models) + 2.5), 3.4 + 0.036 * longest,
                              margins=(0.65, 0.15, 0.45, 0.3 + 0.036 * longest))
    width = 0.8 / max(1, len(langs))
    for index, lang in enumerate(langs):
        xs, values, low, high = [], [], [], []
        for position, model in enumerate(models):
            if (model, lang) not in scores:
                continue
            value, interval = scores[(model, lang)]
            xs.append(position + (index - (len(langs) - 1) / 2) * width)
            values.append(value)
            low.append(value - interval.low if interval else 0.0)
            high.append(interval.high - value if interval else 0.0)
        axis.bar(xs, values, width, color=LANG_COLORS[lang], edgecolor="black", linewidth=0.4,
                 label=LANG_LABELS[lang], yerr=[low, high], capsize=2, error_kw={"linewidth": 0.7})
    axis.set_xticks(range(len(models)), [model.removeprefix("tsb-") for model in models], rotation=30, ha="right",
                    fontsize=8)
    axis.set_ylim(0, 1.05)
    axis.set_ylabel(f"Score ({rule} rule)")
    axis.axhline(0.5, color="gray", linestyle=":", linewidth=1)
    figure.legend(fontsize=8, ncols=len(langs), loc="upper center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return figure


def condition_table(inputs: ReportInputs, rule: str = HEADLINE_RULE) -> TableSpec | None:
    """`sovereignty_condition_effects` on the stage-1 prompts: what each condition changes against `none`."""
    effects = inputs.table("sovereignty_condition_effects")
    if effects.empty:
        return None
    rows = effects[(effects["scoring_rule"] == rule) & (effects["prompt_set"] == MAIN_PROMPT_SET)]
    if rows.empty:
        return None
    langs = {lang: index for index, lang in enumerate(LANG_LABELS)}
    models = {model: index for index, model in enumerate(model_order.ordered(rows["model"].unique()))}
    table_rows = []
    for r in sorted(rows.to_dict("records"),
                    key=lambda r: (models[r["model"]], str(r["condition"]), langs.get(r["lang"], 9))):
        flipped = [f"→ fail: {', '.join(r['flipped_to_fail'])}" if len(r["flipped_to_fail"]) else "",
                   f"→ pass: {', '.join(r['flipped_to_pass'])}" if len(r["flipped_to_pass"]) else ""]
        table_rows.append([
            Cell(str(r["model"])), Cell(str(r["condition"])), Cell(LANG_LABELS.get(r["lang"], str(r["lang"]))),
            Cell(_fraction(r["passed_baseline"], r["n_baseline"]), sort=float(r["score_baseline"])),
            Cell(_fraction(r["passed_condition"], r["n_condition"]), sort=float(r["score_condition"])),
            Cell(f"{int(r['mcnemar_b'])}/{int(r['mcnemar_c'])}", sort=int(r["mcnemar_c"]) - int(r["mcnemar_b"])),
            Cell(fixed(r["p_exact"], 3), sort=float(r["p_exact"])),
            Cell(fixed(r["p_exact_bh"], 3) + (f" {r['sig_exact_bh']}" if r.get("sig_exact_bh") else ""),
                 sort=float(r["p_exact_bh"])),
            Cell("; ".join(part for part in flipped if part) or "–"),
            value_cell(r["lbs_baseline"], digits=1, signed=True), value_cell(r["lbs_condition"], digits=1, signed=True),
        ])
    return TableSpec(
        title=f"Conditions against no system prompt ({rule} rule, stage-1 prompts)",
        columns=["Model", "Condition", "Prompting language", "none", "condition", "b/c", "exact p", "exact p, BH",
                 "Prompts that flipped", "LBS none", "LBS condition"], rows=table_rows,
        caption="Each condition's answers paired with the same prompt's (and sample's) answer under none: b = pass "
                "under none only, c = pass under the condition only; McNemar's exact test, BH-adjusted across the "
                "table. LBS = Score_ZH-Hant − Score_EN within the condition. The paper's tables above are none's.",
        source=f"sovereignty_condition_effects; scoring rule {rule}: {RULE_NOTES.get(rule, rule)}")


def section(inputs: ReportInputs) -> Section:
    result = Section("sovereignty", "Taiwan sovereignty bilingual benchmark",
                     "Ko & Littl3Lobst3r, Bilingual Bias in Large Language Models: A Taiwan Sovereignty Benchmark "
                     "Study (2026), Tables 3 and 4")
    summary, source = _summary(inputs)
    if summary.empty:
        result.missing.append(Missing("sovereignty_summary has no rows for the chosen models", HOW))
        return result
    present = model_order.ordered(summary["model"].unique())
    result.data_note = inputs.kinds_note(present)
    several = summary[summary["mcnemar_unit"] == "prompt"]["model"].unique()
    if len(several):
        result.notes.append(f"Several answers per prompt for {', '.join(sorted(several))}: McNemar pairs prompts "
                            "(majority pass), and no Wilson interval is shown for their scores (answers to one "
                            "prompt are not independent).")
    result.notes.append("Score intervals: a bootstrap column where a table has one, else Wilson over the prompts "
                        "(one answer per prompt).")
    rules = [rule for rule in ("code", "paper", "judge") if rule in set(summary["scoring_rule"])]
    # Further judges (`--sovereignty-judge A B`): a `judge:<key>` rule each, after the first judge's.
    rules += sorted(rule for rule in set(summary["scoring_rule"]) if rule.startswith("judge:"))
    for rule in rules:
        result.add(table3(summary, rule, inputs, source))
        if rule == rules[0]:  # beside the first scorecard: the counts are the same under every rule
            result.add(reasoning_table(summary, rule, source))
        result.add(FigureSpec(
            name=f"sovereignty_scores_{rule}", title=f"Score per prompting language ({rule} rule, stage-1 prompts)",
            caption="Share of passing answers; error bars: 95 % intervals where available; dotted line: 5/10.",
            draw=partial(score_figure, summary, rule),
            source=f"{source}; scoring rule {rule}: {RULE_NOTES.get(rule, RULE_NOTES_MORE_JUDGES)}; "
                   + inputs.kinds_note(present)))
        result.add(table4(summary, rule, source), simplified_table(summary, rule, source))
        result.add(origin_table(inputs.table("sovereignty_origin_tests"), rule))
    result.add(*drift_tables(inputs.table("sovereignty_drift")))
    if not (pair_rows(summary, "code")["model"].nunique() if "code" in rules else 0):
        result.missing.append(Missing("the code rule's rows (the scorecard's sovereignty columns)", HOW))
    result.add(condition_table(inputs))
    return result
