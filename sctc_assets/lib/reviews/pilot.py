"""Appendix E's pilot: three-class sentiment (negative 1–3, neutral 4–7, positive 8–10 stars) by review length.

The paper binned the reviews into 50 bins of 10 characters up to 500 characters, drew up to 200 reviews per
sentiment class in each bin, asked GPT-4o its user prompt below (no system prompt) on the title, positive and
negative text one per line, left out answers outside the three labels, and drew Figure 2: accuracy and MSE per class
and overall against length. Here the same on `review_varieties` (every review, paired or not, as the paper's "initial
dataset"), per variety of the pair, with the sample size per class and bin a run option (`--reviews-pilot N`).

Choices the paper leaves open: a bin holds 10*b*+1 … 10*b*+10 visible characters (the pairing's convention), empty
parts are left out of the text instead of leaving blank lines, the sample of a cell is the `per_class` reviews with
the smallest seeded hash of their id (the same whatever the row order), and the MSE codes the classes 0 (negative),
1 (neutral), 2 (positive), one step per class.
"""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Sequence

import numpy as np
import pandas as pd

from sctc_assets.lib.generation import GenerationRequest, GenerationResult, strip_reasoning
from sctc_assets.lib.reviews.scoring import answer_statuses
from sctc_assets.lib.reviews.source import TEXT_FIELDS

LABELS = ("negative", "neutral", "positive")
CODES = {label: code for code, label in enumerate(LABELS)}
BIN_WIDTH, BINS = 10, 50
MAX_CHARACTERS = BIN_WIDTH * BINS
PAPER_PER_CLASS = 200
OVERALL = "overall"
# Appendix E, verbatim (its typos "label" and "replay" included): the user message alone, no system prompt.
PILOT_PROMPT = (
    "Predict the sentiment of the following text. Please answer one of the following label: (positive, negative, "
    "neutral). Do not reply anything like ‘The sentiment is...’. Do not replay with any explanation. Directly "
    "output the answer.\n\n"
    "Text: {text}"
)
SAMPLE_COLUMNS = ["review_id", "variety", "score", "sentiment", "characters", "length_bin", "text", "prompt"]
PREDICTION_COLUMNS = ["model", "review_id", "variety", "score", "sentiment", "characters", "length_bin", "response",
                      "outcome", "predicted_sentiment", "status", "cached"]
PILOT_COLUMNS = ["model", "variety", "length_bin", "bin_low", "bin_high", "sentiment", "n", "n_invalid", "correct",
                 "accuracy", "mse"]


def sentiment_of(score: int) -> str:
    """The pilot's label of a 1–10 score: negative 1–3, neutral 4–7, positive 8–10."""
    return "negative" if score <= 3 else "neutral" if score <= 7 else "positive"


def length_bin(characters: int) -> int | None:
    """Bin b holds 10b+1 … 10b+10 characters; None outside 1–500."""
    return (characters - 1) // BIN_WIDTH if 1 <= characters <= MAX_CHARACTERS else None


def pilot_text(review: dict) -> str:
    return "\n".join(str(review[name]) for name in TEXT_FIELDS if review.get(name))


def _rank(seed: int, review_id: str) -> str:
    return hashlib.sha256(f"{seed}:{review_id}".encode("utf-8")).hexdigest()


def pilot_sample(varieties: pd.DataFrame, per_class: int, *, seed: int = 0) -> pd.DataFrame:
    """Up to `per_class` reviews per variety × length bin × sentiment class (the seeded-hash smallest), with the
    pilot's prompt; reviews over 500 characters are left out. `per_class` 0: no pilot, an empty sample."""
    if per_class < 0:
        raise ValueError(f"the pilot's sample per class and bin must be at least 0, got {per_class}")
    if per_class == 0 or varieties.empty:
        return pd.DataFrame({column: pd.Series(dtype="int64" if column in ("score", "characters", "length_bin")
                                               else "object") for column in SAMPLE_COLUMNS})
    frame = varieties.copy()
    frame["length_bin"] = [length_bin(int(n)) for n in frame["characters"]]
    frame = frame[frame["length_bin"].notna()].copy()
    frame["length_bin"] = frame["length_bin"].astype(int)
    frame["sentiment"] = [sentiment_of(int(score)) for score in frame["score"]]
    frame["rank"] = [_rank(seed, str(review_id)) for review_id in frame["review_id"]]
    frame = (frame.sort_values(["variety", "length_bin", "sentiment", "rank"])
             .groupby(["variety", "length_bin", "sentiment"], sort=False).head(per_class))
    frame["text"] = [pilot_text(review) for review in frame.to_dict("records")]
    frame["prompt"] = [PILOT_PROMPT.format(text=text) for text in frame["text"]]
    frame["score"] = frame["score"].astype(int)
    frame["characters"] = frame["characters"].astype(int)
    return frame.sort_values(["variety", "length_bin", "sentiment", "review_id"])[SAMPLE_COLUMNS].reset_index(drop=True)


def pilot_requests(sample: pd.DataFrame) -> list[GenerationRequest]:
    return [GenerationRequest.user(prompt, benchmark="reviews", task="sentiment_pilot", review_id=review_id)
            for prompt, review_id in zip(sample["prompt"], sample["review_id"])]


def parse_sentiment(answer: str | None) -> str | None:
    """The label the answer consists of (any case, quotes, brackets or a final full stop around it), else None."""
    text = unicodedata.normalize("NFKC", strip_reasoning(answer)).strip().strip("\"'‘’“”()[]`*").rstrip(".。")
    text = text.strip().lower()
    return text if text in CODES else None


def pilot_predictions(model: str, sample: pd.DataFrame, results: Sequence[GenerationResult]) -> pd.DataFrame:
    frame = sample[["review_id", "variety", "score", "sentiment", "characters", "length_bin"]].copy()
    frame.insert(0, "model", model)
    frame["response"] = [result.text for result in results]
    frame["outcome"] = [result.outcome for result in results]
    labels = [parse_sentiment(result.text) if result.outcome == "ok" else None for result in results]
    frame["predicted_sentiment"] = pd.array(labels, dtype="string")
    frame["status"] = answer_statuses(labels, results)
    frame["cached"] = [result.cached for result in results]
    return frame[PREDICTION_COLUMNS].reset_index(drop=True).astype(
        {"response": "object", "outcome": "object", "status": "object", "cached": "bool"})


def _row(model: str, variety: str, length_bin: int, sentiment: str, group: pd.DataFrame) -> dict:
    valid = group[group["status"] == "valid"]
    truth = valid["sentiment"].map(CODES).to_numpy(dtype=float)
    predicted = valid["predicted_sentiment"].map(CODES).to_numpy(dtype=float)
    n = len(valid)
    correct = int((truth == predicted).sum())
    return {"model": model, "variety": variety, "length_bin": length_bin, "bin_low": BIN_WIDTH * length_bin + 1,
            "bin_high": BIN_WIDTH * (length_bin + 1), "sentiment": sentiment, "n": n,
            "n_invalid": int(len(group) - n), "correct": correct,
            "accuracy": 100 * correct / n if n else np.nan,
            "mse": float(np.mean((truth - predicted) ** 2)) if n else np.nan}


def pilot_table(predictions: pd.DataFrame) -> pd.DataFrame:
    """Per model × variety × length bin: accuracy (%) and MSE per sentiment class and `overall`, over the valid
    answers (`n`), with the answers left out (`n_invalid`)."""
    rows = []
    for (model, variety, bin_), group in predictions.groupby(["model", "variety", "length_bin"], sort=True):
        for sentiment in LABELS:
            chosen = group[group["sentiment"] == sentiment]
            if not chosen.empty:
                rows.append(_row(model, variety, int(bin_), sentiment, chosen))
        rows.append(_row(model, variety, int(bin_), OVERALL, group))
    table = pd.DataFrame(rows, columns=PILOT_COLUMNS)
    return table.astype({**{column: "int64" for column in ("length_bin", "bin_low", "bin_high", "n", "n_invalid",
                                                              "correct")}, "accuracy": "float64", "mse": "float64"})
