"""Reviews for any declared pair of varieties (`--reviews-pair A B`): a fictional export of British and American
English hotel reviews runs end to end (pairs, English prompts, no translation control, metrics and report named by
the pair), the options are checked before anything runs, and the paper's pair keeps its tables' column names."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sctc_assets.benchmarks.reviews import reviews_config, reviews_option_problems
from sctc_assets.cli import main
from sctc_assets.lib.reviews.metrics import METRIC_COLUMNS, metric_columns
from sctc_assets.lib.reviews.pairing import PAIR_COLUMNS, pair_columns
from sctc_assets.lib.reviews.scripts import token_count
from sctc_assets.lib.reviews.varieties import review_text, variety_pair
from sctc_assets.benchmarks import BUILT_IN_SCHEMAS as TABLE_SCHEMAS
from sctc_assets.lib.schemas import frame_problems
from sctc_assets.lib.schemas.reviews import review_tables
from sctc_assets_tests.fakes import count_calls

# Fictional reviews written for this test: (hotel, score, British title/positive/negative, American ones). The two
# reviews of a row share hotel, rating class and 10-token length bin, so each row is one pair.
PAIRED = [
    ("h1", 9, "Lovely stay", "Friendly staff and a spotless flat.", "",
     "Great stay", "Friendly staff and a spotless apartment.", ""),
    ("h1", 8, "Good value", "The lift was quick and the colour scheme calm.", "Queue at breakfast.",
     "Good value", "The elevator was quick and the color scheme calm.", "Line at breakfast."),
    ("h1", 5, "Average", "Decent location near the tube.", "Tiny bathroom, noisy corridor.",
     "Average", "Decent location near the subway.", "Tiny bathroom, noisy hallway."),
    ("h1", 2, "Disappointing", "", "The duvet was stained and the reception desk was rude.",
     "Disappointing", "", "The comforter was stained and the front desk was rude."),
    ("h2", 10, "Brilliant", "Superb breakfast, cosy lounge and a car park on site.", "",
     "Awesome", "Superb breakfast, cozy lounge and a parking lot on site.", ""),
    ("h2", 9, "Would return", "Comfortable beds.", "",
     "Would return", "Comfortable beds.", ""),
    ("h2", 6, "Fine", "Clean enough.", "The bin was full when we arrived.",
     "Fine", "Clean enough.", "The trash can was full when we arrived."),
    ("h2", 3, "Not great", "Nice garden.", "Cold radiator, mouldy shower curtain, no hot water.",
     "Not great", "Nice yard.", "Cold radiator, moldy shower curtain, no hot water."),
    ("h3", 8, "Pleasant", "Helpful concierge who booked us a taxi.", "Pricey minibar.",
     "Pleasant", "Helpful concierge who booked us a cab.", "Pricey minibar."),
    ("h3", 7, "Okay", "Good shower.", "Thin walls.",
     "Okay", "Good shower.", "Thin walls."),
    ("h3", 4, "Meh", "Central.", "Carpet worn, lift out of order for two days.",
     "Meh", "Central.", "Carpet worn, elevator out of order for two days."),
    ("h3", 1, "Awful", "", "Cockroaches in the wardrobe.",
     "Awful", "", "Cockroaches in the closet."),
]
# Left out: a reviewer from neither variety, and a British review alone in its hotel.
UNPAIRED = [("h1", 9, "en-AU", "Ripper", "Top spot.", ""), ("h4", 9, "en-GB", "Smashing", "Lovely view.", "")]
PAIR = ("en-gb", "en-us")


def _export(path: Path) -> Path:
    rows = []
    for hotel, score, *texts in PAIRED:
        for region, (title, positive, negative) in (("en-GB", texts[:3]), ("en-US", texts[3:])):
            rows.append({"review_id": f"r{len(rows):02d}", "hotel__booking_id": hotel, "user_nationality": region,
                         "score": score, "review_title": title, "positive_review": positive,
                         "negative_review": negative})
    for hotel, score, region, title, positive, negative in UNPAIRED:
        rows.append({"review_id": f"r{len(rows):02d}", "hotel__booking_id": hotel, "user_nationality": region,
                     "score": score, "review_title": title, "positive_review": positive, "negative_review": negative})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_the_fixture_rows_are_aligned_pairs():
    for hotel, score, *texts in PAIRED:
        sides = pd.DataFrame({"title": [texts[0], texts[3]], "positive": [texts[1], texts[4]],
                              "negative": [texts[2], texts[5]]})
        bins = {(token_count(text) - 1) // 10 for text in review_text(sides)}
        assert len(bins) == 1, (hotel, score, texts)


@pytest.fixture
def calls(isolated_data_dir, tmp_path, monkeypatch):
    calls = tmp_path / "calls.log"
    registry = tmp_path / "models.yaml"
    registry.write_text(
        "models:\n"
        f"  fake-en: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: en, calls_file: '{calls}',"
        " default_answer: '8'}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    monkeypatch.delenv("SCTC_REVIEWS", raising=False)
    return calls


def test_a_british_and_american_english_pair_runs_end_to_end(calls, tmp_path, capsys):
    export = _export(tmp_path / "reviews.csv")
    out = tmp_path / "out"
    status = main(["run", "--benchmarks", "reviews", "--reviews", str(export), "--reviews-pair", "en-gb", "en-us",
                   "--models", "fake-en", "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 0, printed

    varieties = pd.read_parquet(out / "review_varieties.parquet")
    assert sorted(set(varieties.variety)) == list(PAIR)
    pairs = pd.read_parquet(out / "review_pairs.parquet")
    assert list(pairs.columns) == pair_columns(variety_pair(PAIR))
    assert "review_id_en_gb" in pairs and "score_en_us" in pairs and len(pairs) == len(PAIRED)
    by_id = varieties.set_index("review_id").variety
    assert set(pairs.review_id_en_gb.map(by_id)) == {"en-gb"} and set(pairs.review_id_en_us.map(by_id)) == {"en-us"}
    assert not frame_problems(pairs, {spec.table: spec for spec in review_tables("en_gb", "en_us")}["review_pairs"])

    # English prompts (Appendix C's), no converted versions: every paired review once per format
    prompts = pd.read_parquet(out / "review_prompts.parquet")
    assert len(prompts) == len(PAIRED) * 2 * 3 and set(prompts.version) == {"original"}
    assert set(prompts.text_variety) == set(PAIR) and (prompts.variety == prompts.text_variety).all()
    assert set(prompts.system) == {"You are a grading assistant for hotel reviews"}
    asked = [json.loads(line)["prompt"] for line in calls.read_text(encoding="utf-8").splitlines()]
    # a shuffled prompt equal to its plain one is answered from the cache
    assert len(asked) == prompts.prompt.nunique() and len(PAIRED) * 2 * 2 <= len(asked) <= len(prompts)
    assert all(prompt.startswith("The following is a hotel review from a user.") for prompt in asked)
    assert all(prompt.isascii() for prompt in asked)  # English throughout, no Chinese text or instruction
    assert any("elevator" in prompt for prompt in asked) and any("lift" in prompt for prompt in asked)

    predictions = pd.read_parquet(out / "review_predictions.parquet")
    assert set(predictions.version) == {"original"} and len(predictions) == len(prompts)
    metrics = pd.read_parquet(out / "review_metrics.parquet")
    assert list(metrics.columns) == ["model", *metric_columns(("en_gb", "en_us"))]
    assert set(metrics.analysis) == {"length", "confound"}  # no translation control, no Chinese character sets
    overall = metrics[(metrics.analysis == "length") & (metrics.subset == "all")]
    assert (overall.n_pairs == len(PAIRED)).all()
    assert (overall.delta_acc == overall.acc_en_us - overall.acc_en_gb).all()
    assert not frame_problems(metrics, {spec.table: spec for spec in review_tables("en_gb", "en_us")}["review_metrics"])
    assert "Aligned review pairs: 12 (British English vs American English" in printed
    assert "Δ = en-us − en-gb" in printed and "acc % en-gb / en-us" in printed
    assert "Translation control (Table 3): skipped, en-gb and en-us are not both Chinese varieties" in printed
    assert "'unknown_variety': {'unknown': 1}" in printed and "no_counterpart_in_cell" in printed

    assert main(["report", "--out", str(tmp_path / "report-out")]) == 0
    report = tmp_path / "report-out" / "report"
    for page in ("report.md", "index.html"):
        text = (report / page).read_text(encoding="utf-8")
        assert "British English (en-gb, the reference) vs American English (en-us)" in text
        assert "ΔAcc (en-us−en-gb)" in text and "Performance gap between American and British English" in text


def test_the_pair_and_the_mapping_are_checked_before_anything_runs(calls, tmp_path, capsys):
    assert reviews_option_problems({"reviews_pair": ["en-gb", "EN-GB"]}) == [
        "--reviews-pair: a review pair is two different varieties, got en-gb en-gb"]
    assert reviews_option_problems({"reviews_pair": ["en-gb", "fr-ca"]}) == [
        "--reviews-pair: unknown review variety fr-ca (known: tw, cn, en-gb, en-us)"]
    assert reviews_option_problems({"reviews_pair": ["en-gb", "en-us"], "reviews_varieties": [("uk", "en-gb"),
                                                                                            ("china", "cn")]}) == [
        "--reviews-varieties: china=cn: the variety must be one of en-gb, en-us"]
    assert reviews_option_problems({"reviews_varieties": [("taiwan", "TW"), ("uk", "en-gb")]}) == [
        "--reviews-varieties: uk=en-gb: the variety must be one of tw, cn"]
    status = main(["run", "--benchmarks", "reviews", "--reviews-pair", "en-us", "en-us", "--out", str(tmp_path)])
    assert status == 2
    assert "error: --reviews-pair: a review pair is two different varieties" in capsys.readouterr().err
    assert count_calls(calls) == 0


def test_the_pair_reaches_the_assets_config_only_when_declared():
    assert reviews_config({"reviews_pair": ["en-GB", "en-US"], "reviews_varieties": [("uk", "en-gb")]})[
        "review_varieties"] == {"pair": ["en-gb", "en-us"], "varieties": {"uk": "en-gb"}}
    assert reviews_config({"reviews_pair": ["en-gb", "en-us"]})["review_pairs"] == {"pair": ["en-gb", "en-us"]}
    assert reviews_config({})["review_varieties"] == {} and reviews_config({})["review_pairs"] == {}


def test_the_papers_pair_keeps_every_column_name():
    assert PAIR_COLUMNS == ["pair_id", "hotel_id", "rating_class", "length_bin", "review_id_tw", "review_id_cn",
                            "score_tw", "score_cn", "tokens_tw", "tokens_cn", "characters_tw", "characters_cn",
                            "length_group"]
    assert METRIC_COLUMNS == [
        "format", "analysis", "subset", "n_pairs", "n_excluded",
        "acc_tw", "acc_cn", "delta_acc", "only_tw_correct", "only_cn_correct", "mcnemar_chi2", "mcnemar_p", "sig_acc",
        "mse_tw", "mse_cn", "delta_mse", "ttest_t", "ttest_p", "sig_mse", "wilcoxon_w", "wilcoxon_p", "sig_wilcoxon",
        "true_mean_tw", "true_mean_cn", "true_t", "true_p",
    ]
    assert TABLE_SCHEMAS["review_pairs"].names == PAIR_COLUMNS
    assert TABLE_SCHEMAS["review_metrics"].names == ["model", *METRIC_COLUMNS]
    assert [spec.names for spec in review_tables()] == [TABLE_SCHEMAS[spec.table].names for spec in review_tables()]
