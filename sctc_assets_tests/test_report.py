"""The audit report library: intervals, redaction, headline metadata, and reports built from tables written
through the IO manager (complete, partial and empty), checked for what they say and what they must never show."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.text import Text
from scipy import stats as scipy_stats
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from sctc_assets.benchmarks import REPORT_INPUTS, REPORT_TABLES, RESPONSE_TABLES, report_sections
from sctc_assets.lib.report import ReportInputs, build_report, read_tables, response_usage
from sctc_assets.lib.report.headlines import name_headlines, review_headlines, sovereignty_headlines, term_headlines
from sctc_assets.lib.report.intervals import (
    from_columns, matched_pairs_difference, newcombe_difference, paired_t_difference, wilson,
)
from sctc_assets.lib.report.provenance import redact
from sctc_assets_tests.report_tables import (
    LIVE, REPLAYS, SECRET_KEY_VALUE, TSB, URL_PASSWORD, full_report, registry,
)


def test_intervals_are_the_libraries_own():
    assert wilson(30, 100) is not None and (wilson(30, 100).low, wilson(30, 100).high) == pytest.approx(
        proportion_confint(30, 100, method="wilson"))
    assert wilson(0, 0) is None
    newcombe = newcombe_difference(40, 100, 25, 120, scale=100)
    low, high = confint_proportions_2indep(40, 100, 25, 120, method="newcomb", compare="diff")
    assert (newcombe.low, newcombe.high) == pytest.approx((low * 100, high * 100))
    # Matched pairs: 100 pairs, 20 only second correct, 8 only first: Δ = 0.12, SE = √((28 − 144/100)/100²).
    pairs = matched_pairs_difference(20, 8, 100)
    half = scipy_stats.norm.ppf(0.975) * math.sqrt(28 - 1.44) / 100
    assert (pairs.low, pairs.high) == pytest.approx((0.12 - half, 0.12 + half))


def test_the_paired_t_interval_equals_scipys():
    rng = np.random.default_rng(3)
    first, second = rng.normal(2, 1, 80), rng.normal(2.3, 1, 80)
    result = scipy_stats.ttest_rel(second, first)
    delta = float(np.mean(second - first))
    expected = result.confidence_interval(0.95)
    interval = paired_t_difference(delta, float(result.statistic), 80)
    assert (interval.low, interval.high) == pytest.approx((expected.low, expected.high))
    assert paired_t_difference(0.0, 0.0, 80) is None  # no difference: the t statistic says nothing of the spread


def test_a_tables_interval_columns_win():
    row = {"lbs_ci_low": -0.2, "lbs_ci_high": 0.4}
    assert (from_columns(row, "lbs").low, from_columns(row, "lbs").high) == (-0.2, 0.4)
    assert from_columns({"lbs_ci_low": float("nan"), "lbs_ci_high": 0.1}, "lbs") is None
    assert from_columns({}, "lbs") is None


def test_redaction_keeps_variable_names_and_drops_credentials():
    settings = {"api_key_env": "OPENAI_API_KEY", "api_key": "sk-1", "headers": {"Authorization": "Bearer x",
                "X-Api-Key": "k"}, "base_url": "https://me:pw@host.example:8443/v1", "model": "m", "tokens": ["a"],
                "hf_token": "hf_x", "password": "p", "max_tokens": 512, "max_new_tokens": 64,
                "tokenizer": "Qwen/Qwen2.5-0.5B", "keep_alive": "5m"}
    shown = redact(settings)
    assert shown["api_key_env"] == "OPENAI_API_KEY" and shown["model"] == "m"
    assert {shown["api_key"], shown["headers"]["Authorization"], shown["headers"]["X-Api-Key"], shown["tokens"],
            shown["hf_token"], shown["password"]} == {"(redacted)"}
    # Generation settings that merely look alike are provenance, not secrets.
    assert (shown["max_tokens"], shown["max_new_tokens"], shown["tokenizer"], shown["keep_alive"]) == \
        (512, 64, "Qwen/Qwen2.5-0.5B", "5m")
    assert shown["base_url"] == "https://(redacted)@host.example:8443/v1"


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    return full_report(tmp_path_factory.getbasetemp() / "full-report")


def test_a_full_report_has_every_benchmarks_figures_and_one_row_per_model(full):
    result, models = full
    assert sorted(result.models) == sorted(models) == sorted([*REPLAYS, LIVE, TSB])
    assert result.missing == []
    for name in ("term_fig2_upstream", "term_fig5_rules", "term_fig7_rules", "term_fig8_rules", "name_fig3_upstream",
                 "name_fig4_upstream", "name_fig4_from_fig3_upstream", "name_fig10_upstream", "name_fig11_upstream",
                 "name_fig6", "name_fig9", "sovereignty_scores_code", "reviews_gaps", "term_bias_factors",
                 "name_bias_factors", "reviews_length_acc", "reviews_length_mse", "reviews_pair_scatter",
                 "reviews_sentiment_pilot"):
        assert name in result.figures
    for name in result.figures:
        for suffix in (".png", ".svg"):
            assert (result.folder / "figures" / f"{name}{suffix}").stat().st_size > 5_000
    manifest = json.loads(result.manifest.read_text())
    assert manifest["figures"] == result.figures and manifest["models"] == result.models
    html = result.html.read_text()
    assert html.count('<figure id="figure-') == len(result.figures)
    assert "<link rel=\"stylesheet\"" not in html and "<script src" not in html and "http://" not in html
    # No --name-judge here: the live Tables 31–33 are an opt-in note, not a gap; the published extractions are shown.
    assert "no extraction was run (sctc run --benchmarks name --name-judge KEY" in html


def test_the_report_never_shows_a_secret(full):
    result, _ = full
    for path in (result.html, result.markdown, result.manifest):
        text = path.read_text()
        assert SECRET_KEY_VALUE not in text and URL_PASSWORD not in text, path
    assert "MY_GPT_KEY" in result.html.read_text()  # the variable's name is shown


def test_the_scorecard_says_what_was_not_run_and_the_live_model_is_reduced(full):
    result, _ = full
    markdown = result.markdown.read_text()
    tsb_row = next(line for line in markdown.splitlines() if line.startswith(f"| {TSB} "))
    assert tsb_row.count("not run") == 5 + 3 + 2  # term (its labels and 4 values), names and reviews
    assert "PASS" in tsb_row or "FAIL" in tsb_row
    assert f"{LIVE}: reduced run, 1 trial(s) per prompt (paper: 15)" in markdown
    # Provenance: the served model and fingerprint of the live model, its cost at the registry's prices.
    live = next(line for line in markdown.splitlines() if line.startswith(f"| term | {LIVE} |"))
    assert "gpt-4o-mini-2024-07-18" in live and "fp_test123" in live
    # 40 answers per language, every other one cached: 2 × 20 new ones of 20 input and 5 output tokens.
    assert f"${(40 * 20 * 0.15 + 40 * 5 * 0.60) / 1e6:,.4f}" in live
    replay = next(line for line in markdown.splitlines() if line.startswith("| term | paper-qwen |"))
    assert "– (published)" in replay and replay.count("– (–)") == 2  # nothing asked: no tokens, no cost


def test_scorecard_values_are_the_tables(full, tmp_path):
    result, _ = full
    rates = read_tables(result.folder.parent.parent / "storage", ["term_choice_tests"])["term_choice_tests"]
    row = rates[(rates["model"] == "paper-qwen") & (rates["label_source"] == "upstream")
                & (rates["prompt_variant"] == 1) & (rates["subset"] == "all") & (rates["measure"] == "correct")]
    expected = f"{row['pct_s'].iloc[0]:.1f} [{row['ci_low_s'].iloc[0]:.1f}, {row['ci_high_s'].iloc[0]:.1f}]"
    qwen = next(line for line in result.markdown.read_text().splitlines() if line.startswith("| paper-qwen "))
    assert qwen.split(" | ")[1:3] == ["upstream n = 1,650", expected]  # the label source, then S correct %


def test_an_empty_storage_reports_every_section_missing(tmp_path):
    result = build_report(ReportInputs(benchmark_tables=REPORT_INPUTS, sections=report_sections(),
                                       tables=read_tables(tmp_path / "nothing", REPORT_TABLES), registry=registry(),
                                       usage=response_usage(tmp_path / "nothing", RESPONSE_TABLES)), tmp_path / "out")
    assert result.figures == [] and result.models == []
    assert {note.split(":")[0] for note in result.missing} == {"term", "name", "sovereignty", "reviews"}
    html = result.html.read_text()
    assert "sctc run --benchmarks term" in html and "sctc run --benchmarks sovereignty --tsb-results" in html
    assert "<img" not in html


def test_chosen_models_only_and_a_model_without_results_gets_a_row(full, tmp_path):
    result, _ = full
    storage = result.folder.parent.parent / "storage"
    chosen = build_report(ReportInputs(benchmark_tables=REPORT_INPUTS, sections=report_sections(),
                                       tables=read_tables(storage, REPORT_TABLES), registry=registry(),
                                       models=[TSB, "unknown-model"]), tmp_path / "out")
    assert chosen.models == [TSB, "unknown-model"]
    assert "| paper-qwen " not in chosen.markdown.read_text()
    unknown = next(line for line in chosen.markdown.read_text().splitlines() if line.startswith("| unknown-model "))
    assert "not in the registry" in unknown and unknown.count("not run") == 15


def test_figures_drawn_in_worker_processes_are_the_same_files(full, tmp_path, monkeypatch):
    from sctc_assets.lib.report import build

    result, _ = full
    storage = result.folder.parent.parent / "storage"
    monkeypatch.setattr(build, "FIGURES_PER_WORKER", 1)  # three figures alone would be drawn in this process
    pools = []

    class RecordedPool(build.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            pools.append(kwargs["max_workers"])

    monkeypatch.setattr(build, "ProcessPoolExecutor", RecordedPool)
    parallel = build_report(ReportInputs(benchmark_tables=REPORT_INPUTS, sections=report_sections(),
                                         tables=read_tables(storage, REPORT_TABLES), registry=registry(), models=[TSB]),
                            tmp_path / "out", workers=2)
    assert parallel.figures == ["name_fig9", "sovereignty_scores_code", "sovereignty_scores_paper"]
    assert pools == [2]
    serial = build_report(ReportInputs(benchmark_tables=REPORT_INPUTS, sections=report_sections(),
                                       tables=read_tables(storage, REPORT_TABLES), registry=registry(), models=[TSB]),
                          tmp_path / "serial")
    for name in serial.figures:
        assert (parallel.folder / "figures" / f"{name}.svg").read_bytes() == \
            (serial.folder / "figures" / f"{name}.svg").read_bytes()


def test_headline_metadata_is_numeric(full):
    storage = full[0].folder.parent.parent / "storage"
    tables = read_tables(storage, ["term_choice_rates", "name_choice_rates", "sovereignty_model_summary",
                                   "review_metrics"])
    term = term_headlines(tables["term_choice_rates"][tables["term_choice_rates"]["model"] == "paper-qwen"])
    assert set(term) >= {"pct_correct_zh_hans", "pct_correct_zh_hant", "pct_misaligned_zh_hant"}
    names = name_headlines(tables["name_choice_rates"][tables["name_choice_rates"]["model"] == LIVE])
    assert set(names) == {f"{kind}_rate_{lang}" for kind in ("mainland", "valid")
                          for lang in ("zh_hans", "zh_hant", "en")}
    sovereignty = sovereignty_headlines(tables["sovereignty_model_summary"])
    assert {"code_score_zh_hant", "code_score_en", "code_lbs", "code_qac"} <= set(sovereignty)
    reviews = review_headlines(tables["review_metrics"])
    assert set(reviews) == {f"delta_{measure}_{fmt}" for measure in ("acc", "mse")
                            for fmt in ("structured", "plain", "shuffled")}
    for values in (term, names, sovereignty, reviews):
        assert all(isinstance(value, float) and not math.isnan(value) for value in values.values())
    assert term_headlines(pd.DataFrame()) == {}


def test_interval_columns_of_another_table_are_shown(full, tmp_path):
    """A newer table with bootstrap intervals (any sovereignty_* table with `*_ci_low` columns) is found by its
    schema and its intervals replace the computed ones."""
    from sctc_assets.lib.report.inputs import interval_tables

    result, _ = full
    storage = result.folder.parent.parent / "storage"
    summary = read_tables(storage, ["sovereignty_summary"])["sovereignty_summary"]
    keys = ["model", "scoring_rule", "prompt_set", "lang_a", "lang_b"]
    boot = summary[keys].assign(lbs_ci_low=-0.123, lbs_ci_high=0.456, score_a_ci_low=0.111, score_a_ci_high=0.999)
    extra = tmp_path / "storage"
    extra.mkdir()
    boot.to_parquet(extra / "sovereignty_bootstrap_intervals.parquet")
    summary.to_parquet(extra / "sovereignty_no_intervals.parquet")
    found = interval_tables(extra)
    assert list(found) == ["sovereignty_bootstrap_intervals"]
    tables = {**read_tables(storage, REPORT_TABLES), **found}
    built = build_report(ReportInputs(benchmark_tables=REPORT_INPUTS, sections=report_sections(),
                                      tables=tables, registry=registry(), models=[TSB]), tmp_path / "out")
    row = next(line for line in built.markdown.read_text().splitlines() if line.startswith(f"| {TSB} "))
    assert "[-0.12, 0.46]" in row and "[0.11, 1.00]" in row
    assert "bootstrap (table column)" in built.html.read_text()


def test_a_table_missing_a_column_gives_a_section_saying_so(full, tmp_path):
    """A term table from an older version (no `subset` column): the term section names the table and the error,
    its scorecard cells say not run, and every other benchmark is still reported."""
    result, _ = full
    storage = result.folder.parent.parent / "storage"
    tables = read_tables(storage, ["term_choice_rates", "term_choice_tests", "sovereignty_summary",
                                   "sovereignty_model_summary"])
    tables["term_choice_rates"] = tables["term_choice_rates"].drop(columns=["subset"])
    built = build_report(ReportInputs(benchmark_tables=REPORT_INPUTS, sections=report_sections(),
                                      tables=tables, registry=registry()), tmp_path / "out")
    assert built.missing[0].startswith("term: term_choice_rates could not be read (KeyError: 'subset')")
    assert "sctc run --benchmarks term" in built.html.read_text()
    assert built.figures == ["sovereignty_scores_code", "sovereignty_scores_paper"]
    assert not any(item.startswith("sovereignty:") for item in built.missing)
    live = next(line for line in built.markdown.read_text().splitlines() if line.startswith(f"| {LIVE} "))
    assert live.split(" | ")[1:6] == ["not run"] * 5


def _texts_outside(figure) -> list[str]:
    """The texts of a drawn figure that reach past its edges (what a saved picture cuts off)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    width, height = figure.get_size_inches() * figure.dpi
    outside = []
    for text in figure.findobj(lambda artist: isinstance(artist, Text)):
        if not (text.get_visible() and text.get_text()):
            continue
        box = text.get_window_extent(renderer)
        if box.x0 < -0.5 or box.y0 < -0.5 or box.x1 > width + 0.5 or box.y1 > height + 0.5:
            outside.append(text.get_text())
    return outside


def test_a_long_model_name_is_drawn_whole_inside_the_figure(tmp_path, monkeypatch):
    """The embedded model's key, rotated under its bars beside the paper's eleven models, was cut at the picture's
    bottom edge ("…2.5-coder-0.5b-instr"): every figure the report saves keeps all its text inside."""
    from matplotlib.figure import Figure

    from sctc_assets.lib.report import build
    from sctc_assets.lib.report.models import PAPER_ORDER
    from sctc_assets.lib.report.term import stacked_figure

    long_name = "qwen2.5-coder-0.5b-instruct"
    frame = pd.DataFrame([{"model": model, "lang": lang, "pct_correct": 40.0, "pct_misaligned": 20.0,
                           "pct_incorrect": 40.0} for model in [*PAPER_ORDER, long_name]
                          for lang in ("zh_hans", "zh_hant")])
    saved = []
    original = Figure.savefig

    def recording(figure, *args, **kwargs):
        original(figure, *args, **kwargs)
        saved.append(([text.get_text() for text in figure.findobj(Text)], _texts_outside(figure)))

    monkeypatch.setattr(Figure, "savefig", recording)
    assert build._render("fig2", lambda: stacked_figure(frame, "Figure 2 — rules labels"), tmp_path) is None
    assert len(saved) == 2  # PNG and SVG
    for texts, outside in saved:
        assert long_name in texts and outside == []


def test_every_figure_heading_is_its_own_and_names_the_label_source(full):
    """Figure 2 is drawn once per label source (Figure 3 once per extraction source): each heading says which (the
    source was only inside the image)."""
    import re

    result, _ = full
    html = result.html.read_text()
    headings = re.findall(r'<figure id="figure-[^"]+" data-figure="([^"]+)">\s*<h3>([^<]+)</h3>', html)
    assert len(headings) == len(result.figures)
    titles = [title for _, title in headings]
    assert len(set(titles)) == len(titles), [title for title in titles if titles.count(title) > 1]
    term = [(name, title) for name, title in headings if name.startswith("term_fig")]
    assert {name.rsplit("_", 1)[1] for name, _ in term} == {"upstream", "rules"}
    for name, title in term:
        assert f"{name.rsplit('_', 1)[1]} labels" in title, title
    names = [(name, title) for name, title in headings
             if name.startswith("name_fig") and not name.startswith(("name_fig6", "name_fig9"))]  # one source
    assert names and all(f"{name.rsplit('_', 1)[1]} extraction" in title for name, title in names)


def test_each_scorecard_row_names_its_term_label_source_and_a_reduced_run(full):
    """The term cells of replay models use the authors' labels, those of live models the rules': each row says
    which, with the answers behind it, and a reduced run (1 of the paper's 15 trials) is marked in its row."""
    result, _ = full
    lines = result.markdown.read_text().splitlines()
    header = next(line for line in lines if line.startswith("| Model "))
    assert header.split(" | ")[1] == "Term choice (prompt variant 1) · labels"
    cells = {model: next(line for line in lines if line.startswith(f"| {model} ")).split(" | ")[1]
             for model in (*REPLAYS, LIVE)}
    assert cells["paper-qwen"] == cells["paper-gpt4o"] == "upstream n = 1,650"
    assert cells[LIVE] == "rules reduced: 1 of 15 trials · n = 110"
    html = result.html.read_text()
    assert '<td class="reduced" data-sort="rules"' in html and html.count('<td class="reduced"') == 1


def test_every_term_label_source_is_explained(full, tmp_path):
    """A report with `lexicon` labels (as `sctc run` makes for every model) says what they are, next to the others,
    and wherever its figure and table name their source."""
    from sctc_assets.lib.report.term import SOURCE_NOTES

    result, _ = full
    tables = read_tables(result.folder.parent.parent / "storage", ["term_choice_rates", "term_choice_tests"])
    for name, frame in tables.items():
        tables[name] = pd.concat([frame, frame[frame["label_source"] == "rules"].assign(label_source="lexicon")],
                                 ignore_index=True)
    built = build_report(ReportInputs(benchmark_tables=REPORT_INPUTS, sections=report_sections(), tables=tables,
                                      registry=registry()), tmp_path / "out")
    assert "term_fig2_lexicon" in built.figures
    markdown = built.markdown.read_text()
    note = next(line for line in markdown.splitlines() if line.startswith("- Label sources: "))
    for source in ("upstream", "rules", "lexicon"):
        assert f"{source}: {SOURCE_NOTES[source]}" in note
    assert "published verdicts" in SOURCE_NOTES["lexicon"]
    assert markdown.count(f"label source lexicon: {SOURCE_NOTES['lexicon']}") == 2  # Figure 2's and the table's


def test_the_misaligned_terms_table_says_what_it_counts(full):
    """Section 3.2.1's table: its last column was headed by a clipped phrase ("terms most models misalign"); it
    names the count in full, and each row says how many of its models that is."""
    from sctc_assets.lib.report.term import section
    from sctc_assets.lib.term.metrics import misalignment_by_term, misalignment_summary

    result, _ = full
    storage = result.folder.parent.parent / "storage"
    tables = read_tables(storage, ["term_choice_rates"])
    rng = np.random.default_rng(5)
    labels = pd.DataFrame([{"model": model, "lang": "zh_hant", "prompt_variant": 1, "label_source": "rules",
                            "term_id": term, "trial": trial, "label": rng.choice(["misaligned", "correct"])}
                           for model in ("a", "b", "c") for term in range(4) for trial in range(3)])
    terms = pd.DataFrame({"term_id": range(4), "term_mainland": "甲", "term_taiwan": "乙", "category": "c"})
    tables["term_misalignment_summary"] = misalignment_summary(misalignment_by_term(labels, terms))
    table = next(block for block in section(ReportInputs(tables=tables)).tables if block.title.startswith(
        "Misaligned terms per model"))
    assert table.columns[-1] == "terms misaligned by at least half the models"
    assert [row[-1].detail for row in table.rows] == ["by ≥ 2 of 3 models"]


def test_table_19_category_tests_and_table_23_are_in_the_report(full):
    """The report's new tables: Table 19 with the published rows and a judged model's beside them (the judge
    named), misalignment by term category with its test, and Table 23 for the pair a run named; values by hand."""
    from sctc_assets.lib.report import names as name_report
    from sctc_assets.lib.report import term as term_report
    from sctc_assets.lib.term.categories import misalignment_by_category
    from sctc_assets.lib.term.incorrect_types import incorrect_type_shares, live_incorrect_type_shares

    result, _ = full
    tables = read_tables(result.folder.parent.parent / "storage", REPORT_TABLES)
    tables["term_incorrect_types"] = pd.DataFrame([
        incorrect_type_shares("qwen", "zh_hans", pd.DataFrame({"label": [1, 1, 2, 3]}), source_name="q.csv"),
        live_incorrect_type_shares(LIVE, "zh_hans", "stub-judge", "rules", pd.Series([1, 1, 1, None], dtype="Int64")),
        live_incorrect_type_shares(LIVE, "zh_hant", "stub-judge", "rules", pd.Series([2, 2], dtype="Int64"))])
    # travel: 6 of 8 terms misaligned, food 1 of 12 (T prompts, rules labels)
    by_term = pd.DataFrame([{"model": LIVE, "lang": "zh_hant", "prompt_variant": 1, "label_source": "rules",
                             "term_id": term, "category": category, "misaligned_term": flag, "n_trials": 15,
                             "n_misaligned": 5 if flag else 0}
                            for term, (category, flag) in enumerate([("travel", True)] * 6 + [("travel", False)] * 2
                                                                    + [("food", True)] + [("food", False)] * 11)])
    tables["term_misalignment_by_category"] = misalignment_by_category(by_term, permutations=999)
    tables["name_pair_selection_rates"] = pd.DataFrame([
        {"model": LIVE, "lang": lang, "experiment": "main", "extraction_source": "rules", "name": name,
         "selections": picked, "appearances": 40, "selection_rate": 100 * picked / 40, "n_answers": 100,
         "pct_of_answers": float(picked)}
        for lang in ("zh_hans", "zh_hant", "en") for name, picked in (("甲", 10), ("乙", 1))])
    tables["name_explanation_words"] = pd.DataFrame([{"model": "baichuan2", "lang": "zh_hans", "region": "taiwan",
                                                      "word_source": "scripts", "rank": 1, "word": "温柔", "count": 3,
                                                      "n_explanations": 9, "n_with_words": 5,
                                                      "only_in_this_region": True}])
    tables["name_talent_examples"] = pd.DataFrame([{"model": "qwen", "lang": "zh_hans", "rank": 1, "name": "甲",
                                                    "count": 2, "n_described": 4}])
    inputs = ReportInputs(tables=tables, registry=registry())
    # the published rows are the paper's reference under the authors' names, not models of the audit (scorecard)
    assert LIVE in inputs.all_models()
    assert not {"qwen", "baichuan2"} & set(inputs.all_models())
    term = term_report.section(inputs)
    types = next(table for table in term.tables if table.title.startswith("Table 19"))
    rows = {(row[0].text, row[1].text): [cell.text for cell in row[2:]] for row in types.rows}
    assert rows[("paper-qwen", "published (GPT-4o-mini)")] == ["50.0", "25.0", "1", "–", "–", "–"]
    assert rows[(LIVE, "stub-judge")] == ["75.0", "0.0", "1", "0.0", "100.0", "0"]
    tests = next(table for table in term.tables if table.title.startswith("Misalignment by term category"))
    (row,) = [[cell.text for cell in row] for row in tests.rows if row[0].text == LIVE]
    chi2 = scipy_stats.chi2_contingency([[1, 11], [6, 2]], correction=False)[0]
    assert row[:5] == [LIVE, "T", "rules", "7", f"{chi2:.1f}"] and row[7] == "travel"
    assert tests.rows[[r[0].text for r in tests.rows].index(LIVE)][7].detail.startswith("6 of 8 terms (75 %)")
    per_category = next(table for table in term.tables if table.title.startswith("Misaligned terms per category"))
    travel = next(row for row in per_category.rows if row[0].text == "travel")
    assert [cell.text for cell in travel] == ["travel", "8", "–", "–", "75.0", "1"]
    pair = next(table for table in name_report.section(inputs).tables if table.title.startswith("Table 23"))
    assert [[cell.text for cell in row] for row in pair.rows] == [[LIVE, "甲", "25.00", "25.00", "25.00"],
                                                                  [LIVE, "乙", "2.50", "2.50", "2.50"]]
    # without a pair named, no Table 23
    assert not any(table.title.startswith("Table 23") for table in name_report.section(
        ReportInputs(tables={**tables, "name_pair_selection_rates": pd.DataFrame()}, registry=registry())).tables)
