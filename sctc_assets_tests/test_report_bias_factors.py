"""The report's bias-factor coefficient figures (#41 point 5): one per benchmark, each model's coefficients and 95 %
intervals drawn as the table holds them, one block per model, and what is missing said when there is none."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sctc_assets.benchmarks import SPECS
from sctc_assets.lib.report.bias_factors import add_factor_figure, figure_rows
from sctc_assets.lib.report.document import Section
from sctc_assets.lib.report.inputs import ReportInputs


def _table() -> pd.DataFrame:
    rows = []
    for model, sources in (("paper-qwen", ("upstream", "rules")), ("live", ("rules",))):
        for source in sources:
            for lang in ("zh_hans", "zh_hant"):
                for outcome in ("correct", "misaligned"):
                    for factor in (("corpus", "tokens") if model == "paper-qwen" else ("corpus",)):
                        coef = 0.1 * len(rows) - 0.5
                        rows.append({"model": model, "lang": lang, "label_source": source, "outcome": outcome,
                                     "factor": factor, "coef": coef, "ci_low": coef - 0.3, "ci_high": coef + 0.2})
    table = pd.DataFrame(rows)
    table.loc[(table.model == "live") & (table.lang == "zh_hant") & (table.outcome == "correct"), "coef"] = np.nan
    return table


def test_the_term_figure_draws_each_models_coefficients_and_intervals():
    table = _table()
    result = Section("term", "t", "p")
    add_factor_figure(result, ReportInputs(tables={"term_bias_factors": table}), "term")
    assert not result.missing and [spec.name for spec in result.figures] == ["term_bias_factors"]
    drawn = figure_rows(table, "term")
    # one block per model: the authors' labels for the replay, the rules for the live model; `correct` only;
    # the live model's non-estimable row left out
    assert set(zip(drawn.model, drawn.label_source)) == {("paper-qwen", "upstream"), ("live", "rules")}
    assert set(drawn.outcome) == {"correct"} and len(drawn) == 4 + 1
    figure = result.figures[0].draw()
    axis = figure.axes[0]
    points = sorted(round(float(container.lines[0].get_xdata()[0]), 9) for container in axis.containers)
    assert points == sorted(round(value, 9) for value in drawn.coef)
    # each interval: a horizontal bar from ci_low to ci_high
    bars = sorted(tuple(round(float(v), 9) for v in segment[:, 0]) for container in axis.containers
                  for segment in container.lines[2][0].get_segments())
    assert bars == sorted((round(low, 9), round(high, 9)) for low, high in zip(drawn.ci_low, drawn.ci_high))
    assert [text.get_text() for text in axis.get_legend().get_texts()] == ["corpus", "tokens"]
    assert "paper-qwen: label_source upstream" in result.figures[0].source


def test_the_name_figure_picks_one_experiment_and_extraction_per_model():
    rows = [{"model": "m", "lang": lang, "experiment": experiment, "extraction_source": source, "outcome": "mainland",
             "factor": "corpus", "coef": 0.4, "ci_low": 0.1, "ci_high": 0.7}
            for lang in ("zh_hans", "zh_hant", "en") for experiment in ("same_name_script", "main")
            for source in ("rules", "published")]
    drawn = figure_rows(pd.DataFrame(rows), "name")
    assert set(drawn.experiment) == {"main"} and set(drawn.extraction_source) == {"published"} and len(drawn) == 3


def test_without_rows_the_report_says_what_is_missing_and_how():
    result = Section("term", "t", "p")
    add_factor_figure(result, ReportInputs(tables={"term_bias_factors": _table().iloc[0:0]}), "term")
    assert not result.figures and "term_bias_factors" in result.missing[0].what
    assert "sctc run --benchmarks term" in result.missing[0].how


def test_rows_without_estimable_coefficients_are_a_note_not_a_gap():
    """The stage ran but had nothing to estimate (e.g. a reduced run whose outcomes never vary): no command makes
    the figure, so the report says why in a note and lists nothing as missing."""
    table = _table().assign(coef=np.nan)
    result = Section("term", "t", "p")
    add_factor_figure(result, ReportInputs(tables={"term_bias_factors": table}), "term")
    assert not result.figures and not result.missing
    assert "no estimable coefficients" in result.notes[0]


def test_the_specs_report_parts_read_the_tables():
    assert "term_bias_factors" in SPECS["term"].report_tables
    assert "name_bias_factors" in SPECS["name"].report_tables
