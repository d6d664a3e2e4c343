"""Regional term choice over one item set and its prompting varieties (any regions): the report part made for each
item set by `for_item_set`, from `<prefix>_rates`, `<prefix>_matrix`, `<prefix>_contrasts` and `<prefix>_power`
(`lib/term/variety_metrics`).

The section shows per model and variety the correct (aligned), misaligned and incorrect shares with Wilson
intervals; per model a heatmap of the prompted variety × the region whose form the answer gave; every pair of
varieties compared with the concept as the unit (BH-adjusted marks); what those comparisons can detect; and, when a
model drafted some definitions, the shares of the source-written and the model-written concepts apart. The tables
hold one row set per label source (`label_source`): the section shows the `rules` labels (`LABEL_SOURCE`), and says
when judge labels exist too.
"""

from __future__ import annotations

import re
import types
from functools import partial
from typing import Any, Sequence

import pandas as pd

from sctc_assets.lib.report import models as model_order
from sctc_assets.lib.report.document import Cell, FigureSpec, Missing, Section, TableSpec
from sctc_assets.lib.report.formatting import fixed, new_figure, not_run, value_cell
from sctc_assets.lib.report.inputs import ReportInputs
from sctc_assets.lib.report.intervals import Interval

HEADLINE_VARIANT = 1
LABEL_SOURCE = "rules"  # the label source the section shows; the tables keep every source's rows apart
ALL, SOURCE, MODEL = "all", "source", "model"  # the `definitions` values of `<prefix>_rates`
MISALIGNED_PREFIX = "misaligned:"
NONE = "none"
LABELS = ("correct", "misaligned", "incorrect")
MARKS = "marks: BH-adjusted across every pair and model of the prompt variant and measure (*** p < .001, ** < .01, " \
        "* < .05, NS)"


def how(set_name: str, varieties: Sequence[str]) -> str:
    return f"sctc run --benchmarks term --term-items {set_name} --varieties {' '.join(varieties)}"


def headline_columns(set_name: str, varieties: Sequence[str]) -> list[str]:
    return [f"Terms {set_name}: aligned % ({code})" for code in varieties]


def of_source(frame: pd.DataFrame, source: str = LABEL_SOURCE) -> pd.DataFrame:
    """The rows of one label source (tables written before the column existed hold `rules` rows only)."""
    if "label_source" not in frame.columns:
        return frame if source == LABEL_SOURCE else frame.iloc[0:0]
    return frame[frame["label_source"].fillna(LABEL_SOURCE) == source]


def _interval(row: dict[str, Any], table: str) -> Interval | None:
    interval = Interval(float(row["ci_low"]), float(row["ci_high"]), f"Wilson ({table})")
    return interval if interval.finite else None


def _rate(rates: pd.DataFrame, model: str, variety: str, variant: int, definitions: str,
          measure: str) -> dict[str, Any] | None:
    found = rates[(rates["model"] == model) & (rates["variety"] == variety) & (rates["prompt_variant"] == variant)
                  & (rates["definitions"] == definitions) & (rates["measure"] == measure)]
    return found.iloc[0].to_dict() if not found.empty else None


def _rate_cell(row: dict[str, Any] | None, table: str, note: str = "") -> Cell:
    if row is None:
        return not_run("–")
    return value_cell(row["pct"], _interval(row, table), note=f"{note}{'; ' if note else ''}{int(row['k'])} of "
                                                               f"{int(row['n'])} answers")


def headline(inputs: ReportInputs, model: str, *, prefix: str, set_name: str, varieties: Sequence[str]) -> list[Cell]:
    """Scorecard cells: the aligned (correct) share per variety, prompt variant 1, all concepts."""
    rates = of_source(inputs.table(f"{prefix}_rates"))
    if rates.empty or model not in set(rates["model"]):
        return [not_run() for _ in varieties]
    note = f"item set {set_name}, prompt variant {HEADLINE_VARIANT}, all concepts; aligned = the prompted region's form"
    cells = []
    for code in varieties:
        row = _rate(rates, model, code, HEADLINE_VARIANT, ALL, "correct")
        cells.append(not_run() if row is None else _rate_cell(row, f"{prefix}_rates", note))
    return cells


def _variety_order(frame: pd.DataFrame, varieties: Sequence[str]) -> list[str]:
    present = list(dict.fromkeys(frame["variety"].tolist()))
    return [code for code in varieties if code in present] + [code for code in present if code not in varieties]


def _misaligned_to(rates: pd.DataFrame, model: str, variety: str, variant: int, definitions: str) -> str:
    """`tw 75.0 · hk 25.0`: the other regions the misaligned answers gave, largest first (shares of all answers)."""
    found = rates[(rates["model"] == model) & (rates["variety"] == variety) & (rates["prompt_variant"] == variant)
                  & (rates["definitions"] == definitions) & rates["measure"].str.startswith(MISALIGNED_PREFIX)
                  & (rates["k"] > 0)].sort_values("pct", ascending=False, kind="stable")
    return " · ".join(f"{measure.removeprefix(MISALIGNED_PREFIX)} {fixed(pct)}"
                      for measure, pct in zip(found["measure"], found["pct"])) or "–"


def rates_table(rates: pd.DataFrame, prefix: str, set_name: str, varieties: Sequence[str]) -> TableSpec:
    table = f"{prefix}_rates"
    chosen = rates[rates["definitions"] == ALL]
    rows = []
    for model in model_order.ordered(chosen["model"].unique()):
        by_model = chosen[chosen["model"] == model]
        for variant in sorted(int(value) for value in by_model["prompt_variant"].unique()):
            for variety in _variety_order(by_model[by_model["prompt_variant"] == variant], varieties):
                correct = _rate(chosen, model, variety, variant, ALL, "correct")
                rows.append([Cell(model), Cell(str(variant), sort=variant), Cell(variety),
                             Cell(str(correct["region"]) if correct else "–"),
                             Cell(str(int(correct["n"])) if correct else "–",
                                  sort=int(correct["n"]) if correct else None),
                             *(_rate_cell(_rate(chosen, model, variety, variant, ALL, label), table)
                               for label in LABELS),
                             Cell(_misaligned_to(chosen, model, variety, variant, ALL))])
    return TableSpec(
        title=f"Item set {set_name}: correct, misaligned and incorrect answers per prompting variety",
        columns=["model", "prompt variant", "variety", "region", "answers", "correct (aligned) %", "misaligned %",
                 "incorrect %", "misaligned to (% of answers)"],
        rows=rows, sortable=True, table_id=f"{prefix}-rates",
        caption="Correct: the prompted region's form; misaligned: another region's form; incorrect: neither "
                "(refusals included). Percentages with Wilson 95 % intervals. Misaligned to: the other regions "
                "whose forms the misaligned answers gave (an answer with several regions' forms counts for each).",
        source=f"{table}, all concepts")


def definitions_table(rates: pd.DataFrame, prefix: str, set_name: str,
                      varieties: Sequence[str]) -> TableSpec | None:
    """Source-written vs model-written definitions (the paper's Figure 5 leaves its GPT-written ones out)."""
    if not {SOURCE, MODEL} & set(rates["definitions"]):
        return None
    table = f"{prefix}_rates"
    rows = []
    for model in model_order.ordered(rates["model"].unique()):
        by_model = rates[rates["model"] == model]
        for variant in sorted(int(value) for value in by_model["prompt_variant"].unique()):
            for variety in _variety_order(by_model[by_model["prompt_variant"] == variant], varieties):
                row = [Cell(model), Cell(str(variant), sort=variant), Cell(variety)]
                for measure in ("correct", "misaligned"):
                    for definitions in (SOURCE, MODEL):
                        found = _rate(rates, model, variety, variant, definitions, measure)
                        row.append(_rate_cell(found, table))
                rows.append(row)
    return TableSpec(
        title=f"Item set {set_name}: concepts with source-written and with model-written definitions",
        columns=["model", "prompt variant", "variety", "source-written", "model-written", "source-written",
                 "model-written"],
        groups=[("", 3), ("% correct", 2), ("% misaligned", 2)], rows=rows, sortable=True,
        table_id=f"{prefix}-definitions",
        caption="Model-written: definitions a model drafted (`definition_source` model:<key>), kept apart as the "
                "paper's Figure 5 does with its 22 GPT-written definitions. Wilson 95 % intervals; – where the "
                "variety asks no such concept.",
        source=f"{table}, definitions source / model")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "model"


def heatmap_figure(matrix: pd.DataFrame, varieties: Sequence[str], title: str):
    """Prompted variety (rows) × answered region (columns, `none` last): the share of answers holding a form of
    that region, one panel per prompt variant, each cell labelled with its percentage over its count (`14%` over
    `1/7`: a percentage of a handful of answers says little without it); the prompted region's cell framed."""
    from matplotlib.patches import Rectangle

    variants = sorted(int(value) for value in matrix["prompt_variant"].unique())
    rows = _variety_order(matrix, varieties)
    columns = list(dict.fromkeys(matrix["answered_region"].tolist()))
    columns = [code for code in columns if code != NONE] + ([NONE] if NONE in columns else [])
    panel_width = 0.7 * len(columns) + 0.4
    width = max(5.0, panel_width * len(variants) + 1.6)
    height = 0.5 * len(rows) + 1.6
    figure, axes = new_figure(width, height, margins=(1.0, 0.9, 0.6, 0.55), wspace=0.15, nrows=1,
                              ncols=len(variants), squeeze=False)
    image = None
    for axis, variant in zip(axes[0], variants):
        block = matrix[matrix["prompt_variant"] == variant]
        grid, counts, answers = (block.pivot_table(index="variety", columns="answered_region", values=column,
                                                   aggfunc="first").reindex(index=rows, columns=columns)
                                 for column in ("pct", "k", "n_answers"))
        region_of = block.groupby("variety")["region"].first()
        image = axis.imshow(grid.to_numpy(dtype=float), cmap="Blues", vmin=0, vmax=100, aspect="auto")
        for i, variety in enumerate(rows):
            for j, region in enumerate(columns):
                value = grid.iat[i, j]
                text = "–" if pd.isna(value) else f"{value:.0f}%\n{int(counts.iat[i, j])}/{int(answers.iat[i, j])}"
                axis.text(j, i, text, ha="center", va="center", fontsize=7, linespacing=1.1,
                          color="white" if not pd.isna(value) and value > 60 else "black")
                if region_of.get(variety) == region:
                    axis.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="#d62728",
                                             linewidth=1.6))
        axis.set_xticks(range(len(columns)), columns, fontsize=8)
        axis.set_yticks(range(len(rows)), rows if axis is axes[0][0] else [""] * len(rows), fontsize=8)
        axis.set_xlabel("region of the form in the answer", fontsize=8)
        axis.set_title(f"prompt variant {variant}", fontsize=9)
    if image is not None:
        bar = figure.colorbar(image, ax=list(axes[0]), fraction=0.04, pad=0.02)
        bar.set_label("% of answers", fontsize=8)
        bar.ax.tick_params(labelsize=7)
    figure.suptitle(title, fontsize=9)
    return figure


def contrasts_table(contrasts: pd.DataFrame, prefix: str, set_name: str) -> TableSpec:
    rows = []
    ordered = model_order.ordered(contrasts["model"].unique())
    rank = {model: index for index, model in enumerate(ordered)}
    frame = contrasts.assign(_rank=contrasts["model"].map(rank)).sort_values(
        ["prompt_variant", "measure", "_rank"], kind="stable")
    for row in frame.to_dict("records"):
        interval = Interval(float(row["ci_low"]), float(row["ci_high"]), str(row["ci_method"]))
        rows.append([
            Cell(str(row["model"])), Cell(str(int(row["prompt_variant"])), sort=int(row["prompt_variant"])),
            Cell(str(row["measure"])), Cell(f"{row['variety_a']} − {row['variety_b']}"),
            Cell(str(int(row["n_concepts"])), sort=int(row["n_concepts"])),
            value_cell(row["pct_a"]), value_cell(row["pct_b"]),
            value_cell(row["diff_pct_points"], interval if interval.finite else None, signed=True,
                       mark=str(row.get("sig_paired_t_bh") or ""), note="mark: paired t over concepts, BH"),
            value_cell(row["paired_t_p_bh"], digits=3), value_cell(row["wilcoxon_p_bh"], digits=3,
                                                                  mark=str(row.get("sig_wilcoxon_bh") or "")),
        ])
    return TableSpec(
        title=f"Item set {set_name}: pairs of varieties, the concept as the unit",
        columns=["model", "prompt variant", "measure", "A − B", "concepts", "A %", "B %", "A − B (pp)",
                 "paired t p (BH)", "Wilcoxon p (BH)"],
        rows=rows, sortable=True, table_id=f"{prefix}-contrasts",
        caption="Per concept asked in both varieties, its share of correct (or misaligned) answers; A % and B %: "
                "the mean over those concepts; A − B with its 95 % paired-t interval over the concepts; paired t "
                f"and Wilcoxon signed-rank tests over the concepts, {MARKS}.",
        source=f"{prefix}_contrasts")


def power_table(power: pd.DataFrame, prefix: str, set_name: str) -> TableSpec:
    rows = []
    rank = {model: index for index, model in enumerate(model_order.ordered(power["model"].unique()))}
    frame = power.assign(_rank=power["model"].map(rank)).sort_values(["prompt_variant", "measure", "_rank"],
                                                                      kind="stable")
    for row in frame.to_dict("records"):
        rows.append([
            Cell(str(row["model"])), Cell(str(int(row["prompt_variant"])), sort=int(row["prompt_variant"])),
            Cell(str(row["measure"])), Cell(f"{row['variety_a']} − {row['variety_b']}"),
            Cell(str(int(row["n_concepts"])), sort=int(row["n_concepts"])), value_cell(row["sd_concept_diff"]),
            value_cell(row["mde_pct_points"]), value_cell(row["concepts_needed_5pp"], digits=0),
            value_cell(row["concepts_needed_10pp"], digits=0), Cell(str(row.get("note") or "")),
        ])
    return TableSpec(
        title=f"Item set {set_name}: what the pairwise comparisons can detect",
        columns=["model", "prompt variant", "measure", "A − B", "concepts", "SD of differences (pp)",
                 "detectable (pp)", "concepts for 5 pp", "concepts for 10 pp", "note"],
        rows=rows, sortable=True, table_id=f"{prefix}-power",
        caption="Paired t over concepts at 80 % power, α = .05 two-sided, with the SD of the per-concept "
                "differences this run observed: the smallest A − B difference it detects, and the concepts a 5 "
                "and a 10 percentage-point difference would need.",
        source=f"{prefix}_power")


def section(inputs: ReportInputs, *, prefix: str, set_name: str, varieties: Sequence[str]) -> Section:
    command = how(set_name, varieties)
    result = Section(prefix, f"Regional term choice: item set {set_name}",
                     "SC-TC-Bench Task 1 (Lyu et al., FAccT 2025) over any regions: each concept asked in every "
                     f"prompting variety ({', '.join(varieties)}) whose region has a form for it")
    every_source = inputs.table(f"{prefix}_rates")
    rates = of_source(every_source)
    if rates.empty:
        result.missing.append(Missing(f"{prefix}_rates has no rows for the chosen models", command))
        return result
    present = model_order.ordered(rates["model"].unique())
    result.data_note = inputs.kinds_note(present)
    others = sorted(set(every_source["label_source"].dropna()) - {LABEL_SOURCE}) \
        if "label_source" in every_source.columns else []
    if others:
        result.notes.append(f"Labels by `{LABEL_SOURCE}` (the forms found in the answer); the tables also hold "
                            f"labels by {', '.join(f'`{source}`' for source in others)} (label_source column).")
    result.add(rates_table(rates, prefix, set_name, varieties))
    matrix = of_source(inputs.table(f"{prefix}_matrix"))
    if matrix.empty:
        result.missing.append(Missing(f"{prefix}_matrix has no rows: the variety × region heatmaps are left out",
                                      command))
    else:
        names: set[str] = set()
        for model in model_order.ordered(matrix["model"].unique()):
            name = f"{prefix}_matrix_{_slug(model)}"
            while name in names:
                name += "_"
            names.add(name)
            result.add(FigureSpec(
                name=name, title=f"{model}: prompted variety × region of the form in the answer ({set_name})",
                caption="Share of the answers to each prompting variety (rows) holding a form of each region "
                        "(columns; a form several regions share counts for each), over its count: answers with "
                        "such a form / the variety's answers; none: no region's form, refusals included. Framed: "
                        "the prompted region.",
                draw=partial(heatmap_figure, matrix[matrix["model"] == model], tuple(varieties),
                             f"{model} — item set {set_name}"),
                source=f"{prefix}_matrix; " + inputs.kinds_note([model])))
    contrasts = of_source(inputs.table(f"{prefix}_contrasts"))
    if contrasts.empty:
        result.missing.append(Missing(f"{prefix}_contrasts has no rows (fewer than two varieties, or not "
                                      "materialized): the pairwise comparisons are left out", command))
    else:
        result.add(contrasts_table(contrasts, prefix, set_name))
    power = of_source(inputs.table(f"{prefix}_power"))
    if not power.empty:
        result.add(power_table(power, prefix, set_name))
    definitions = definitions_table(rates, prefix, set_name, varieties)
    if definitions is not None:
        result.notes.append("Some definitions were drafted by a model: the concepts with source-written and with "
                            "model-written definitions are also shown apart.")
        result.add(definitions)
    return result


def for_item_set(prefix: str, set_name: str, varieties: Sequence[str]) -> types.SimpleNamespace:
    """The report part of one item set, as `ReportInputs.sections` expects a module: `section(inputs)`,
    `HEADLINE_COLUMNS` (the aligned % per variety), `headline(inputs, model)` and `HOW`."""
    varieties = tuple(varieties)
    return types.SimpleNamespace(
        section=partial(section, prefix=prefix, set_name=set_name, varieties=varieties),
        HEADLINE_COLUMNS=headline_columns(set_name, varieties),
        headline=partial(headline, prefix=prefix, set_name=set_name, varieties=varieties),
        HOW=how(set_name, varieties), prefix=prefix, set_name=set_name, varieties=varieties)
