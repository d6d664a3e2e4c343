"""A person's ratings of reviews (the paper's human studies, Appendix B), checked row by row, stored under the data
folder, and compared with the reviews' stars and with the models' predictions.

A ratings file is CSV (or TSV, by its `.tsv` name) with one row per rater × review: `rater`, `review_id`, optionally
`pair_id` (checked against the pair table), and one or more of the questions below; an empty cell is a question not
asked. Rows are counted as a spreadsheet shows them, the header being row 1.

B.1 (data quality, 5-point Likert): `quality` (the review is easy to read and its writing is comparable to native
speakers' online reviews) and `content_agreement` (the score reflects the content). B.2 (score prediction):
`readability` (1–5), `nativeness` (1 a less proficient non-native speaker, 2 a proficient non-native or native
speaker, 3 machine translation, 4 not sure) and `predicted_score` (1–10, the stars the person expects).

Agreement (`agreement_table`): the Likert questions as mean and SD per variety (the paper's "4.18 (SD=0.44)"),
`nativeness` as the share of answers 2, and `predicted_score` against the stars (accuracy %, MSE, as the model
metrics) and against each model's valid prediction of the same review as written, per format (exact agreement %,
mean squared difference and Cohen's κ with quadratic weights over the ten scores: the scale is ordinal and the two
sides share it, so a near miss counts as partial agreement; Spearman would ignore a constant offset). Each rater's
rows and all raters pooled (`rater` `all`: every rating one observation).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sctc_assets.lib.paths import data_dir


@dataclass(frozen=True)
class Question:
    study: str
    text: str
    low: int
    high: int


QUESTIONS = {
    "quality": Question("B.1", "easy to read, writing comparable to native speakers' online reviews", 1, 5),
    "content_agreement": Question("B.1", "the score (1-10) reflects the content", 1, 5),
    "readability": Question("B.2", "readability", 1, 5),
    "nativeness": Question("B.2", "written by: 1 less proficient non-native, 2 proficient or native, 3 machine "
                                  "translation, 4 not sure", 1, 4),
    "predicted_score": Question("B.2", "the score the person predicts (1 worst, 10 best)", 1, 10),
}
LIKERT = ("quality", "content_agreement", "readability")
NATIVE_ANSWER = 2
REQUIRED = ("rater", "review_id")
OPTIONAL = ("pair_id",)
ALL_RATERS = "all"
STORED_COLUMNS = ["rater", "review_id", "pair_id", *QUESTIONS, "source", "row"]
AGREEMENT_COLUMNS = ["rater", "variety", "question", "against", "format", "n", "mean", "sd", "share", "accuracy",
                     "mse", "weighted_kappa"]
RATINGS_FOLDER = "review_ratings"


class RatingsError(ValueError):
    """Bad rows of a ratings file, one line each naming file, row and column."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


def ratings_dir() -> Path:
    """Where imported ratings are kept for the next run: `<data folder>/review_ratings/`."""
    return data_dir() / RATINGS_FOLDER


def _whole(text: str) -> int | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() else None


def read_ratings(path: Path, review_ids: set[str], pairs: dict[int, set[str]] | None = None) -> pd.DataFrame:
    """The file's ratings (`STORED_COLUMNS`), or a `RatingsError` listing every bad row: an unknown column or
    review or pair id, a review outside its pair, a value that is not a whole number on its question's scale, a
    missing rater, a row without a rating, a rater rating a review twice."""
    name = path.name
    frame = pd.read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",", dtype=str, keep_default_na=False)
    frame.columns = [str(column).strip() for column in frame.columns]
    known = (*REQUIRED, *OPTIONAL, *QUESTIONS)
    problems = [f"{name}: row 1, column {column!r}: unknown column (columns: {', '.join(known)})"
                for column in frame.columns if column not in known]
    problems += [f"{name}: row 1, column {column}: missing (a ratings file needs {', '.join(REQUIRED)})"
                 for column in REQUIRED if column not in frame.columns]
    asked = [question for question in QUESTIONS if question in frame.columns]
    if not asked:
        problems.append(f"{name}: row 1: no rating column (one or more of {', '.join(QUESTIONS)})")
    if problems:
        raise RatingsError(problems)
    rows, seen = [], {}
    for index, record in enumerate(frame.to_dict("records")):
        row = index + 2  # the header is row 1
        where = f"{name}: row {row}"
        rater, review = record["rater"].strip(), record["review_id"].strip()
        if not rater:
            problems.append(f"{where}, column rater: missing rater")
        if review not in review_ids:
            problems.append(f"{where}, column review_id: unknown review id {review!r}")
        pair_id = None
        if record.get("pair_id", "").strip():
            pair_id = _whole(record["pair_id"].strip())
            if pair_id is None or pairs is None or pair_id not in pairs:
                problems.append(f"{where}, column pair_id: unknown pair id {record['pair_id'].strip()!r}")
            elif review not in pairs[pair_id]:
                problems.append(f"{where}, column pair_id: review {review!r} is not in pair {pair_id}")
        values = {}
        for question in asked:
            text = record[question].strip()
            if not text:
                continue
            scale = QUESTIONS[question]
            value = _whole(text)
            if value is None or not scale.low <= value <= scale.high:
                problems.append(f"{where}, column {question}: {text!r} is not a whole number from {scale.low} to "
                                f"{scale.high}")
            else:
                values[question] = value
        if not values and not any(record[question].strip() for question in asked):
            problems.append(f"{where}, column {asked[0]}: no rating in the row")
        if rater and (rater, review) in seen:
            problems.append(f"{where}, column review_id: rater {rater!r} rated review {review!r} already in row "
                            f"{seen[(rater, review)]}")
        seen.setdefault((rater, review), row)
        rows.append({"rater": rater, "review_id": review, "pair_id": pair_id, **values, "source": name, "row": row})
    if problems:
        raise RatingsError(problems)
    table = pd.DataFrame(rows, columns=STORED_COLUMNS)
    for column in ("pair_id", *QUESTIONS):
        table[column] = pd.array(table[column].tolist(), dtype="Int64")
    table["row"] = table["row"].astype("int64")
    return table


def store_ratings(table: pd.DataFrame, source: Path, folder: Path | None = None) -> Path:
    """Keep the checked ratings as `<folder>/<file stem>.parquet` (importing a file of the same name again
    replaces it)."""
    folder = folder or ratings_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{source.stem}.parquet"
    table.to_parquet(target, index=False)
    return target


def stored_ratings(folder: Path | None = None) -> pd.DataFrame:
    """Every imported ratings file, one table (empty, with its columns, when none was imported)."""
    folder = folder or ratings_dir()
    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if not files:
        return pd.DataFrame(columns=STORED_COLUMNS)
    return pd.concat([pd.read_parquet(path) for path in files], ignore_index=True)


def weighted_kappa(a, b, low: int = 1, high: int = 10) -> float:
    """Cohen's κ with quadratic weights over the categories low … high (NaN when chance agreement leaves no room:
    both raters constant)."""
    a, b = np.asarray(a, dtype=int) - low, np.asarray(b, dtype=int) - low
    k = high - low + 1
    if not len(a):
        return float("nan")
    observed = np.zeros((k, k))
    np.add.at(observed, (a, b), 1)
    observed /= len(a)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    weights = (np.subtract.outer(np.arange(k), np.arange(k)) ** 2) / (k - 1) ** 2
    denominator = float((weights * expected).sum())
    return 1 - float((weights * observed).sum()) / denominator if denominator > 0 else float("nan")


def _empty_row(rater: str, variety: str, question: str, against: str | None, fmt: str | None, n: int) -> dict:
    return {"rater": rater, "variety": variety, "question": question, "against": against, "format": fmt, "n": n,
            "mean": np.nan, "sd": np.nan, "share": np.nan, "accuracy": np.nan, "mse": np.nan,
            "weighted_kappa": np.nan}


def _compare(row: dict, person: np.ndarray, other: np.ndarray) -> dict:
    if len(person):
        row.update(accuracy=100 * float((person == other).mean()), mse=float(((person - other) ** 2).mean()),
                   weighted_kappa=weighted_kappa(person, other))
    return row


def agreement_table(ratings: pd.DataFrame, varieties: pd.DataFrame,
                    predictions: pd.DataFrame | None = None) -> pd.DataFrame:
    """`AGREEMENT_COLUMNS`, per rater and `all` × variety of the rated reviews (ratings of reviews outside
    `varieties` are left out): Likert means and SDs, the share of native-like answers, and `predicted_score`
    against the stars (`against` `stars`) and each model's valid predictions as written (`against` the model, per
    format)."""
    if ratings.empty:
        return _typed(pd.DataFrame(columns=AGREEMENT_COLUMNS))
    reviews = varieties.set_index("review_id")[["variety", "score"]]
    rated = ratings[ratings["review_id"].isin(reviews.index)].copy()
    rated["variety"] = rated["review_id"].map(reviews["variety"])
    rated["stars"] = rated["review_id"].map(reviews["score"]).astype(int)
    models = pd.DataFrame()
    if predictions is not None and not predictions.empty:
        models = predictions[(predictions["version"] == "original") & (predictions["status"] == "valid")]
    rows = []
    groups = [(rater, rated[rated["rater"] == rater]) for rater in sorted(rated["rater"].unique())]
    for rater, by_rater in groups + [(ALL_RATERS, rated)]:
        for variety in sorted(by_rater["variety"].unique()):
            chosen = by_rater[by_rater["variety"] == variety]
            for question in LIKERT:
                values = chosen[question].dropna().to_numpy(dtype=float)
                if len(values):
                    rows.append({**_empty_row(rater, variety, question, None, None, len(values)),
                                 "mean": float(values.mean()),
                                 "sd": float(values.std(ddof=1)) if len(values) > 1 else np.nan})
            native = chosen["nativeness"].dropna().to_numpy(dtype=int)
            if len(native):
                rows.append({**_empty_row(rater, variety, "nativeness", None, None, len(native)),
                             "share": 100 * float((native == NATIVE_ANSWER).mean())})
            scored = chosen[chosen["predicted_score"].notna()]
            if scored.empty:
                continue
            person = scored["predicted_score"].to_numpy(dtype=int)
            rows.append(_compare(_empty_row(rater, variety, "predicted_score", "stars", None, len(person)), person,
                                 scored["stars"].to_numpy(dtype=int)))
            for (model, fmt), answers in (models.groupby(["model", "format"], sort=True) if not models.empty else []):
                by_review = answers.drop_duplicates("review_id").set_index("review_id")["prediction"]
                both = scored[scored["review_id"].isin(by_review.index)]
                person = both["predicted_score"].to_numpy(dtype=int)
                machine = both["review_id"].map(by_review).to_numpy(dtype=int)
                rows.append(_compare(_empty_row(rater, variety, "predicted_score", model, fmt, len(person)), person,
                                     machine))
    return _typed(pd.DataFrame(rows, columns=AGREEMENT_COLUMNS))


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    """Counts as integers and measures as floats, also in an empty table."""
    return table.astype({"n": "int64", **{column: "float64" for column in AGREEMENT_COLUMNS[6:]}})
