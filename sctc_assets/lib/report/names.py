"""SC-TC-Bench regional name choice: Figures 3, 4, 6, 9, 10 and 11 and the Mainland share per language, from
`name_choice_tests` (else `name_choice_rates`), `name_permutation_stability` and `regional_names`; Table 23 from
`name_pair_selection_rates` when a run named two candidates (`--name-pair`); Tables 31–33 (descriptive words in the
names' explanations) from `name_explanation_words` and `name_talent_examples` (the authors' published extractions)
beside `name_descriptor_words` / `name_descriptor_names` (a live extractor's, `--name-judge`); the drift between two
epochs from `name_drift` (`--name-drift`)."""

from __future__ import annotations

from functools import partial
import math
from typing import Any

import numpy as np
import pandas as pd

from sctc_assets.lib.report import models as model_order
from sctc_assets.lib.report.bias_factors import add_factor_figure
from sctc_assets.lib.report.document import Cell, FigureSpec, Missing, Section, TableSpec
from sctc_assets.lib.report.drift import rate_drift_tables
from sctc_assets.lib.report.formatting import fixed, new_figure, not_run, value_cell
from sctc_assets.lib.report.inputs import ReportInputs
from sctc_assets.lib.report.intervals import Interval, wilson
from sctc_assets.lib.varieties import SIMPLIFIED, VARIETIES

LANGS = {row.code: row.display_name for row in VARIETIES}
LANG_TAGS = {row.code: row.tag for row in VARIETIES}
SOURCE_PREFERENCE = ("upstream", "judge", "rules")
SOURCE_NOTES = {
    "upstream": "the authors' published extraction (GPT-4o-mini), replay models",
    "rules": "this platform's deterministic extractor",
    "judge": "an LLM extractor asked as the authors' gpt_eval.py",
}
# Full design per experiment (lists × shuffles), for spotting reduced runs.
FULL_DESIGN = {"main": 18000, "popularity": 18000, "same_name_script": 8000, "gender_balanced": 180}
HOW = "sctc run --benchmarks name (the 11 paper models by default; --models KEY for yours)"
MARKERS = "osD^vP*Xhp<>8"
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39")
PAPER_PERMUTATION_MARK = 180
LEGEND_COLUMNS = 7


def _rates(inputs: ReportInputs) -> tuple[pd.DataFrame, str]:
    tests = inputs.table("name_choice_tests")
    if not tests.empty:
        return tests, "name_choice_tests"
    return inputs.table("name_choice_rates"), "name_choice_rates"


def headline_source(rates: pd.DataFrame, model: str, experiment: str = "main") -> str | None:
    present = set(rates.loc[(rates["model"] == model) & (rates["experiment"] == experiment), "extraction_source"])
    return next((source for source in SOURCE_PREFERENCE if source in present), None)


def _style(models: list[str]) -> dict[str, tuple[str, str]]:
    return {model: (MARKERS[index % len(MARKERS)], COLORS[index % len(COLORS)]) for index, model in enumerate(models)}


def _points(frame: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float]]:
    """(model, lang) → (valid rate, Mainland rate); a cell without a valid answer has no Mainland rate."""
    points = {}
    for record in frame.to_dict("records"):
        mainland = record["mainland_rate"] if record["n_valid"] else math.nan
        points[(record["model"], record["lang"])] = (float(record["valid_rate"]), float(mainland))
    return points


def scatter_figure(frame: pd.DataFrame, title: str, *, baseline: pd.DataFrame | None = None):
    """Figure 3's layout (one panel per prompting language, valid rate against Mainland rate, the 50 % line);
    with `baseline`, Figure 4/11's arrows from each model's baseline point: red solid up, blue dashed down."""
    models = model_order.ordered(frame["model"].unique())
    style = _style(models)
    points = _points(frame)
    origins = _points(baseline) if baseline is not None else {}
    legend_rows = -(-(len(models) + (2 if baseline is not None else 0)) // LEGEND_COLUMNS)
    figure, axes = new_figure(13.0, 4.4 + 0.22 * legend_rows, margins=(0.6, 0.15, 0.6, 0.62 + 0.22 * legend_rows),
                              nrows=1, ncols=len(LANGS), squeeze=False)
    for axis, (lang, language) in zip(axes[0], LANGS.items()):
        axis.axhline(0.5, color="black", linestyle=(0, (2, 2)), linewidth=1.6)
        for model in models:
            if (model, lang) not in points:
                continue
            x, y = points[(model, lang)]
            marker, color = style[model]
            if baseline is not None and (model, lang) in origins and not math.isnan(y):
                x0, y0 = origins[(model, lang)]
                if not math.isnan(y0) and (x0, y0) != (x, y):
                    up = y > y0
                    axis.annotate("", xy=(x, y), xytext=(x0, y0),
                                  arrowprops={"arrowstyle": "-|>", "color": "#d62728" if up else "#1f5fbf",
                                              "linestyle": "-" if up else "--", "linewidth": 1.1,
                                              "shrinkA": 0, "shrinkB": 4})
            if not math.isnan(y):
                axis.scatter([x], [y], marker=marker, color=color, edgecolor="black", linewidth=0.5, s=46,
                             zorder=3, label=model.removeprefix("paper-") if lang == SIMPLIFIED.code else None)
        axis.set_xlim(-0.03, 1.03)
        axis.set_ylim(-0.03, 1.03)
        axis.set_xlabel("Rate of Valid Responses")
        axis.set_ylabel("Mainland Chinese Name Rate")
        axis.set_title(f"Prompted in {language}", fontsize=10)
        axis.grid(linestyle="--", linewidth=0.4, color="#bbbbbb")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if baseline is not None:
        from matplotlib.lines import Line2D

        handles += [Line2D([], [], color="#d62728", linestyle="-"), Line2D([], [], color="#1f5fbf", linestyle="--")]
        labels += ["Mainland rate up from baseline", "Mainland rate down from baseline"]
    figure.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncols=min(len(labels), LEGEND_COLUMNS),
                  fontsize=8, frameon=False)
    figure.suptitle(title, fontsize=10)
    return figure


def permutation_figure(frame: pd.DataFrame, title: str, *, mark: int | None = PAPER_PERMUTATION_MARK,
                       xlabel: str = "Number of permutations"):
    """Figure 6: % Mainland names of all answers (invalid ones in the denominator) against the number of
    shuffles, one panel per prompting language, the paper's 180 at the dotted line."""
    models = model_order.ordered(frame["model"].unique())
    style = _style(models)
    legend_rows = -(-len(models) // LEGEND_COLUMNS)
    figure, axes = new_figure(13.0, 4.0 + 0.22 * legend_rows, margins=(0.6, 0.15, 0.6, 0.62 + 0.22 * legend_rows),
                              nrows=1, ncols=len(LANGS), squeeze=False)
    for axis, (lang, language) in zip(axes[0], LANGS.items()):
        for model in models:
            curve = frame[(frame["model"] == model) & (frame["lang"] == lang)].sort_values("shuffles")
            if curve.empty:
                continue
            marker, color = style[model]
            axis.plot(curve["shuffles"], curve["pct_mainland_of_all"], marker=marker if len(curve) <= 25 else None,
                      markersize=4, color=color, linewidth=1.2, label=model.removeprefix("paper-"))
        if mark is not None:
            axis.axvline(mark, color="black", linestyle=":", linewidth=1.5)
        axis.set_xlabel(xlabel)
        axis.set_ylabel("% Mainland Chinese Names")
        axis.set_title(f"Prompted in {language}", fontsize=10)
        axis.grid(linestyle="--", linewidth=0.4, color="#bbbbbb")
    handles, labels = [], []
    for axis in axes[0]:
        for handle, label in zip(*axis.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    figure.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncols=min(len(labels), LEGEND_COLUMNS),
                  fontsize=8, frameon=False)
    figure.suptitle(title, fontsize=10)
    return figure


def density_figure(names: pd.DataFrame):
    """Figure 9: densities (Gaussian KDE) of the number of people bearing each name, Mainland and Taiwan."""
    from scipy.stats import gaussian_kde

    figure, axes = new_figure(10.0, 3.6, margins=(0.7, 0.2, 0.55, 0.55), wspace=0.3, nrows=1, ncols=2, squeeze=False)
    for axis, (region, label, color) in zip(axes[0], (("mainland", "(a) Mainland Chinese names", "#d62728"),
                                                      ("taiwan", "(b) Taiwanese names", "#1f5fbf"))):
        counts = names.loc[names["region"] == region, "count"].astype(float).dropna().to_numpy()
        if len(counts) < 2 or np.ptp(counts) == 0:
            axis.text(0.5, 0.5, f"{len(counts)} name(s): no density", ha="center", transform=axis.transAxes)
        else:
            grid = np.linspace(max(0.0, counts.min() - 0.15 * np.ptp(counts)), counts.max() + 0.15 * np.ptp(counts),
                               400)
            density = gaussian_kde(counts)(grid)
            axis.plot(grid, density, color=color, linewidth=1.5)
            axis.fill_between(grid, density, color=color, alpha=0.2)
            axis.set_title(f"{label}: n = {len(counts)}, mean {counts.mean():,.0f} (SD {counts.std(ddof=1):,.0f})",
                           fontsize=9, pad=14)  # above the axis' ×1e−5 offset label
        axis.set_xlabel("Number of individuals bearing the name")
        axis.set_ylabel("Density")
        axis.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    return figure


def _data_line(frame: pd.DataFrame, experiment: str, inputs: ReportInputs,
               reduced: dict[tuple[str, str], int]) -> str:
    present = model_order.ordered(frame["model"].unique())
    cut = [model for model in present if (model, experiment) in reduced]
    return inputs.kinds_note(present) + (f"; reduced or truncated run: {', '.join(cut)}"
                                                              if cut else "")


def _share_interval(row: dict[str, Any]) -> Interval | None:
    if not row["n_valid"]:
        return None
    if "mainland_ci_low" in row and pd.notna(row["mainland_ci_low"]):
        return Interval(float(row["mainland_ci_low"]) * 100, float(row["mainland_ci_high"]) * 100,
                        "Wilson (name_choice_rates)")
    return wilson(int(row["n_mainland"]), int(row["n_valid"]), scale=100)


def share_cell(row: dict[str, Any] | None) -> Cell:
    """`Mainland 41.2 [39.8, 42.6] *** · valid 95 %` for one model, language and experiment."""
    if row is None:
        return not_run("no answers")
    mark = str(row.get("sig_two_sided_bh") or "")
    valid = f" · valid {fixed(float(row['valid_rate']) * 100, 0)} %"
    note = (f"extraction {row['extraction_source']}, experiment {row['experiment']}, n = {int(row['n'])}; "
            f"mark: z-test of the Mainland share against 50 % (null SE), two-sided, BH-adjusted across models × "
            f"languages")
    if not row["n_valid"]:
        return Cell("– (no valid answer)", sort=None, title=note, detail=valid.removeprefix(" · "))
    cell = value_cell(float(row["mainland_rate"]) * 100, _share_interval(row), mark=mark, note=note)
    cell.detail = (cell.detail + valid) if cell.detail else valid.removeprefix(" · ")
    return cell


HEADLINE_COLUMNS = [f"Names: Mainland % ({tag})" for tag in LANG_TAGS.values()]


def _row(rates: pd.DataFrame, model: str, lang: str, experiment: str, source: str | None) -> dict | None:
    found = rates[(rates["model"] == model) & (rates["lang"] == lang) & (rates["experiment"] == experiment)
                  & (rates["extraction_source"] == source)]
    return found.iloc[0].to_dict() if not found.empty else None


def headline(inputs: ReportInputs, model: str) -> list[Cell]:
    rates, _ = _rates(inputs)
    if rates.empty or model not in set(rates["model"]):
        return [not_run() for _ in HEADLINE_COLUMNS]
    source = headline_source(rates, model)
    if source is None:
        return [not_run("no main experiment") for _ in HEADLINE_COLUMNS]
    return [share_cell(_row(rates, model, lang, "main", source)) for lang in LANGS]


def _reduced(rates: pd.DataFrame) -> dict[tuple[str, str], int]:
    """(model, experiment) → answers per language, where well below the paper's design (reduced or truncated)."""
    found = {}
    for (model, experiment), frame in rates.groupby(["model", "experiment"]):
        full = FULL_DESIGN.get(str(experiment))
        most = int(frame["n"].max())
        if full and most < full * 0.9:
            found[(str(model), str(experiment))] = most
    return found


def _share_table(rates: pd.DataFrame, experiment: str, source: str, table_source: str) -> TableSpec | None:
    frame = rates[(rates["experiment"] == experiment) & (rates["extraction_source"] == source)]
    if frame.empty:
        return None
    rows = [[Cell(model)] + [share_cell(_row(frame, model, lang, experiment, source)) for lang in LANGS]
            for model in model_order.ordered(frame["model"].unique())]
    return TableSpec(
        title=f"Mainland Chinese name rate, {experiment} experiment ({source} extraction)",
        columns=["model"] + [f"prompted in {language}" for language in LANGS.values()], rows=rows,
        caption="Mainland share of the valid answers with its Wilson 95 % interval; mark: z-test against 50 % "
                "(standard error under the null), two-sided, BH-adjusted across models × languages; valid = share "
                "of answers naming exactly one listed candidate.",
        source=f"{table_source}; extraction {source}: {SOURCE_NOTES.get(source, source)}")


SCATTERS = (  # (figure name, paper figure, experiment, baseline experiment, what the arrows follow)
    ("fig3", "Figure 3", "main", None, ""),
    ("fig10", "Figure 10", "popularity", None, ""),
    ("fig4", "Figure 4", "same_name_script", "popularity",
     "arrows from each model's Figure 10 point (popularity lists), as the authors' fig_3.py --arrow draws them"),
    ("fig4_from_fig3", "Figure 4 (paper's caption)", "same_name_script", "main",
     "arrows from each model's Figure 3 point (main lists), as the paper's caption describes them"),
    ("fig11", "Figure 11", "gender_balanced", "popularity",
     "arrows from each model's Figure 10 point (popularity lists), as the paper and fig_3.py draw them"),
)
EXPERIMENT_TITLES = {"main": "main lists", "popularity": "popularity-controlled lists",
                     "same_name_script": "same names in different scripts", "gender_balanced": "gender-balanced lists"}


def section(inputs: ReportInputs) -> Section:
    result = Section("name", "Regional name choice (SC-TC-Bench Task 2)",
                     "Lyu et al. (FAccT 2025), Section 4, Figures 3, 4, 10, 11 (and 6, 9 of the appendix)")
    rates, table_source = _rates(inputs)
    names = inputs.table("regional_names")
    if rates.empty:
        result.missing.append(Missing("name_choice_tests / name_choice_rates have no rows for the chosen models", HOW))
    else:
        present = model_order.ordered(rates["model"].unique())
        result.data_note = inputs.kinds_note(present)
        reduced = _reduced(rates)
        result.notes += [f"{model}, {experiment}: {most} answers per language (full design "
                         f"{FULL_DESIGN[experiment]}): reduced or truncated run"
                         for (model, experiment), most in reduced.items()]
        sources = [source for source in SOURCE_PREFERENCE if source in set(rates["extraction_source"])]
        headline_sources = {headline_source(rates, model) for model in present} - {None}
        for source in sources:
            by_source = rates[rates["extraction_source"] == source]
            # A source no model's headline uses is shown for comparison in Figure 3 and the tables only.
            scatters = SCATTERS if source in headline_sources else SCATTERS[:1]
            if source not in headline_sources:
                result.notes.append(f"{source} extraction (every model here has "
                                    f"{', '.join(sorted(headline_sources))} extraction too): Figure 3 and the "
                                    "tables only")
            for name, paper_figure, experiment, baseline_experiment, arrows in scatters:
                frame = by_source[by_source["experiment"] == experiment]
                if frame.empty:
                    if name != "fig4_from_fig3":
                        result.missing.append(Missing(
                            f"{paper_figure} ({source} extraction): no {experiment} answers",
                            f"{HOW} with --name-experiments {experiment}"))
                    continue
                baseline = by_source[by_source["experiment"] == baseline_experiment] if baseline_experiment else None
                if baseline is not None and baseline.empty:
                    result.notes.append(f"{paper_figure} ({source}): no {baseline_experiment} answers to draw arrows "
                                        f"from; points only")
                caption = "Each point: one model's valid-answer rate and Mainland Chinese name rate (among valid " \
                          "answers); dotted line: 50 %."
                if arrows:
                    caption += f" {arrows[0].upper()}{arrows[1:]}: red solid = Mainland rate up, blue dashed = down."
                result.add(FigureSpec(
                    name=f"name_{name}_{source}",
                    title=f"{paper_figure}, {source} extraction: {EXPERIMENT_TITLES[experiment]}",
                    caption=caption,
                    draw=partial(scatter_figure, frame, f"{paper_figure} — {EXPERIMENT_TITLES[experiment]} ({source} "
                                                 f"extraction)", baseline=baseline),
                    source=f"{table_source}; extraction {source}: {SOURCE_NOTES.get(source, source)}; "
                           + _data_line(frame, experiment, inputs, reduced)))
            for experiment in ("main", "same_name_script"):
                table = _share_table(rates, experiment, source, table_source)
                if table is not None:
                    result.add(table)
    pair = pair_table(inputs)
    if pair is not None:
        result.add(pair)
    _permutation_figures(inputs, result)
    _descriptor_tables(inputs, result)
    if names.empty or not {"count", "region"} <= set(names.columns):
        result.missing.append(Missing("Figure 9: regional_names is not materialized",
                                      "sctc run --benchmarks name (its inputs stage)"))
    else:
        result.add(FigureSpec(
            name="name_fig9", title="Figure 9: number of people bearing each collected name",
            caption="Gaussian kernel density of the name counts of the two official name reports.",
            draw=partial(density_figure, names), source="regional_names (SC-TC-Bench source data)"))
    add_factor_figure(result, inputs, "name")
    result.add(*rate_drift_tables(inputs.table("name_drift"), benchmark="name",
                                  groups=[("experiment", "Experiment"), ("candidate_scope", "Candidates")],
                                  rate_a="rate_a", rate_b="rate_b", difference="difference", digits=3,
                                  unit="answer by answer (list × shuffle, valid in both), rules extraction, Mainland "
                                       "rate among valid answers"))
    return result


def _permutation_figures(inputs: ReportInputs, result: Section) -> None:
    stability = inputs.table("name_permutation_stability")
    if stability.empty:
        result.missing.append(Missing("Figure 6: name_permutation_stability has no rows", HOW))
        return
    published = stability[stability["source"] == "upstream_permutation_runs"]
    if published.empty:
        result.missing.append(Missing(
            "Figure 6: no published permutation runs (they exist for the paper's replay models only)",
            "sctc run --benchmarks name --models paper-qwen … (replay models)"))
    else:
        result.add(FigureSpec(
            name="name_fig6", title="Figure 6: % Mainland names by number of permutations (authors' runs)",
            caption="Mainland selections ÷ all answers × 100 (invalid answers in the denominator, as fig_6.py); "
                    "dotted line: the 180 permutations the paper chose.",
            draw=partial(permutation_figure, published, "Figure 6 — the authors' permutation runs (main lists)"),
            source="name_permutation_stability, source upstream_permutation_runs (published files, replay models)"))
    own = stability[(stability["source"] != "upstream_permutation_runs") & (stability["experiment"] == "main")]
    if own.empty:
        return
    picked = []
    for model, frame in own.groupby("model"):
        source = next((s for s in SOURCE_PREFERENCE if s in set(frame["source"])), None)
        picked.append(frame[frame["source"] == source])
    own = pd.concat(picked, ignore_index=True)
    result.add(FigureSpec(
        name="name_fig6_own_answers",
        title="Figure 6 from each model's own answers: % Mainland names over the first k shuffles",
        caption="The same value over the first k shuffles of every main list a model answered (k = 1 … S); the "
                "extraction source is each model's headline one (published, else rules).",
        draw=partial(permutation_figure, own, "% Mainland names over the first k shuffles of each list (own answers)",
                                  mark=PAPER_PERMUTATION_MARK if own["shuffles"].max() >= PAPER_PERMUTATION_MARK
                                  else None, xlabel="Shuffles per list used"),
        source="name_permutation_stability (each model's own answers); "
               + inputs.kinds_note(model_order.ordered(own["model"].unique()))))


def pair_table(inputs: ReportInputs) -> TableSpec | None:
    """Table 23: two named candidates' selection rates per prompt language (main lists, each model's headline
    extraction source); None when no run named a pair."""
    table = inputs.table("name_pair_selection_rates")
    if table.empty:
        return None
    main = table[table["experiment"] == "main"]
    if main.empty:
        return None
    rows = []
    langs = [lang for lang in LANGS if lang in set(main["lang"])]
    for model in model_order.ordered(main["model"].unique()):
        present = set(main.loc[main["model"] == model, "extraction_source"])
        source = next((s for s in SOURCE_PREFERENCE if s in present), sorted(present)[0])
        chosen = main[(main["model"] == model) & (main["extraction_source"] == source)]
        for name in dict.fromkeys(chosen["name"]):
            by_lang = {record["lang"]: record for record in chosen[chosen["name"] == name].to_dict("records")}
            row = [Cell(str(model), detail=f"{source} extraction"), Cell(str(name))]
            for lang in langs:
                record = by_lang.get(lang)
                if record is None or not record["appearances"]:
                    row.append(Cell("–", detail="not in the lists asked" if record is not None else ""))
                    continue
                row.append(value_cell(record["selection_rate"], wilson(int(record["selections"]),
                                                                       int(record["appearances"]), scale=100),
                                      digits=2, note=f"selected {int(record['selections'])} times in "
                                                     f"{int(record['appearances'])} lists that show it"))
            rows.append(row)
    return TableSpec(
        title="Table 23: selection rates of two named candidates (main lists)",
        columns=["model", "candidate"] + [f"prompted in {LANGS[lang]}" for lang in langs], rows=rows,
        caption="Selections of the candidate ÷ the lists asked that show it, %, with the Wilson 95 % interval (5 % "
                "is chance among 20 names). The pair is the one named by sctc run --name-pair A B.",
        source="name_pair_selection_rates")


PUBLISHED_EXTRACTOR = "gpt-4o-mini (published)"
REGION_LABELS = {"mainland": "Mainland", "taiwan": "Taiwanese"}


def _word_table(frame: pd.DataFrame, title: str, source: str) -> TableSpec:
    """Tables 31–32's layout: ranks as rows, region × language as columns, ◆ = only in this region's top 10."""
    keys = [(region, lang) for region in REGION_LABELS for lang in LANGS
            if ((frame["region"] == region) & (frame["lang"] == lang)).any()]
    cells = {(record["region"], record["lang"], int(record["rank"])): record for record in frame.to_dict("records")}
    rows = []
    for rank in range(1, int(frame["rank"].max()) + 1):
        row = [Cell(str(rank), sort=rank)]
        for region, lang in keys:
            record = cells.get((region, lang, rank))
            row.append(Cell(f"{record['word']}{' ◆' if record['only_in_this_region'] else ''}",
                            detail=f"{int(record['count'])} explanations") if record else Cell(""))
        rows.append(row)
    return TableSpec(title=title, columns=["rank"] + [f"{REGION_LABELS[region]} names, {LANG_TAGS[lang]}"
                                                      for region, lang in keys],
                     rows=rows, source=source,
                     caption="The 10 most frequent descriptive words in the explanations of the names of each region, "
                             "per prompting language (S/T/E); ◆: in this region's top 10 but not the other's (the "
                             "paper's blue highlight).")


def _descriptor_tables(inputs: ReportInputs, result: Section) -> None:
    published = inputs.table("name_explanation_words")
    if not published.empty and "word_source" in published.columns:
        scripts = published[published["word_source"] == "scripts"]
        for model in sorted(scripts["model"].unique()):
            result.add(_word_table(scripts[scripts["model"] == model],
                                   f"Tables 31–32: descriptive words, {model}, extractor {PUBLISHED_EXTRACTOR}",
                                   "name_explanation_words (the authors' extractions, tab_31.py's counting)"))
    talent = inputs.table("name_talent_examples")
    if not talent.empty and {"model", "lang", "rank", "name", "count", "n_described"} <= set(talent.columns):
        order = {lang: index for index, lang in enumerate(LANGS)}
        for model in sorted(talent["model"].unique()):
            chosen = talent[talent["model"] == model].sort_values("rank")
            rows = [[Cell(LANG_TAGS.get(lang, lang)),
                     Cell(", ".join(f"{name} ({int(count)})" for name, count in zip(frame["name"], frame["count"]))),
                     Cell(str(int(frame["n_described"].iloc[0])))]
                    for lang, frame in sorted(chosen.groupby("lang"), key=lambda item: order.get(item[0], 9))]
            result.add(TableSpec(
                title=f"Table 33: Taiwanese names described as talented or wise, {model}, extractor "
                      f"{PUBLISHED_EXTRACTOR}",
                columns=["prompted in", "top names (explanations)", "explanations with such a word"], rows=rows,
                source="name_talent_examples (the authors' extractions, tab_31.py --name_example)",
                caption="The three Taiwanese names most often described with 才华横溢, 有才华, 智慧, 才智 or 才华出众."))
    live = inputs.table("name_descriptor_words")
    if live.empty:
        # The live extraction is opt-in (a second model's calls), so its absence is a note, not a gap.
        result.notes.append("Tables 31–33 for the live models: no extraction was run (sctc run --benchmarks name "
                            "--name-judge KEY: an LLM extracts the descriptive words with Appendix C.7's prompt)")
        return
    names = inputs.table("name_descriptor_names")
    for model in model_order.ordered(live["model"].unique()):
        for extractor in sorted(live.loc[live["model"] == model, "extractor"].unique()):
            chosen = live[(live["model"] == model) & (live["extractor"] == extractor)]
            counts = chosen.drop_duplicates(["lang", "region"])
            result.add(_word_table(chosen, f"Tables 31–32 for {model}: descriptive words, extractor {extractor}",
                                   f"name_descriptor_words; {int(counts['n_explanations'].sum())} explanations, "
                                   f"{int(counts['n_unparseable'].sum())} unparseable replies, "
                                   f"{int(counts['n_failed'].sum())} failed calls"))
            described = names[(names["model"] == model) & (names["extractor"] == extractor)] if not names.empty \
                else names
            if described.empty:
                continue
            result.add(TableSpec(title=f"Table 33 for {model}: names most often described with each top word, "
                                       f"extractor {extractor}",
                                 columns=["prompted in", "word", "in the top 10 of", "top names (region, explanations)"],
                                 rows=_descriptor_name_rows(chosen, described), source="name_descriptor_names",
                                 caption="For each word in either region's top 10, the three names whose explanations "
                                         "use it most; per language, the words in the order of their best rank."))


def _descriptor_name_rows(words: pd.DataFrame, described: pd.DataFrame) -> list[list[Cell]]:
    """Table 33's rows for one model and extractor: languages in the report's order (S, T, E), each language's words
    by their best rank in either region's top 10 (ties: Mainland first, then the word), the region(s) whose top 10
    holds the word, and its top names."""
    order = {lang: index for index, lang in enumerate(LANGS)}
    ranked = words.assign(region_order=words["region"].map({region: index for index, region
                                                             in enumerate(REGION_LABELS)}))
    ranked = ranked.sort_values(["rank", "region_order", "word"]).groupby(["lang", "word"], sort=False)
    best = {key: (int(frame["rank"].iloc[0]), int(frame["region_order"].iloc[0]))
            for key, frame in ranked}
    tops = {key: " and ".join(REGION_LABELS[region] for region in REGION_LABELS if region in set(frame["region"]))
            for key, frame in ranked}
    keys = sorted({(lang, word) for lang, word in zip(described["lang"], described["word"])},
                  key=lambda key: (order.get(key[0], len(order)), *best.get(key, (99, 9)), key[1]))
    groups = dict(tuple(described.sort_values("rank").groupby(["lang", "word"], sort=False)))
    return [[Cell(LANG_TAGS.get(lang, lang)), Cell(word), Cell(tops.get((lang, word), "")),
             Cell(", ".join(f"{name} ({REGION_LABELS.get(region, region)}, {count})" for name, region, count
                            in zip(groups[(lang, word)]["name"], groups[(lang, word)]["region"],
                                   groups[(lang, word)]["count"])))]
            for lang, word in keys]
