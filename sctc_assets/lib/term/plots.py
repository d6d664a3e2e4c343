"""Figure 2-style charts: stacked correct / misaligned / incorrect bars, S and T side by side per model."""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib.varieties import SIMPLIFIED, TRADITIONAL

COLORS = {"pct_correct": "#7cb9e8", "pct_misaligned": "#f5e050", "pct_incorrect": "#e8857c"}
LEGEND = {"pct_correct": "Correct", "pct_misaligned": "Misaligned", "pct_incorrect": "Incorrect"}


def choice_rates_figure(rates: pd.DataFrame, *, prompt_variant: int = 1, subset: str = "all"):
    """One panel per label source; None when there is nothing to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    selected = rates[(rates["prompt_variant"] == prompt_variant) & (rates["subset"] == subset)]
    sources = sorted(selected["label_source"].unique())
    if not sources:
        return None
    width = max(6.0, 0.9 * selected["model"].nunique() + 2)
    figure, axes = plt.subplots(len(sources), 1, figsize=(width, 3.2 * len(sources)), squeeze=False)
    for axis, source in zip(axes[:, 0], sources):
        frame = selected[selected["label_source"] == source]
        models = sorted(frame["model"].unique())
        for position, model in enumerate(models):
            for offset, row_variety in ((-0.2, SIMPLIFIED), (0.2, TRADITIONAL)):
                lang, tick = row_variety.code, row_variety.tag
                row = frame[(frame["model"] == model) & (frame["lang"] == lang)]
                if row.empty:
                    continue
                bottom = 0.0
                for column, color in COLORS.items():
                    value = float(row[column].iloc[0])
                    axis.bar(position + offset, value, 0.38, bottom=bottom, color=color, edgecolor="black",
                             linewidth=0.4, label=LEGEND[column] if position == 0 and lang == SIMPLIFIED.code else None)
                    bottom += value
                axis.text(position + offset, -4, tick, ha="center", va="top", fontsize=7)
        axis.set_xticks(range(len(models)))
        axis.set_xticklabels(models, rotation=30, ha="right", fontsize=8)
        axis.tick_params(axis="x", pad=12)
        axis.set_ylim(0, 100)
        axis.set_ylabel("% responses")
        axis.set_title(f"label source: {source} (prompt variant {prompt_variant}, {subset})", fontsize=9)
    axes[0, 0].legend(loc="upper center", bbox_to_anchor=(0.5, 1.35), ncol=3, frameon=False, fontsize=8)
    figure.tight_layout()
    return figure
