"""The bias-factor coefficient figures (#41 point 5): one per benchmark, from `term_bias_factors` and
`name_bias_factors`, each factor's GEE coefficient (log-odds per SD across units) with its 95 % interval, per model
and prompting language. `add_factor_figure` is the one call a benchmark's report part makes."""

from __future__ import annotations

from functools import partial

import pandas as pd

from sctc_assets.lib.report import models as model_order
from sctc_assets.lib.report.document import FigureSpec, Missing, Section
from sctc_assets.lib.report.formatting import keep_text_inside, new_figure
from sctc_assets.lib.report.inputs import ReportInputs

FACTOR_STYLE = {"corpus": ("#1f77b4", "o"), "tokens": ("#ff7f0e", "s"), "logprob": ("#2ca02c", "D")}
LANG_ORDER = ("zh_hans", "zh_hant", "en")
# Per benchmark: the table, the outcome drawn, the columns that pick one block per model (first value present in
# the preference order), and how to make the table.
SETTINGS = {
    "term": ("term_bias_factors", "correct", {"label_source": ("upstream", "judge", "lexicon", "rules")},
             "sctc run --benchmarks term (term_bias_factors)"),
    "name": ("name_bias_factors", "mainland", {"experiment": ("main", "same_name_script", "popularity"),
                                               "extraction_source": ("published", "judge", "rules")},
             "sctc run --benchmarks name (name_bias_factors)"),
}


def _preferred(frame: pd.DataFrame, column: str, preference: tuple[str, ...]) -> pd.DataFrame:
    present = list(dict.fromkeys(frame[column]))
    chosen = next((value for value in preference if value in present), present[0] if present else None)
    return frame[frame[column] == chosen]


def figure_rows(table: pd.DataFrame, benchmark: str) -> pd.DataFrame:
    """The rows the figure draws: the benchmark's outcome, one block per model (its preferred label source;
    names: experiment and extraction source), estimable coefficients only."""
    _, outcome, picks, _ = SETTINGS[benchmark]
    if table.empty:
        return table
    frame = table[table["outcome"] == outcome]
    blocks = []
    for _, block in frame.groupby("model", sort=False):
        for column, preference in picks.items():
            block = _preferred(block, column, preference)
        blocks.append(block)
    chosen = pd.concat(blocks, ignore_index=True) if blocks else frame.iloc[:0]
    return chosen[chosen["coef"].notna() & chosen["ci_low"].notna() & chosen["ci_high"].notna()]


def coefficient_figure(frame: pd.DataFrame, title: str):
    """Per model (rows, the paper's order) and prompting language (offset within the row): each factor's
    coefficient as a marker with its 95 % interval as a bar; 0 marked."""
    models = model_order.ordered(frame["model"].unique())
    langs = [lang for lang in LANG_ORDER if lang in set(frame["lang"])] + \
        sorted(set(frame["lang"]) - set(LANG_ORDER))
    factors = [name for name in FACTOR_STYLE if name in set(frame["factor"])]
    slots = len(langs) * max(1, len(factors))
    height = max(2.6, 0.12 * slots * len(models) + 1.4)
    figure, axis = new_figure(8.0, height, margins=(1.8, 0.8, 0.6, 0.55))
    step = 0.8 / max(1, slots)
    ticks, labels, labelled = [], [], set()
    for row, model in enumerate(models):
        for li, lang in enumerate(langs):
            for fi, factor in enumerate(factors):
                hit = frame[(frame["model"] == model) & (frame["lang"] == lang) & (frame["factor"] == factor)]
                if hit.empty:
                    continue
                y = row - 0.4 + step * (li * len(factors) + fi + 0.5)
                coef, low, high = (float(hit.iloc[0][name]) for name in ("coef", "ci_low", "ci_high"))
                color, marker = FACTOR_STYLE[factor]
                axis.errorbar([coef], [y], xerr=[[coef - low], [high - coef]], fmt=marker, color=color,
                              markersize=3.5, elinewidth=1, capsize=1.5,
                              label=None if factor in labelled else factor)
                labelled.add(factor)
        ticks.append(row)
        labels.append(f"{model.removeprefix('paper-')} ({', '.join(langs)})")
    axis.axvline(0, color="black", linewidth=0.8, linestyle="--")
    axis.set_yticks(ticks, labels, fontsize=7)
    axis.set_ylim(len(models) - 0.5, -0.5)
    axis.set_xlabel("coefficient: change in log-odds per SD across units (95 % interval)", fontsize=8)
    axis.set_title(title, fontsize=9)
    # beside the axes, not over the intervals; every label kept inside the picture, however long
    axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    keep_text_inside(figure)
    return figure


def add_factor_figure(result: Section, inputs: ReportInputs, benchmark: str) -> None:
    """The benchmark's coefficient figure added to its report part, or what is missing and how to make it."""
    name, outcome, picks, how = SETTINGS[benchmark]
    table = inputs.table(name)
    if table.empty:
        result.missing.append(Missing(f"{name} has no rows for the chosen models", how))
        return
    frame = figure_rows(table, benchmark)
    if frame.empty:
        # the stage ran: its fits had nothing to estimate (an outcome that never varies, a factor that does not
        # vary across units, too few units); a note, since no command makes them
        result.notes.append(f"No {benchmark} bias-factor figure: {name} has no estimable coefficients for the chosen "
                            "models (outcomes or factors without variation, or too few units); its rows say why.")
        return
    chosen = "; ".join(f"{model}: " + ", ".join(f"{column} {block[column].iloc[0]}" for column in picks)
                       for model, block in frame.groupby("model", sort=False))
    result.add(FigureSpec(
        name=f"{benchmark}_bias_factors",
        title=f"What the {benchmark} choices are related to: {name} coefficients (outcome `{outcome}`)",
        caption="Logistic GEE clustered by " + ("term" if benchmark == "term" else "candidate list") + ", factors "
                "z-scored across units (Mainland vs Taiwanese: corpus frequency, token count, log-probability); "
                "within each model's row the prompting languages top to bottom in the order of its label. A factor "
                "a model lacks (no tokenizer, no log-probabilities) is absent: see the table's factors_left_out.",
        draw=partial(coefficient_figure, frame, f"{name}: coefficient per SD with 95 % interval"),
        source=f"{name}; outcome {outcome}; {chosen}"))
