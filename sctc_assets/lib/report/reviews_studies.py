"""The review benchmark's side studies in the report: Figures 3–4 (accuracy and MSE of the second variety against
the first per model × format, short and long pairs, from `review_metrics`), the per-pair scatter of the two
predictions (`review_prediction_pairs`), Appendix E's pilot (Figure 2 and a table, `review_sentiment_pilot`) and the
human ratings' agreement (`review_human_agreement`). `add_to(section, inputs)` appends whatever the tables hold."""

from __future__ import annotations

from functools import partial

import pandas as pd

from sctc_assets.lib.report import models as model_order
from sctc_assets.lib.report.document import Cell, FigureSpec, Section, TableSpec
from sctc_assets.lib.report.formatting import fixed, new_figure
from sctc_assets.lib.report.inputs import ReportInputs
from sctc_assets.lib.reviews.varieties import VarietyPair, pair_of_columns

FORMATS = ("structured", "plain", "shuffled")
MARKERS = {"structured": "o", "plain": "s", "shuffled": "^"}
CLASS_COLORS = {"negative": "#d62728", "neutral": "#7f7f7f", "positive": "#2ca02c", "overall": "#1f77b4"}
SCATTER_FORMAT = "structured"
SHORT_BINS = 5  # bins 0–4: 1–50 characters, the nearest 10-character bins to the paper's short group (1–49)


def length_scatter(metrics: pd.DataFrame, measure: str, pair: VarietyPair):
    """Figure 3 (accuracy) or 4 (MSE): per length group one panel, one point per model × format, x the second
    variety (the paper's Mainland), y the first, and the diagonal x = y."""
    a, b = pair.suffixes
    figure, axes = new_figure(8.4, 4.0, wspace=0.3, nrows=1, ncols=2, squeeze=False, margins=(0.7, 1.6, 0.4, 0.6))
    models = model_order.ordered(metrics["model"].unique())
    colors = {model: f"C{index % 10}" for index, model in enumerate(models)}
    values = pd.concat([metrics[f"{measure}_{a}"], metrics[f"{measure}_{b}"]]).astype(float)
    low, high = float(values.min()), float(values.max())
    pad = max((high - low) * 0.08, 0.5 if measure == "mse" else 2.0)
    for axis, subset in zip(axes[0], ("short", "long")):
        chosen = metrics[metrics["subset"] == subset]
        for row in chosen.to_dict("records"):
            axis.scatter(float(row[f"{measure}_{b}"]), float(row[f"{measure}_{a}"]), color=colors[row["model"]],
                         marker=MARKERS.get(row["format"], "o"), s=36, edgecolor="black", linewidth=0.4)
        axis.plot([low - pad, high + pad], [low - pad, high + pad], color="black", linewidth=0.8, linestyle="--")
        axis.set_xlim(low - pad, high + pad)
        axis.set_ylim(low - pad, high + pad)
        axis.set_xlabel(f"{pair.second.short_name} ({b})")
        axis.set_ylabel(f"{pair.first.short_name} ({a})")
        axis.set_title(f"{subset} pairs", fontsize=9)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[model], marker="o", linestyle="", label=model) for model in models]
    handles += [Line2D([], [], color="black", marker=MARKERS[fmt], linestyle="", markerfacecolor="white", label=fmt)
                for fmt in FORMATS]
    figure.legend(handles=handles, loc="center left", bbox_to_anchor=(1 - 1.5 / 8.4, 0.5), fontsize=7,
                  frameon=False)
    return figure


def pair_scatter(pairs: pd.DataFrame, pair: VarietyPair):
    """Per model, the structured format's two predictions of every pair whose two answers are valid: x the second
    variety's, y the first's, a disc's area the number of pairs, and the diagonal (the same score for both)."""
    a, b = pair.suffixes
    valid = pairs[pairs["both_valid"].astype(bool) & (pairs["format"] == SCATTER_FORMAT)]
    models = model_order.ordered(valid["model"].unique())
    columns = min(len(models), 3)
    rows = -(-len(models) // columns)
    figure, axes = new_figure(3.0 * columns + 0.9, 3.0 * rows + 0.6, wspace=0.35, nrows=rows, ncols=columns,
                              squeeze=False, margins=(0.6, 0.3, 0.35, 0.55))
    figure.subplots_adjust(hspace=0.45)
    for index, axis in enumerate(axes.flat):
        if index >= len(models):
            axis.set_visible(False)
            continue
        chosen = valid[valid["model"] == models[index]]
        counts = chosen.groupby([f"prediction_{b}", f"prediction_{a}"]).size().reset_index(name="n")
        axis.scatter(counts[f"prediction_{b}"].astype(float), counts[f"prediction_{a}"].astype(float),
                     s=18 * counts["n"].astype(float), color="#1f77b4", alpha=0.6, edgecolor="black", linewidth=0.4)
        axis.plot([0.5, 10.5], [0.5, 10.5], color="black", linewidth=0.8, linestyle="--")
        axis.set_xlim(0.5, 10.5)
        axis.set_ylim(0.5, 10.5)
        axis.set_xticks(range(1, 11))
        axis.set_yticks(range(1, 11))
        axis.tick_params(labelsize=7)
        axis.set_title(f"{models[index]} (n = {len(chosen)})", fontsize=8)
        axis.set_xlabel(f"prediction, {b} review", fontsize=8)
        axis.set_ylabel(f"prediction, {a} review", fontsize=8)
    return figure


def pilot_figure(pilot: pd.DataFrame):
    """Figure 2: accuracy (top) and MSE (bottom) per 10-character bin for each class and overall, one column per
    model; the first variety solid, the second dashed."""
    models = model_order.ordered(pilot["model"].unique())
    varieties = list(dict.fromkeys(pilot["variety"]))
    figure, axes = new_figure(4.2 * len(models) + 1.9, 5.6, wspace=0.3, nrows=2, ncols=len(models), squeeze=False,
                              margins=(0.7, 1.7, 0.35, 0.55))
    figure.subplots_adjust(hspace=0.35)
    styles = {variety: style for variety, style in zip(varieties, ("-", "--", ":", "-."))}
    for column, model in enumerate(models):
        chosen = pilot[pilot["model"] == model]
        for row, (measure, label) in enumerate((("accuracy", "accuracy (%)"), ("mse", "MSE (classes 0, 1, 2)"))):
            axis = axes[row][column]
            for (variety, sentiment), line in chosen.groupby(["variety", "sentiment"], sort=False):
                line = line.sort_values("length_bin")
                axis.plot(line["bin_high"], line[measure], color=CLASS_COLORS.get(sentiment, "black"),
                          linestyle=styles[variety], marker="o", markersize=3, linewidth=1.1,
                          label=f"{sentiment} ({variety})")
            axis.set_xlim(0, 500)
            axis.set_ylabel(label, fontsize=8)
            axis.tick_params(labelsize=7)
            if row == 0:
                axis.set_title(model, fontsize=9)
                axis.set_ylim(-3, 103)
            else:
                axis.set_xlabel("review length (characters, bin's upper end)", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="center left", bbox_to_anchor=(1 - 1.6 / figure.get_figwidth(), 0.5),
                  fontsize=7, frameon=False)
    return figure


def pilot_table(pilot: pd.DataFrame) -> TableSpec:
    """Per model × variety × class: accuracy and MSE over the short bins (1–50 characters) and the longer ones."""
    rows = []
    for model in model_order.ordered(pilot["model"].unique()):
        for variety in dict.fromkeys(pilot[pilot["model"] == model]["variety"]):
            for sentiment in ("negative", "neutral", "positive", "overall"):
                chosen = pilot[(pilot["model"] == model) & (pilot["variety"] == variety)
                               & (pilot["sentiment"] == sentiment)]
                if chosen.empty:
                    continue
                row = [Cell(model), Cell(variety), Cell(sentiment)]
                for part in (chosen[chosen["length_bin"] < SHORT_BINS], chosen[chosen["length_bin"] >= SHORT_BINS]):
                    n = int(part["n"].sum())
                    correct = int(part["correct"].sum())
                    mse = float((part["mse"].fillna(0) * part["n"]).sum() / n) if n else float("nan")
                    row += [Cell(str(n), sort=n), Cell(fixed(100 * correct / n, 1) if n else "–"),
                            Cell(fixed(mse, 3) if n else "–")]
                rows.append(row)
    return TableSpec(title="Appendix E: three-class sentiment by review length",
                     columns=["Model", "Variety", "Class", "n", "Acc %", "MSE", "n", "Acc %", "MSE"],
                     groups=[("", 3), ("1–50 characters", 3), ("51–500 characters", 3)], rows=rows,
                     caption="Valid answers only (answers outside the three labels are left out, as in the paper); "
                             "MSE with the classes coded 0, 1, 2.",
                     source="review_sentiment_pilot")


def agreement_table(agreement: pd.DataFrame) -> TableSpec:
    """All raters pooled: Likert means, the native-like share, and the predicted scores against the stars and the
    models."""
    rows = []
    for row in agreement[agreement["rater"] == "all"].to_dict("records"):
        against = "–" if pd.isna(row["against"]) else row["against"] if pd.isna(row["format"]) \
            else f"{row['against']} ({row['format']})"
        rows.append([Cell(row["question"]), Cell(row["variety"]), Cell(against),
                     Cell(str(int(row["n"])), sort=int(row["n"])),
                     Cell(fixed(row["mean"], 2) if pd.notna(row["mean"]) else "–"),
                     Cell(fixed(row["sd"], 2) if pd.notna(row["sd"]) else "–"),
                     Cell(fixed(row["share"], 1) if pd.notna(row["share"]) else "–"),
                     Cell(fixed(row["accuracy"], 1) if pd.notna(row["accuracy"]) else "–"),
                     Cell(fixed(row["mse"], 3) if pd.notna(row["mse"]) else "–"),
                     Cell(fixed(row["weighted_kappa"], 3) if pd.notna(row["weighted_kappa"]) else "–")])
    raters = sorted(set(agreement["rater"]) - {"all"})
    return TableSpec(title="Human ratings (Appendix B) against the stars and the models",
                     columns=["Question", "Variety", "Against", "n", "Mean", "SD", "Native-like %", "Acc %", "MSE",
                              "Weighted κ"], rows=rows,
                     caption=f"All raters pooled ({', '.join(raters)}); per rater in review_human_agreement. κ: "
                             "Cohen's, quadratic weights over the scores 1–10.",
                     source="review_human_agreement (sctc reviews import-ratings)")


def add_to(section: Section, inputs: ReportInputs, metrics: pd.DataFrame, pair: VarietyPair) -> None:
    """Figures 3–4, the per-pair scatter, the pilot and the human ratings, each where its table has rows."""
    lengths = metrics[metrics["subset"].isin(("short", "long"))]
    if not lengths.empty:
        for number, measure, name in ((3, "acc", "accuracy"), (4, "mse", "MSE")):
            section.add(FigureSpec(
                name=f"reviews_length_{measure}", title=f"Figure {number}: {name}, {pair.second.short_name} "
                                                        f"against {pair.first.short_name}, short and long pairs",
                caption=f"One point per model × format; above the diagonal the {pair.first.code} reviews "
                        + ("score better." if measure == "acc" else "have the larger error."),
                draw=partial(length_scatter, lengths, measure, pair), source="review_metrics, analysis length"))
    pairs = inputs.table("review_prediction_pairs")
    if not pairs.empty:
        pairs_pair = pair_of_columns(pairs.columns, "review_id")
        if (pairs["both_valid"].astype(bool) & (pairs["format"] == SCATTER_FORMAT)).any():
            section.add(FigureSpec(
                name="reviews_pair_scatter", title="Both predictions of every pair (structured format)",
                caption=f"x: the prediction for the {pairs_pair.second.code} review, y: for the "
                        f"{pairs_pair.first.code} review of the same pair; a disc's area counts pairs.",
                draw=partial(pair_scatter, pairs, pairs_pair), source="review_prediction_pairs"))
    pilot = inputs.table("review_sentiment_pilot")
    if not pilot.empty:
        section.add(pilot_table(pilot), FigureSpec(
            name="reviews_sentiment_pilot", title="Figure 2: three-class sentiment by review length (Appendix E)",
            caption="Accuracy and MSE per 10-character bin for each class and overall; one line style per variety.",
            draw=partial(pilot_figure, pilot), source="review_sentiment_pilot"))
    agreement = inputs.table("review_human_agreement")
    if not agreement.empty:
        section.add(agreement_table(agreement))
