"""Contextually aligned review pairs: Tables 1 and 2 of Tang et al. (NAACL 2025) and a gap chart, from
`review_metrics`, then Figures 2–4, the per-pair scatter and the human ratings (`reviews_studies`), named by the
variety pair its columns were written for (the paper's `tw`/`cn` by default)."""

from __future__ import annotations

from functools import partial
from typing import Any

import pandas as pd

from sctc_assets.lib.report import models as model_order
from sctc_assets.lib.report.document import Cell, FigureSpec, Missing, Section, TableSpec
from sctc_assets.lib.report.formatting import fixed, new_figure, not_run, value_cell
from sctc_assets.lib.report.inputs import ReportInputs
from sctc_assets.lib.report import reviews_studies
from sctc_assets.lib.report.intervals import Interval, from_columns, matched_pairs_difference, paired_t_difference
from sctc_assets.lib.reviews.varieties import VarietyPair, pair_of_columns

FORMATS = ("structured", "plain", "shuffled")
LENGTHS = (("short", "Short (1-49)"), ("long", "Long (50+)"), ("all", "Overall"))
HEADLINE_FORMAT = "structured"
HOW = "sctc run --benchmarks reviews --models KEY (and --reviews FILE for your export; the shipped set is fictional)"
KEYS = ["model", "format", "analysis", "subset"]


def _metrics(inputs: ReportInputs) -> pd.DataFrame:
    """`review_metrics`, with interval columns of any other review table of the same keys merged in."""
    metrics = inputs.table("review_metrics")
    if metrics.empty:
        return metrics
    for name in inputs.tables:
        if not name.startswith("review_") or name == "review_metrics":
            continue
        frame = inputs.table(name)
        extra = [column for column in frame.columns if column.endswith(("_ci_low", "_ci_high"))
                 and column not in metrics.columns]
        if extra and set(KEYS) <= set(frame.columns):
            metrics = metrics.merge(frame[KEYS + extra].drop_duplicates(KEYS), on=KEYS, how="left")
    return metrics


def variety_pair_of(metrics: pd.DataFrame | dict[str, Any]) -> VarietyPair:
    """The pair a metric table (or row) was written for, from its `acc_<variety>` columns."""
    return pair_of_columns(list(metrics.keys()) if isinstance(metrics, dict) else metrics.columns, "acc")


def acc_interval(row: dict[str, Any]) -> Interval | None:
    a, b = variety_pair_of(row).suffixes
    return from_columns(row, "delta_acc", method="paired (table column)") or matched_pairs_difference(
        int(row[f"only_{b}_correct"]), int(row[f"only_{a}_correct"]), int(row["n_pairs"]), scale=100)


def mse_interval(row: dict[str, Any]) -> Interval | None:
    return from_columns(row, "delta_mse", method="paired (table column)") or paired_t_difference(
        row["delta_mse"], row["ttest_t"], int(row["n_pairs"]))


def _length_rows(metrics: pd.DataFrame) -> pd.DataFrame:
    rows = metrics[(metrics["analysis"] == "length") & (metrics["n_pairs"].fillna(0) > 0)]
    return rows


HEADLINE_COLUMNS = ["Reviews: ΔAcc (pp)", "Reviews: ΔMSE"]


def headline(inputs: ReportInputs, model: str) -> list[Cell]:
    metrics = _metrics(inputs)
    rows = _length_rows(metrics) if not metrics.empty else metrics
    chosen = rows[(rows["model"] == model) & (rows["format"] == HEADLINE_FORMAT) & (rows["subset"] == "all")] \
        if not rows.empty else rows
    if chosen.empty:
        return [not_run() for _ in HEADLINE_COLUMNS]
    row = chosen.iloc[0].to_dict()
    note = f"{HEADLINE_FORMAT} format, all pairs (n = {int(row['n_pairs'])}); Δ = {variety_pair_of(row).difference}"
    return [value_cell(row["delta_acc"], acc_interval(row), signed=True, mark=str(row.get("sig_acc") or ""),
                       note=f"{note}; mark: exact McNemar p"),
            value_cell(row["delta_mse"], mse_interval(row), digits=3, signed=True,
                       mark=str(row.get("sig_mse") or ""), note=f"{note}; mark: paired t-test")]


def paper_table(metrics: pd.DataFrame, measure: str) -> TableSpec:
    """Table 1 (accuracy, %) or Table 2 (MSE): rows length group × model, per format the first and the second
    variety (tw, cn), Δ (second − first), stars."""
    digits = 2 if measure == "acc" else 3
    pair = variety_pair_of(metrics)
    a, b = pair.suffixes
    rows = []
    for subset, label in LENGTHS:
        for model in model_order.ordered(metrics["model"].unique()):
            row = [Cell(label), Cell(model)]
            for fmt in FORMATS:
                found = metrics[(metrics["model"] == model) & (metrics["format"] == fmt)
                                & (metrics["subset"] == subset)]
                if found.empty:
                    row += [Cell("–"), Cell("–"), Cell("–"), Cell("")]
                    continue
                r = found.iloc[0].to_dict()
                delta = float(r[f"delta_{measure}"])
                row += [Cell(fixed(r[f"{measure}_{a}"], digits)), Cell(fixed(r[f"{measure}_{b}"], digits)),
                        Cell(fixed(delta, digits), sort=delta, css=_gap_class(delta, measure)),
                        Cell(str(r.get(f"sig_{measure}") or ""))]
            rows.append(row)
    name = {"acc": "Table 1: Accuracy (Acc ↑, %)", "mse": "Table 2: Mean squared error (MSE ↓)"}[measure]
    test = {"acc": "exact McNemar p", "mse": "paired t-test on the squared errors"}[measure]
    return TableSpec(
        title=f"{name} by length", columns=["Text length (#characters)", "Model"] + [
            column for _ in FORMATS for column in (*pair.codes, f"Δ{measure.upper() if measure == 'mse' else 'Acc'} "
                                                                f"({pair.second.code}−{pair.first.code})", "sig.")],
        groups=[("", 2)] + [(fmt, 4) for fmt in FORMATS], rows=rows,
        caption=f"Pairs whose two predictions are valid; stars: {test} (* p < .05, ** < .01, *** < .001). "
                f"Shading: red = better in {pair.second.code.upper()}, green = worse in {pair.second.code.upper()}, "
                "as in the paper.",
        source="review_metrics, analysis length")


def _gap_class(delta: float, measure: str) -> str:
    """The shading of a Δ cell: the classes are named `cn` after the paper's second variety, whatever the pair."""
    if pd.isna(delta) or delta == 0:
        return ""
    better_cn = delta > 0 if measure == "acc" else delta < 0
    return "gap-cn-better" if better_cn else "gap-cn-worse"


def gap_figure(metrics: pd.DataFrame):
    """ΔAcc and ΔMSE (second − first variety, the paper's cn − tw) per model and format, all pairs, with 95 %
    intervals."""
    pair = variety_pair_of(metrics)
    overall = metrics[metrics["subset"] == "all"]
    models = model_order.ordered(overall["model"].unique())
    rotated = len(models) > 3
    figure, axes = new_figure(min(14.0, max(7.0, 1.0 * len(models) + 5)), 3.6, wspace=0.3, nrows=1, ncols=2,
                              squeeze=False, margins=(0.75, 0.15, 0.6, 1.0 if rotated else 0.45))
    colors = {"structured": "#7cb9e8", "plain": "#f5c26b", "shuffled": "#9bd18b"}
    width = 0.8 / len(FORMATS)
    for axis, (measure, label, interval_of) in zip(axes[0], (("acc", f"ΔAcc ({pair.difference}), pp", acc_interval),
                                                             ("mse", f"ΔMSE ({pair.difference})", mse_interval))):
        for index, fmt in enumerate(FORMATS):
            xs, values, low, high = [], [], [], []
            for position, model in enumerate(models):
                found = overall[(overall["model"] == model) & (overall["format"] == fmt)]
                if found.empty:
                    continue
                r = found.iloc[0].to_dict()
                value, interval = float(r[f"delta_{measure}"]), interval_of(r)
                xs.append(position + (index - 1) * width)
                values.append(value)
                low.append(value - interval.low if interval else 0.0)
                high.append(interval.high - value if interval else 0.0)
            if xs:
                axis.bar(xs, values, width, color=colors[fmt], edgecolor="black", linewidth=0.4, label=fmt,
                         yerr=[low, high], capsize=2, error_kw={"linewidth": 0.7})
        axis.axhline(0, color="black", linewidth=0.8)
        axis.set_xticks(range(len(models)), models, rotation=20 if rotated else 0,
                        ha="right" if rotated else "center", fontsize=8)
        axis.set_xlim(-0.6, len(models) - 0.4)
        axis.set_ylabel(label)
        axis.set_title({"acc": f"Accuracy gap (> 0: better on {pair.second.short_name} reviews)",
                        "mse": f"MSE gap (< 0: better on {pair.second.short_name} reviews)"}[measure], fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 1.0), ncols=len(FORMATS), fontsize=8,
                  frameon=False)
    return figure


def section(inputs: ReportInputs) -> Section:
    result = Section("reviews", "Contextually aligned review pairs",
                     "Tang et al., Using Contextually Aligned Online Reviews to Measure LLMs' Performance Disparities "
                     "Across Language Varieties (NAACL 2025), Tables 1 and 2")
    metrics = _metrics(inputs)
    rows = _length_rows(metrics) if not metrics.empty else metrics
    if rows.empty:
        result.missing.append(Missing("review_metrics has no rows with valid prediction pairs for the chosen models",
                                      HOW))
        return result
    present = model_order.ordered(rows["model"].unique())
    pair = variety_pair_of(rows)
    result.notes.append(f"Varieties: {pair.first.display_name} ({pair.first.code}, the reference) vs "
                        f"{pair.second.display_name} ({pair.second.code}); Δ = {pair.difference}.")
    result.data_note = inputs.kinds_note(present)
    for model in present:
        overall = rows[(rows["model"] == model) & (rows["subset"] == "all")]
        pairs = ", ".join(f"{r['format']} {int(r['n_pairs'])} pairs" + (f" ({int(r['n_excluded'])} excluded)"
                                                                           if r["n_excluded"] else "")
                          for r in overall.to_dict("records"))
        result.notes.append(f"{model}: {pairs}")
    result.notes.append("ΔAcc intervals: a paired column where a table has one, else the matched-pairs Wald "
                        "interval from the discordant pairs; ΔMSE: the paired t-test's interval.")
    result.add(paper_table(rows, "acc"), paper_table(rows, "mse"))
    result.add(FigureSpec(
        name="reviews_gaps", title=f"Performance gap between {pair.second.short_name} and "
                                   f"{pair.first.display_name} reviews (all pairs)",
        caption=f"Δ = {pair.difference} per model and review format; error bars: 95 % intervals.",
        draw=partial(gap_figure, rows), source="review_metrics, analysis length, subset all; "
                                        + inputs.kinds_note(present)))
    reviews_studies.add_to(result, inputs, rows, pair)
    return result
