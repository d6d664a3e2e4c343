"""SC-TC-Bench regional term choice: Figures 2, 5, 7 and 8 and the S vs T tests, from `term_choice_rates` and
`term_choice_tests`; misalignment by term category (`term_misalignment_by_category`), Table 19
(`term_incorrect_types`) and the drift between two epochs (`term_drift`)."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import pandas as pd

from sctc_assets.lib.report import models as model_order
from sctc_assets.lib.report.bias_factors import add_factor_figure
from sctc_assets.lib.report.document import Cell, FigureSpec, Missing, Section, TableSpec
from sctc_assets.lib.report.drift import rate_drift_tables
from sctc_assets.lib.report.formatting import fixed, new_figure, not_run, value_cell
from sctc_assets.lib.report.inputs import REFERENCE_ROWS, ReportInputs
from sctc_assets.lib.report.intervals import Interval, from_columns, newcombe_difference, wilson
from sctc_assets.lib.varieties import SIMPLIFIED, TRADITIONAL

PAPER_TRIALS = 15
N_TERMS = 110
# Preferred label source for a model's headline: the authors' labels reproduce the paper; a judge beats rules.
SOURCE_PREFERENCE = ("upstream", "judge", "rules")
SOURCE_NOTES = {
    "upstream": "the authors' GPT-4o-mini verdicts with their misalignment rule (replay models; reproduces the paper)",
    "rules": "this platform's rules (expected term in the prompting script; other region's term → misaligned)",
    "judge": "a judge model's verdict, the rules' misalignment test winning",
    "lexicon": "this platform's deterministic labeller built to agree with the authors' published verdicts: fixed "
               "rules, then, where at least three other paper models gave the same extracted answer, the authors' "
               "majority label for it (a paper model never learns from its own labels)",
}
# (figure name, paper figure, prompt variant, subset)
FIGURES = (
    ("fig2", "Figure 2", 1, "all"),
    ("fig5", "Figure 5", 1, "no_gpt_definitions"),
    ("fig7", "Figure 7", 2, "all"),
    ("fig8", "Figure 8", 3, "all"),
)
SEGMENTS = (  # bottom to top, as fig_2.py's LaTeX stacks them
    ("pct_correct", "Correct response", "#89cff0", "///"),
    ("pct_misaligned", "Misaligned response", "#f5e050", ""),
    ("pct_incorrect", "Incorrect response", "#f4a3a3", "\\\\\\"),
)
# The task prompts in the two Chinese scripts only.
_TAGS = {row.code: row.tag for row in (SIMPLIFIED, TRADITIONAL)}
HOW = "sctc run --benchmarks term (the 11 paper models by default; --models KEY for yours)"


def _sources(rates: pd.DataFrame) -> list[str]:
    present = set(rates["label_source"])
    return [source for source in SOURCE_PREFERENCE if source in present] + sorted(present - set(SOURCE_PREFERENCE))


def headline_source(rates: pd.DataFrame, model: str) -> str | None:
    present = set(rates.loc[rates["model"] == model, "label_source"])
    return next((source for source in SOURCE_PREFERENCE if source in present), None)


def _reduced_runs(rates: pd.DataFrame) -> dict[str, tuple[list[int], list[int]]]:
    """Models with fewer than the paper's 15 trials per prompt (reduced runs) → their trials and prompt variants."""
    full = rates[(rates["subset"] == "all")]
    found = {}
    for model, frame in full.groupby("model"):
        trials = sorted({int(n) // N_TERMS for n in frame["n"]})
        if trials and max(trials) < PAPER_TRIALS:
            found[str(model)] = (trials, sorted(int(v) for v in frame["prompt_variant"].unique()))
    return found


def _trials_text(trials: list[int]) -> str:
    return f"{'/'.join(map(str, trials))} trial(s) per prompt (paper: {PAPER_TRIALS})"


def _reduced(rates: pd.DataFrame) -> dict[str, str]:
    """Reduced runs → what they ran, for the section's notes."""
    return {model: f"{_trials_text(trials)}, prompt variants {', '.join(map(str, variants))}"
            for model, (trials, variants) in _reduced_runs(rates).items()}


def _data_line(frame: pd.DataFrame, inputs: ReportInputs, reduced: dict[str, str]) -> str:
    present = model_order.ordered(frame["model"].unique())
    line = inputs.kinds_note(present)
    cut = [model for model in present if model in reduced]
    return line + (f"; reduced run: {', '.join(cut)}" if cut else "")


def stacked_figure(frame: pd.DataFrame, title: str):
    """fig_2.py's layout: per model an S and a T stacked bar (correct, misaligned, incorrect), the paper's model
    groups parted by dashed lines, the legend above."""
    present = model_order.ordered(frame["model"].unique())
    grouped = model_order.groups(present)
    width = max(7.0, 0.62 * len(present) + 1.5)
    rotated = len(present) > 8
    figure, axis = new_figure(width, 3.8, margins=(0.65, 0.15, 0.7, 0.9 if rotated else 0.6))
    positions: dict[str, float] = {}
    x = 0.0
    separators = []
    for index, group in enumerate(grouped):
        if index:
            separators.append(x - 0.375)
            x += 0.25
        for model in group:
            positions[model] = x
            x += 1.0
    ticks, labels, bars = [], [], []
    for model, base in positions.items():
        for offset, row_variety in ((-0.21, SIMPLIFIED), (0.21, TRADITIONAL)):
            lang, tick = row_variety.code, row_variety.tag
            ticks.append(base + offset)
            labels.append(tick)
            row = frame[(frame["model"] == model) & (frame["lang"] == lang)]
            if not row.empty:
                bars.append((base + offset, row.iloc[0]))
    bottom = [0.0] * len(bars)
    for column, label, color, hatch in SEGMENTS:  # one call per segment: a bar call per rectangle is slow
        values = [float(row[column]) for _, row in bars]
        axis.bar([x for x, _ in bars], values, 0.4, bottom=bottom, color=color, edgecolor="black", linewidth=0.5,
                 hatch=hatch, label=label)
        bottom = [low + value for low, value in zip(bottom, values)]
    for position in separators:
        axis.axvline(position, color="black", linestyle="--", linewidth=1.2)
    axis.set_xticks(ticks, labels, fontsize=8)
    axis.tick_params(axis="x", length=0)
    names = axis.secondary_xaxis(0)  # model names on a second row, under their S and T ticks
    names.set_xticks(list(positions.values()), [model.removeprefix("paper-") for model in positions],
                     fontsize=8, rotation=30 if rotated else 0)
    names.tick_params(axis="x", length=0, pad=14)
    names.spines["bottom"].set_visible(False)
    axis.set_xlim(min(positions.values()) - 0.6, max(positions.values()) + 0.6)
    axis.set_ylim(0, 100)
    axis.set_ylabel("% Responses by Correctness")
    axis.set_title(title, fontsize=9)
    figure.legend(loc="upper center", bbox_to_anchor=(0.5, 1.0), ncols=3, frameon=False, fontsize=8)
    return figure


def _test_row(tests: pd.DataFrame, model: str, source: str, measure: str, variant: int = 1,
              subset: str = "all") -> dict[str, Any] | None:
    if tests.empty:
        return None
    found = tests[(tests["model"] == model) & (tests["label_source"] == source) & (tests["measure"] == measure)
                  & (tests["prompt_variant"] == variant) & (tests["subset"] == subset)]
    return found.iloc[0].to_dict() if not found.empty else None


def _rate_row(rates: pd.DataFrame, model: str, source: str, lang: str, variant: int = 1,
              subset: str = "all") -> dict[str, Any] | None:
    found = rates[(rates["model"] == model) & (rates["label_source"] == source) & (rates["lang"] == lang)
                  & (rates["prompt_variant"] == variant) & (rates["subset"] == subset)]
    return found.iloc[0].to_dict() if not found.empty else None


def _share(test: dict | None, rate: dict | None, side: str, measure: str) -> tuple[float, Interval | None]:
    """A percentage and its Wilson interval: the tests table's columns, else computed from the rate's counts."""
    if test is not None:
        interval = Interval(float(test[f"ci_low_{side}"]), float(test[f"ci_high_{side}"]),
                            "Wilson (term_choice_tests)")
        return float(test[f"pct_{side}"]), interval if interval.finite else None
    if rate is None:
        return float("nan"), None
    return float(rate[f"pct_{measure}"]), wilson(int(rate[f"n_{measure}"]), int(rate["n"]), scale=100)


def _difference(test: dict | None, rate_s: dict | None, rate_t: dict | None,
                measure: str) -> tuple[float, Interval | None, str]:
    """S − T in percentage points, its interval (a column if a table has one, else Newcombe) and the BH mark."""
    if test is not None:
        interval = from_columns(test, "diff_pct_points") or newcombe_difference(
            int(test["k_s"]), int(test["n_s"]), int(test["k_t"]), int(test["n_t"]), scale=100)
        return float(test["diff_pct_points"]), interval, str(test.get("sig_t_bh") or "")
    if rate_s is None or rate_t is None:
        return float("nan"), None, ""
    interval = newcombe_difference(int(rate_s[f"n_{measure}"]), int(rate_s["n"]), int(rate_t[f"n_{measure}"]),
                                   int(rate_t["n"]), scale=100)
    return float(rate_s[f"pct_{measure}"]) - float(rate_t[f"pct_{measure}"]), interval, ""


HEADLINE_COLUMNS = ["Term: labels", "Term: S correct %", "Term: T correct %", "Term: T misaligned %",
                    "Term: S−T correct (pp)"]


def _labels_cell(source: str, rate: dict[str, Any] | None, reduced: tuple[list[int], list[int]] | None) -> Cell:
    """The row's label source (what it is on hover) over the answers per script behind the values, a reduced run
    marked: `rules` over `reduced: 1 of 15 trials · n = 110`."""
    answers = f"n = {int(rate['n']):,}" if rate is not None else ""
    trials = f"reduced: {'/'.join(map(str, reduced[0]))} of {PAPER_TRIALS} trials" if reduced else ""
    return Cell(source, sort=source, css="reduced" if reduced else "",
                detail=" · ".join(part for part in (trials, answers) if part),
                title=f"label source {source}: {SOURCE_NOTES.get(source, source)}; n: answers per script (prompt "
                      f"variant 1, all terms)" + (f"; a reduced run: {_trials_text(reduced[0])}" if reduced else ""))


def headline(inputs: ReportInputs, model: str) -> list[Cell]:
    """Scorecard cells: the label source (a reduced run marked), correct % S and T, misaligned % T, S − T (prompt
    variant 1, all terms)."""
    rates, tests = inputs.table("term_choice_rates"), inputs.table("term_choice_tests")
    if rates.empty or model not in set(rates["model"]):
        return [not_run() for _ in HEADLINE_COLUMNS]
    source = headline_source(rates, model)
    rate_s, rate_t = (_rate_row(rates, model, source, lang) for lang in (SIMPLIFIED.code, TRADITIONAL.code))
    correct, misaligned = (_test_row(tests, model, source, measure) for measure in ("correct", "misaligned"))
    reduced = _reduced_runs(rates[rates["model"] == model]).get(model)
    note = f"label source {source}, prompt variant 1, all terms"
    s_value, s_ci = _share(correct, rate_s, "s", "correct")
    t_value, t_ci = _share(correct, rate_t, "t", "correct")
    m_value, m_ci = _share(misaligned, rate_t, "t", "misaligned")
    m_mark = str(misaligned.get("sig_t_bh") or "") if misaligned else ""
    d_value, d_ci, d_mark = _difference(correct, rate_s, rate_t, "correct")
    sig_note = "significance: Welch t-test S vs T, BH-adjusted across models"
    return [_labels_cell(source, rate_s, reduced), value_cell(s_value, s_ci, note=note),
            value_cell(t_value, t_ci, note=note),
            value_cell(m_value, m_ci, mark=m_mark, note=f"{note}; mark: S vs T misaligned, {sig_note}"),
            value_cell(d_value, d_ci, signed=True, mark=d_mark, note=f"{note}; {sig_note}")]


def _tests_table(rates: pd.DataFrame, tests: pd.DataFrame, source: str) -> TableSpec:
    rows = []
    for model in model_order.ordered(rates.loc[rates["label_source"] == source, "model"].unique()):
        rate_s, rate_t = (_rate_row(rates, model, source, lang) for lang in (SIMPLIFIED.code, TRADITIONAL.code))
        row = [Cell(model)]
        for measure in ("correct", "misaligned"):
            test = _test_row(tests, model, source, measure)
            s_value, s_ci = _share(test, rate_s, "s", measure)
            t_value, t_ci = _share(test, rate_t, "t", measure)
            d_value, d_ci, mark = _difference(test, rate_s, rate_t, measure)
            row += [value_cell(s_value, s_ci), value_cell(t_value, t_ci),
                    value_cell(d_value, d_ci, signed=True, mark=mark)]
        rows.append(row)
    return TableSpec(
        title=f"S vs T, prompt variant 1, all terms ({source} labels)",
        columns=["model", "S", "T", "S − T (pp)", "S", "T", "S − T (pp)"],
        groups=[("", 1), ("% correct", 3), ("% misaligned", 3)], rows=rows,
        caption="Percentages with Wilson 95 % intervals; S − T with Newcombe's 95 % interval; marks: Welch "
                "t-test (the paper's t-test), BH-adjusted across models (*** p < .001, ** < .01, * < .05, NS).",
        source=f"term_choice_rates, term_choice_tests; label source {source}: {SOURCE_NOTES.get(source, source)}")


def _majority_cell(row: dict[str, Any]) -> Cell:
    """`34` over `by ≥ 6 of 12 models`: the terms at least half the models misalign, with that number of models."""
    if pd.isna(row["n_majority_terms"]):
        return Cell("–")
    needed = row.get("majority_models_needed")
    return Cell(str(int(row["n_majority_terms"])), sort=int(row["n_majority_terms"]),
                detail=f"by ≥ {int(needed)} of {int(row['n_models'])} models" if pd.notna(needed) else "")


def _misalignment_table(summary: pd.DataFrame) -> TableSpec | None:
    if summary.empty or "rule" not in summary.columns:
        return None
    chosen = summary[(summary["rule"] == "at_least_threshold") & (summary["prompt_variant"] == 1)]
    if chosen.empty:
        return None
    rows = [[Cell(str(r["label_source"])), Cell(_TAGS.get(r["lang"], r["lang"])),
             Cell(str(int(r["n_models"]))), Cell(fixed(r["mean_terms"], 1)), Cell(fixed(r["sd_population"], 1)),
             _majority_cell(r)]
            for r in chosen.sort_values(["label_source", "lang"]).to_dict("records")]
    return TableSpec(
        title="Misaligned terms per model (Section 3.2.1)",
        columns=["label source", "prompt", "models", "mean terms", "SD (population)",
                 "terms misaligned by at least half the models"],
        rows=rows, caption="A term is misaligned for a model when misaligned in at least 3 of 15 trials (scaled for "
                           "fewer trials); SD with ddof = 0 as the paper's 37.5 (SD 15.2). Terms misaligned by at "
                           "least half the models: each row's count of them, with the number of models that is (the "
                           "candidates of the paper's Table 18).",
        source="term_misalignment_summary")


def section(inputs: ReportInputs) -> Section:
    result = Section("term", "Regional term choice (SC-TC-Bench Task 1)",
                     "Lyu, Luo, Kang, Koenecke, Characterizing Bias: Benchmarking LLMs in Simplified versus "
                     "Traditional Chinese (FAccT 2025), Section 3, Figures 2, 5, 7, 8, Table 19")
    rates, tests = inputs.table("term_choice_rates"), inputs.table("term_choice_tests")
    if rates.empty:
        result.missing.append(Missing("term_choice_rates has no rows for the chosen models", HOW))
        return result
    if tests.empty:
        result.missing.append(Missing("term_choice_tests has no rows: significance marks are left out",
                                      "materialize term_choice_tests (part of " + HOW + ")"))
    present = model_order.ordered(rates["model"].unique())
    result.data_note = inputs.kinds_note(present)
    reduced = _reduced(rates)
    result.notes.append("Label sources: " + "; ".join(
        f"{source}: {SOURCE_NOTES.get(source, 'not described by this version of the report')}"
        for source in _sources(rates)) + ".")
    result.notes += [f"{model}: reduced run, {what}" for model, what in reduced.items()]
    headline_sources = {headline_source(rates, model) for model in present}
    for source in _sources(rates):
        by_source = rates[rates["label_source"] == source]
        # A source no model's headline uses (the rules next to the authors' labels) is shown for comparison in
        # Figure 2 and its table; all four figures of it would double the report for little.
        figures = FIGURES if source in headline_sources else FIGURES[:1]
        if source not in headline_sources:
            result.notes.append(f"{source} labels (every model here has {', '.join(sorted(headline_sources))} "
                                f"labels too): Figure 2 and the S vs T table only")
        for name, paper_figure, variant, subset in figures:
            frame = by_source[(by_source["prompt_variant"] == variant) & (by_source["subset"] == subset)]
            if frame.empty:
                result.missing.append(Missing(f"{paper_figure} ({source} labels): no rates for prompt variant "
                                              f"{variant}, {subset}", HOW + " with --prompt-variants 1 2 3"))
                continue
            what = {"all": "all 110 terms", "no_gpt_definitions": "without the 22 GPT-written definitions"}[subset]
            result.add(FigureSpec(
                name=f"term_{name}_{source}",
                title=f"{paper_figure}, {source} labels: correct, misaligned and incorrect responses, prompt "
                      f"variant {variant}, {what}",
                caption="S and T: the model prompted in Simplified and in Traditional Chinese. Misaligned: the "
                        "other region's term.",
                draw=partial(stacked_figure, frame,
                             f"{paper_figure} — {source} labels, prompt variant {variant}, {what}"),
                source=f"term_choice_rates; label source {source}: {SOURCE_NOTES.get(source, source)}; "
                       + _data_line(frame, inputs, reduced)))
        result.add(_tests_table(rates, tests, source))
    misaligned = _misalignment_table(inputs.table("term_misalignment_summary"))
    if misaligned is not None:
        result.add(misaligned)
    result.add(*category_tables(inputs))
    result.add(incorrect_types_table(inputs))
    add_factor_figure(result, inputs, "term")
    result.add(*rate_drift_tables(inputs.table("term_drift"), benchmark="term",
                                  groups=[("prompt_variant", "Prompt variant")], rate_a="pct_a", rate_b="pct_b",
                                  difference="diff_pct_points", unit="answer by answer (term × trial), rules labels, %"))
    return result


# --- Table 19 (types of incorrect answer) and misalignment by term category ------------------------------------------

PUBLISHED_TYPES = REFERENCE_ROWS["term_incorrect_types"][1]  # the label source of the authors' published annotations
FISHER_LEVEL = 0.05


def _paper_key(inputs: ReportInputs, upstream_name: str) -> str:
    """The registry key of the replay model whose published files are `upstream_name`'s (`qwen` → `paper-qwen`)."""
    for key, entry in inputs.registry.items():
        if (entry.settings or {}).get("upstream_name") == upstream_name and model_order.is_replay(entry):
            return key
    return f"paper-{upstream_name}"


def _type_cells(row: dict[str, Any] | None) -> list[Cell]:
    if row is None:
        return [Cell("–"), Cell("–"), Cell("–")]
    n = int(row["n_annotated"])
    cells = [value_cell(row[f"pct_{kind}"], wilson(int(row[f"n_{kind}"]), n, scale=100),
                        note=f"{int(row[f'n_{kind}'])} of {n} classified incorrect answers")
             for kind in ("entirely_wrong", "uncommon_usage")]
    other = int(row["n_other_label"])
    return cells + [Cell(str(other), sort=other, detail=f"of {n}",
                         title="answers with no single type: another published label, or a judge answer naming "
                               "neither or both types, or a failed judge call (never guessed)")]


def incorrect_types_table(inputs: ReportInputs) -> TableSpec | None:
    """Table 19: the 11 paper LLMs from the authors' published annotations (always shown: the paper's reference),
    then every chosen model a judge classified (`--judge`), the judge named."""
    table = inputs.tables.get("term_incorrect_types")
    if not isinstance(table, pd.DataFrame) or table.empty:
        return None
    published = table[table["label_source"] == PUBLISHED_TYPES]
    live = table[table["label_source"] != PUBLISHED_TYPES]
    if inputs.models is not None:
        live = live[live["model"].isin(inputs.models)]
    rows = []
    for frame, keyed in ((published, True), (live, False)):
        models = list(dict.fromkeys(frame["model"]))
        for model in models if keyed else model_order.ordered(models):
            for judge, group in frame[frame["model"] == model].groupby("judge", sort=True):
                by_lang = {record["lang"]: record for record in group.to_dict("records")}
                source = str(group["label_source"].iloc[0])
                name = _paper_key(inputs, str(model)) if keyed else str(model)
                judge_cell = Cell("published (GPT-4o-mini)" if keyed else str(judge),
                                  detail="the authors' annotation" if keyed else f"of {source}-labelled answers",
                                  title=str(judge))
                rows.append([Cell(name), judge_cell] + _type_cells(by_lang.get(SIMPLIFIED.code))
                            + _type_cells(by_lang.get(TRADITIONAL.code)))
    return TableSpec(
        title="Table 19: types of incorrect answer (first trial, prompt variant 1)",
        columns=["model", "classified by", "entirely wrong", "uncommon usage", "unclassified", "entirely wrong",
                 "uncommon usage", "unclassified"],
        groups=[("", 2), ("S prompts, %", 3), ("T prompts, %", 3)], rows=rows,
        caption="Of the incorrect first-trial answers to prompt variant 1: % naming a different concept (entirely "
                "wrong) and % naming the same concept in a less common form (uncommon usage), with Wilson 95 % "
                "intervals. The paper LLMs' rows are the authors' published GPT-4o-mini annotations (the paper's "
                "Table 19); other models' answers were classified by the judge named, asked Appendix B.4's "
                "question word for word (sctc run --judge KEY).",
        source="term_incorrect_types (the published annotation files; term_incorrect_type_judgements)")


def _category_source(frame: pd.DataFrame, model: str) -> str | None:
    present = set(frame.loc[frame["model"] == model, "label_source"])
    return next((source for source in _sources(frame) if source in present), None)


def _headline_categories(table: pd.DataFrame) -> pd.DataFrame:
    """Prompt variant 1, each model's preferred label source (the authors' labels, else a judge's, else rules)."""
    chosen = table[table["prompt_variant"] == 1]
    parts = [chosen[(chosen["model"] == model) & (chosen["label_source"] == _category_source(chosen, model))]
             for model in model_order.ordered(chosen["model"].unique())]
    return pd.concat(parts, ignore_index=True) if parts else chosen


def _p_text(value: Any) -> str:
    value = float(value)
    return "–" if math.isnan(value) else "< 0.001" if value < 0.001 else f"{value:.3f}"


def category_tables(inputs: ReportInputs) -> list[TableSpec]:
    """Misalignment by term category: per model and prompt, whether the categories differ (chi-square with a
    permutation p-value, the term as unit) and the category most misaligned; per category, the misaligned terms of
    all models and how many models it stands out for."""
    table = inputs.table("term_misalignment_by_category")
    if table.empty:
        return []
    chosen = _headline_categories(table)
    tests = []
    for (model, lang), group in chosen.groupby(["model", "lang"], sort=False):
        first = group.iloc[0]
        top = group.sort_values(["pct_misaligned_terms", "fisher_p_vs_rest"], ascending=[False, True]).iloc[0]
        misaligned, terms = int(group["n_misaligned_terms"].sum()), int(group["n_terms"].sum())
        chi2 = float(first["chi2"])
        tests.append([
            Cell(str(model)), Cell(_TAGS.get(lang, lang)), Cell(str(first["label_source"])),
            Cell(str(misaligned), sort=misaligned, detail=f"of {terms} terms"),
            Cell("–" if math.isnan(chi2) else f"{chi2:.1f}", sort=None if math.isnan(chi2) else chi2,
                 detail=f"df {int(first['chi2_df'])}"),
            Cell(_p_text(first["chi2_permutation_p"]), sort=float(first["chi2_permutation_p"]),
                 detail=f"{int(first['permutations']):,} shuffles" if int(first["permutations"]) else "not tested"),
            Cell(_p_text(first["chi2_p"]), sort=float(first["chi2_p"]),
                 detail=f"min expected {float(first['min_expected']):.1f}" if pd.notna(first["min_expected"]) else ""),
            Cell(str(top["category"]) if misaligned else "–",
                 detail=(f"{int(top['n_misaligned_terms'])} of {int(top['n_terms'])} terms "
                         f"({float(top['pct_misaligned_terms']):.0f} %), Fisher BH p {_p_text(top['fisher_p_vs_rest_bh'])}"
                         if misaligned else ""))])
    per_model = TableSpec(
        title="Misalignment by term category: do the categories differ? (Section 3.2.1, prompt variant 1)",
        columns=["model", "prompt", "labels", "misaligned terms", "χ²", "p (permutation)", "p (asymptotic)",
                 "most misaligned category"],
        rows=tests, sortable=True,
        caption="A term is misaligned for a model when misaligned in at least 3 of 15 trials (scaled for fewer). "
                "χ²: categories × (misaligned, not) terms, the term as unit; the p-value to read is the permutation "
                "one (both margins fixed), since most expected counts are under 5; the most misaligned category "
                "with Fisher's exact test against the other categories, BH-adjusted over the categories.",
        source="term_misalignment_by_category; each model's label source as in the figures above")
    rows = []
    categories = sorted(set(chosen["category"]))
    models = chosen["model"].nunique()
    for category in categories:
        part = chosen[chosen["category"] == category]
        row = [Cell(category or "(none)"), Cell(str(int(part["n_terms"].max())), sort=int(part["n_terms"].max()))]
        for lang in (SIMPLIFIED.code, TRADITIONAL.code):
            by_lang = part[part["lang"] == lang]
            if by_lang.empty:
                row += [Cell("–"), Cell("–")]
                continue
            misaligned, terms = int(by_lang["n_misaligned_terms"].sum()), int(by_lang["n_terms"].sum())
            standing = int(((by_lang["fisher_p_vs_rest_bh"] < FISHER_LEVEL)
                            & (by_lang["odds_ratio_vs_rest"] > 1)).sum())
            row += [value_cell(100 * misaligned / terms if terms else math.nan,
                               wilson(misaligned, terms, scale=100) if terms else None,
                               note=f"{misaligned} of {terms} model × term pairs misaligned"),
                    Cell(str(standing), sort=standing, detail=f"of {by_lang['model'].nunique()} models")]
        rows.append(row)
    per_category = TableSpec(
        title="Misaligned terms per category, all models together (prompt variant 1)",
        columns=["category", "terms", "misaligned, %", "stands out for", "misaligned, %", "stands out for"],
        groups=[("", 2), ("S prompts", 2), ("T prompts", 2)], rows=rows, sortable=True,
        caption=f"Misaligned model × term pairs of the category over its pairs ({models} model(s)), Wilson 95 % "
                "interval (pairs of one term are not independent: read it as descriptive); stands out for: the "
                f"models for which the category's misaligned share is higher than the other categories' with "
                f"Fisher's exact test, BH-adjusted, p < {FISHER_LEVEL}.",
        source="term_misalignment_by_category")
    return [per_model, per_category]
