"""The review benchmark's side studies through `sctc run` and the project's stub OpenAI server: Appendix E's
three-class pilot by length (a stub whose sentiment answer depends on the text's length gives a pilot table computed
here by hand), the pair-by-pair predictions of Figures 3–4, and `sctc reviews import-ratings` (a ratings file written
here, its agreement with the stars and the model computed by hand, and one line per bad row)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sctc_assets.cli import main
from sctc_assets.lib.reviews.human_ratings import ratings_dir, weighted_kappa
from sctc_assets.lib.reviews.pilot import PILOT_PROMPT
from sctc_assets_tests.openai_stub_server import StubOpenAIServer, completion

KEY_ENV = "SCTC_TEST_REVIEWS_KEY"
PILOT_START = PILOT_PROMPT.split("{text}")[0]

# One hotel; visible characters: 2 (bin 0: 1–10) or 12 (bin 1: 11–20).
REVIEWS = [  # id, region, stars, title
    ("t1", "tw", 9, "很好"), ("t2", "tw", 2, "很差"), ("t3", "tw", 5, "普通"),
    ("t4", "tw", 9, "房間很乾淨，早餐也很好吃"), ("t5", "tw", 1, "房間很髒，服務也非常差勁"),
    ("t6", "tw", 2, "很吵"), ("t7", "tw", 3, "太差"),
    ("c1", "cn", 9, "很好"), ("c2", "cn", 2, "很差"),
    ("c4", "cn", 9, "房间很干净，早餐也很好吃"), ("c5", "cn", 1, "房间很脏，服务也非常差劲"),
]


class LengthSentiment(StubOpenAIServer):
    """The pilot: `positive` for a text of at most 10 characters, `Negative.` for a longer one, a sentence (not a
    label alone: invalid) for 普通. The rating prompts: 9 when the review says 很好, else 2."""

    def echo(self, prompt: str, body: dict[str, Any]):
        if prompt.startswith(PILOT_START):
            text = prompt[len(PILOT_START):]
            if text == "普通":
                return completion("The sentiment is neutral")
            return completion("positive" if len(text.replace("\n", "")) <= 10 else "Negative.")
        return completion("9" if "很好" in prompt else "2")


def _export(tmp_path: Path) -> Path:
    path = tmp_path / "export.jsonl"
    rows = [{"review_id": review, "hotel_id": "H1", "nationality": region, "score": stars, "title": title,
             "positive": "", "negative": ""} for review, region, stars, title in REVIEWS]
    path.write_text("\n".join(json.dumps(row, ensure_ascii=False) for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def stub(isolated_data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    monkeypatch.delenv("SCTC_REVIEWS", raising=False)
    with LengthSentiment() as server:
        registry = tmp_path / "models.yaml"
        registry.write_text(f"models:\n  stub: {{backend: openai, model: stub-model, base_url: '{server.base_url}', "
                            f"api_key_env: {KEY_ENV}, max_retries: 0, concurrency: 4}}\n", encoding="utf-8")
        monkeypatch.setenv("SCTC_MODELS", str(registry))
        yield server


def _run(tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "out"
    assert main(["run", "--benchmarks", "reviews", "--reviews", str(_export(tmp_path)), "--models", "stub",
                 "--no-translation-control", "--out", str(out), *extra]) == 0
    return out


@pytest.mark.slow
def test_the_pilot_by_length_and_the_prediction_pairs(stub, tmp_path):
    out = _run(tmp_path, "--reviews-pilot", "2")
    pilot_prompts = [request for request in stub.requests if request.prompt.startswith(PILOT_START)]
    # bin 0 holds three negative Taiwan reviews (t2, t6, t7): two are drawn; everything else is asked once, and
    # the two varieties' 很好 and 很差 are the same request (one cached answer each): 10 rows, 8 requests
    assert len(pilot_prompts) == 8
    assert all([m["role"] for m in request.body["messages"]] == ["user"] for request in pilot_prompts)

    predictions = pd.read_parquet(out / "review_sentiment_predictions.parquet")
    assert len(predictions) == 10
    assert predictions.set_index("review_id").loc["t3", "status"] == "invalid"
    assert pd.isna(predictions.set_index("review_id").loc["t3", "predicted_sentiment"])
    # "Negative." is read as the label
    assert predictions.set_index("review_id").loc["t4", "predicted_sentiment"] == "negative"
    pilot = pd.read_parquet(out / "review_sentiment_pilot.parquet").set_index(["variety", "length_bin", "sentiment"])
    # by hand (classes coded negative 0, neutral 1, positive 2); the stub says positive up to 10 characters:
    # tw bin 0: t1 positive right; two negatives called positive (squared error 4 each); t3 invalid
    expected = {
        ("tw", 0, "positive"): (1, 0, 1, 100.0, 0.0),
        ("tw", 0, "negative"): (2, 0, 0, 0.0, 4.0),
        ("tw", 0, "neutral"): (0, 1, 0, math.nan, math.nan),
        ("tw", 0, "overall"): (3, 1, 1, 100 / 3, 8 / 3),
        # tw bin 1 (12 characters): the stub says negative: t4 (positive) wrong, t5 right
        ("tw", 1, "positive"): (1, 0, 0, 0.0, 4.0),
        ("tw", 1, "negative"): (1, 0, 1, 100.0, 0.0),
        ("tw", 1, "overall"): (2, 0, 1, 50.0, 2.0),
        ("cn", 0, "positive"): (1, 0, 1, 100.0, 0.0),
        ("cn", 0, "negative"): (1, 0, 0, 0.0, 4.0),
        ("cn", 0, "overall"): (2, 0, 1, 50.0, 2.0),
        ("cn", 1, "positive"): (1, 0, 0, 0.0, 4.0),
        ("cn", 1, "negative"): (1, 0, 1, 100.0, 0.0),
        ("cn", 1, "overall"): (2, 0, 1, 50.0, 2.0),
    }
    assert sorted(pilot.index) == sorted(expected)
    for key, (n, invalid, correct, accuracy, mse) in expected.items():
        row = pilot.loc[key]
        assert (row["n"], row["n_invalid"], row["correct"]) == (n, invalid, correct), key
        assert row["accuracy"] == pytest.approx(accuracy, nan_ok=True) and row["mse"] == pytest.approx(mse, nan_ok=True)
    assert pilot.loc[("tw", 1, "overall"), ["bin_low", "bin_high"]].tolist() == [11, 20]

    # the pilot's answers come from the cache the second time; without --reviews-pilot it is not run at all
    asked = len(stub.requests)
    _run(tmp_path, "--reviews-pilot", "2")
    assert len(stub.requests) == asked

    pairs = pd.read_parquet(out / "review_prediction_pairs.parquet")
    assert set(pairs["format"]) == {"structured", "plain", "shuffled"} and len(pairs) == 3 * 4
    structured = pairs[pairs["format"] == "structured"].set_index("review_id_tw")
    # the stub rates a review that says 很好 9, the others 2
    assert structured.loc[["t1", "t2", "t4", "t5"], "review_id_cn"].tolist() == ["c1", "c2", "c4", "c5"]
    assert structured.loc[["t1", "t2", "t4", "t5"], "prediction_tw"].tolist() == [9, 2, 9, 2]
    assert structured.loc[["t1", "t2", "t4", "t5"], "prediction_cn"].tolist() == [9, 2, 9, 2]
    assert structured.loc[["t1", "t2", "t4", "t5"], "score_tw"].tolist() == [9, 2, 9, 1]
    assert structured["both_valid"].all()


def test_weighted_kappa_by_hand():
    # person 9, 3, 1 against 9, 2, 2 on the scores 1–10, weights (i − j)² / 81:
    # observed mean weight (0 + 1 + 1) / 3 / 81; expected Σ p_i q_j (i − j)² / 81 with p = ⅓ each of 9, 3, 1 and
    # q = ⅓ of 9, ⅔ of 2: (0 + 2·49 + 36 + 2·1 + 64 + 2·1) / 9 / 81 = 202 / 729
    assert weighted_kappa([9, 3, 1], [9, 2, 2]) == pytest.approx(1 - (2 / 3) / (202 / 9))
    assert weighted_kappa([4, 5, 6], [4, 5, 6]) == pytest.approx(1.0)
    assert math.isnan(weighted_kappa([5, 5], [5, 5]))


def _ratings(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.slow
def test_imported_ratings_against_the_stars_and_the_model(stub, tmp_path, capsys):
    out = _run(tmp_path)
    pairs = pd.read_parquet(out / "review_pairs.parquet").set_index("review_id_tw")
    pair_of_t1 = int(pairs.loc["t1", "pair_id"])
    good = _ratings(tmp_path / "ratings.csv", [
        {"rater": "r1", "review_id": "t1", "pair_id": pair_of_t1, "quality": 5, "predicted_score": 9},
        {"rater": "r1", "review_id": "t2", "pair_id": "", "quality": 4, "predicted_score": 3},
        {"rater": "r1", "review_id": "t5", "pair_id": "", "quality": 4, "predicted_score": 1},
        {"rater": "r1", "review_id": "c1", "pair_id": pair_of_t1, "quality": "", "predicted_score": 8},
        {"rater": "r1", "review_id": "c2", "pair_id": "", "quality": "", "predicted_score": 2},
        {"rater": "r1", "review_id": "c5", "pair_id": "", "quality": "", "predicted_score": 4},
        {"rater": "r2", "review_id": "t1", "pair_id": "", "quality": 3, "predicted_score": ""},
    ])
    assert main(["reviews", "import-ratings", str(good), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "checked 7 ratings by 2 rater(s) of 6 reviews" in printed
    assert (ratings_dir() / "ratings.parquet").is_file() and str(ratings_dir()).startswith(str(tmp_path))

    _run(tmp_path)
    table = pd.read_parquet(out / "review_human_agreement.parquet")

    def one(rater, variety, question, against=None, fmt=None):
        chosen = table[(table.rater == rater) & (table.variety == variety) & (table.question == question)
                       & (table.against.isna() if against is None else table.against == against)
                       & (table.format.isna() if fmt is None else table.format == fmt)]
        assert len(chosen) == 1, (rater, variety, question, against, fmt)
        return chosen.iloc[0]

    # the stars: r1 on tw 9/9, 3/2, 1/1 → 2 of 3 right, squared errors 0, 1, 0;
    # on cn 8/9, 2/2, 4/1 → 1 of 3 right, squared errors 1, 0, 9
    tw = one("r1", "tw", "predicted_score", "stars")
    assert (tw["n"], tw["accuracy"], tw["mse"]) == (3, pytest.approx(200 / 3), pytest.approx(1 / 3))
    cn = one("r1", "cn", "predicted_score", "stars")
    assert (cn["n"], cn["accuracy"], cn["mse"]) == (3, pytest.approx(100 / 3), pytest.approx(10 / 3))
    # the model (structured, as the stub rates: 9 for 很好, else 2): tw 9, 2, 2 against r1's 9, 3, 1
    model = one("r1", "tw", "predicted_score", "stub", "structured")
    assert (model["n"], model["accuracy"], model["mse"]) == (3, pytest.approx(100 / 3), pytest.approx(2 / 3))
    assert model["weighted_kappa"] == pytest.approx(1 - (2 / 3) / (202 / 9))
    # Likert quality on tw: r1 5, 4, 4; with r2's 3 pooled: 5, 4, 4, 3 → mean 4, SD √(2/3)
    r1 = one("r1", "tw", "quality")
    assert r1["mean"] == pytest.approx(13 / 3) and r1["sd"] == pytest.approx(np.std([5, 4, 4], ddof=1))
    pooled = one("all", "tw", "quality")
    assert (pooled["n"], pooled["mean"], pooled["sd"]) == (4, pytest.approx(4.0), pytest.approx(math.sqrt(2 / 3)))
    assert set(table.rater) == {"r1", "r2", "all"}


@pytest.mark.slow
def test_bad_ratings_name_file_row_and_column(stub, tmp_path, capsys):
    out = _run(tmp_path)
    bad = _ratings(tmp_path / "bad.csv", [
        {"rater": "r1", "review_id": "t1", "pair_id": "", "predicted_score": 9},
        {"rater": "r1", "review_id": "x9", "pair_id": "", "predicted_score": 9},
        {"rater": "r1", "review_id": "t2", "pair_id": "", "predicted_score": 11},
        {"rater": "", "review_id": "t4", "pair_id": "", "predicted_score": 5},
        {"rater": "r1", "review_id": "t5", "pair_id": "999", "predicted_score": 5},
    ])
    assert main(["reviews", "import-ratings", str(bad), "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: bad.csv: row 3, column review_id: unknown review id 'x9'",
        "error: bad.csv: row 4, column predicted_score: '11' is not a whole number from 1 to 10",
        "error: bad.csv: row 5, column rater: missing rater",
        "error: bad.csv: row 6, column pair_id: unknown pair id '999'",
    ]
    assert not ratings_dir().exists()  # nothing kept
    typo = _ratings(tmp_path / "typo.csv", [{"rater": "r1", "review_id": "t1", "predicted_scor": 9}])
    assert main(["reviews", "import-ratings", str(typo), "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines()[0].startswith("error: typo.csv: row 1, column 'predicted_scor': "
                                                              "unknown column")


def test_no_pilot_without_a_sample_size():
    """The UI's per-model job keeps the opt-in stage with per_class 0: an empty table with its types, no request."""
    from sctc_assets.lib.reviews import pilot

    varieties = pd.DataFrame({"review_id": ["a"], "variety": ["tw"], "score": [9], "characters": [2], "title": ["很好"],
                              "positive": [""], "negative": [""]})
    assert len(pilot.pilot_sample(varieties, 1)) == 1
    sample = pilot.pilot_sample(varieties, 0)
    assert sample.empty and pilot.pilot_requests(sample) == []
    table = pilot.pilot_table(pilot.pilot_predictions("m", sample, []))
    assert table.empty and table["n"].dtype == "int64" and table["accuracy"].dtype == "float64"
    with pytest.raises(ValueError, match="at least 0"):
        pilot.pilot_sample(varieties, -1)
