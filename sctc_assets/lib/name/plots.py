"""Figure 3-style charts: valid-answer rate against Mainland name rate, one panel per prompting language."""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib.varieties import VARIETIES

LANG_TITLES = {row.code: row.display_name for row in VARIETIES}


def selection_rates_figure(rates: pd.DataFrame, *, experiment: str, extraction_source: str):
    """None when the rates hold nothing for that experiment and source."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = rates[(rates["experiment"] == experiment) & (rates["extraction_source"] == extraction_source)]
    if chosen.empty:
        return None
    figure, axes = plt.subplots(1, len(LANG_TITLES), figsize=(13, 4.5), squeeze=False)
    for axis, (lang, title) in zip(axes[0], LANG_TITLES.items()):
        frame = chosen[chosen["lang"] == lang]
        axis.axhline(0.5, color="black", linestyle="--", linewidth=1)
        axis.scatter(frame["valid_rate"], frame["mainland_rate"], color="white", edgecolor="black")
        for record in frame.itertuples():
            axis.annotate(record.model, (record.valid_rate, record.mainland_rate), fontsize=7,
                          xytext=(3, 3), textcoords="offset points")
        axis.set_xlim(-0.05, 1.05)
        axis.set_ylim(-0.05, 1.05)
        axis.set_xlabel("Rate of valid responses")
        axis.set_ylabel("Mainland Chinese name rate")
        axis.set_title(f"Prompted in {title}", fontsize=9)
        axis.grid(linestyle="--", linewidth=0.5, color="gray")
    figure.suptitle(f"{experiment} ({extraction_source} extraction)", fontsize=10)
    figure.tight_layout()
    return figure
