"""A chart of each model's score per prompting language (the paper's Table 3 as bars, plus Simplified Chinese)."""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib.sovereignty.pairs import baseline, language_scores
from sctc_assets.lib.sovereignty.prompts import LANGS
from sctc_assets.lib.sovereignty.upstream import MAIN_PROMPT_SET
from sctc_assets.lib.varieties import variety

COLORS = {lang: variety(lang).colour for lang in LANGS}


def scores_figure(summary: pd.DataFrame, *, rule: str = "paper"):
    """Bars per model and language for one scoring rule on the stage-1 prompts (baseline condition); None when
    there is nothing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores = language_scores(baseline(summary))
    scores = scores[(scores["scoring_rule"] == rule) & (scores["prompt_set"] == MAIN_PROMPT_SET)]
    if scores.empty:
        return None
    models = sorted(scores["model"].unique())
    figure, axis = plt.subplots(figsize=(max(6.0, 1.1 * len(models) + 2), 3.6))
    width = 0.8 / len(LANGS)
    for index, lang in enumerate(LANGS):
        values = scores[scores["lang"] == lang].set_index("model")["score"].reindex(models)
        positions = [position + (index - 1) * width for position in range(len(models))]
        axis.bar(positions, values.fillna(0), width, color=COLORS[lang], edgecolor="black", linewidth=0.4, label=lang)
    axis.set_xticks(range(len(models)))
    axis.set_xticklabels(models, rotation=30, ha="right", fontsize=8)
    axis.set_ylim(0, 1.05)
    axis.set_ylabel(f"Score ({rule} rule)")
    axis.legend(fontsize=8, ncols=len(LANGS), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    figure.tight_layout()
    return figure
