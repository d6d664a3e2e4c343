"""Load a review export (CSV, Parquet, JSON lines; a path, a URL or a Hugging Face dataset) into the canonical
review table, with errors that name the file, the column and the rows at fault.

Canonical fields (the paper's Table 4): `hotel_id`, `nationality` (the reviewer's self-declared region),
`score` (1–10), `title`, `positive`, `negative`, `review_time`, plus `review_id`. Each is read from the column the
caller maps it to, else from the Booking.com export's name (Table 4: `hotel__booking_id`, `user_nationality`,
`review_title`, `positive_review`, `negative_review`, …), else from a column with the canonical name. A mapped
column that is absent is an error, even for the optional fields; only unmapped optional fields fall back.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from sctc_assets.lib.paths import REPO_DATA_DIR
from sctc_assets.lib.text_files import check_utf8
from sctc_assets.lib.upstream_source import download, is_url

REVIEWS_ENV_VAR = "SCTC_REVIEWS"
SHIPPED_REVIEWS = REPO_DATA_DIR / "reviews" / "hotel_reviews.csv"

TEXT_FIELDS = ("title", "positive", "negative")
REQUIRED_FIELDS = ("hotel_id", "nationality", "score", *TEXT_FIELDS)
OPTIONAL_FIELDS = ("review_id", "review_time")
FIELDS = REQUIRED_FIELDS + OPTIONAL_FIELDS
BOOKING_COLUMNS = {
    "hotel_id": "hotel__booking_id", "nationality": "user_nationality", "score": "score", "title": "review_title",
    "positive": "positive_review", "negative": "negative_review", "review_time": "review_time",
    "review_id": "review_id",
}
REVIEW_COLUMNS = ["review_id", "hotel_id", "nationality", "score", "title", "positive", "negative", "review_time"]
_FORMATS = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl",
            ".ndjson": "jsonl", ".json": "jsonl"}


class ReviewDataError(ValueError):
    """The review export cannot be used as it is; the message names the file, the column or the rows."""


def default_location() -> str:
    """`$SCTC_REVIEWS`, else the review set shipped in `data/reviews/`."""
    return os.environ.get(REVIEWS_ENV_VAR) or str(SHIPPED_REVIEWS)


def file_format(path: Path, declared: str | None = None) -> str:
    if declared:
        if declared not in set(_FORMATS.values()):
            raise ReviewDataError(f"unknown review file format {declared!r}; use csv, tsv, parquet or jsonl")
        return declared
    suffixes = [suffix.lower() for suffix in path.suffixes if suffix.lower() not in (".gz", ".bz2", ".xz", ".zip")]
    if suffixes and suffixes[-1] in _FORMATS:
        return _FORMATS[suffixes[-1]]
    raise ReviewDataError(f"{path}: cannot tell the format from the name; name it .csv, .tsv, .parquet or .jsonl "
                          "(or give the format)")


def read_file(location: str, download_folder: Path | None = None,
              declared_format: str | None = None) -> tuple[pd.DataFrame, str]:
    """The raw table of a local file or URL (downloaded once into `download_folder`, default the machine's download
    cache) and the name errors should use."""
    path = download(location, download_folder) if is_url(location) else Path(location).expanduser()
    if not path.is_file():
        raise ReviewDataError(f"review file not found: {path}")
    kind = file_format(path, declared_format)
    try:
        if kind in ("csv", "tsv"):
            # Strings throughout: ids such as 0311 or 311092 must not turn into numbers.
            frame = pd.read_csv(path, dtype=str, sep="\t" if kind == "tsv" else ",")
        elif kind == "parquet":
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_json(path, lines=True, dtype=False)
    except UnicodeDecodeError as exc:
        check_utf8(path, name=location, error=ReviewDataError)
        raise ReviewDataError(f"{location}: unreadable {kind} file ({type(exc).__name__}: {exc})") from exc
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise ReviewDataError(f"{location}: unreadable {kind} file ({type(exc).__name__}: {exc})") from exc
    frame.columns = [str(column).lstrip("\ufeff") for column in frame.columns]
    return frame, location


def read_hf_dataset(dataset: str, *, split: str = "train", config_name: str | None = None) -> tuple[pd.DataFrame, str]:
    """A Hugging Face dataset (hub id or local folder) through `datasets.load_dataset`."""
    import datasets

    name = f"{dataset}[{split}]" + (f" (config {config_name})" if config_name else "")
    try:
        loaded = datasets.load_dataset(dataset, config_name, split=split)
    except Exception as exc:  # datasets raises many unrelated types for "not found" and "offline"
        raise ReviewDataError(f"Hugging Face dataset {name}: cannot load ({type(exc).__name__}: {exc})") from exc
    return loaded.to_pandas(), name


def _column_for(field: str, columns: Mapping[str, str], present: set[str]) -> str | None:
    if field in columns:
        return columns[field] if columns[field] in present else None
    for candidate in (BOOKING_COLUMNS[field], field):
        if candidate in present:
            return candidate
    return None


def _identifiers(values: pd.Series) -> pd.Series:
    """Ids as strings, with whole floats (a numeric column that had gaps) written without '.0'."""
    if pd.api.types.is_float_dtype(values):
        whole = values.dropna()
        if (whole == np.floor(whole)).all():
            values = values.astype("Int64")
    return values.astype("string").str.strip()


def _text(values: pd.Series) -> pd.Series:
    return values.astype("string").fillna("").str.strip().astype(object)


def _rows(mask: pd.Series, limit: int = 5) -> str:
    rows = [str(int(index) + 1) for index in mask[mask].index[:limit]]
    more = int(mask.sum()) - len(rows)
    return ", ".join(rows) + (f" and {more} more" if more > 0 else "")


def canonical_reviews(frame: pd.DataFrame, source: str, columns: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The canonical review table (`REVIEW_COLUMNS`), validated; row numbers in errors count data rows from 1."""
    columns = dict(columns or {})
    unknown = sorted(set(columns) - set(FIELDS))
    if unknown:
        raise ReviewDataError(f"column mapping names unknown field(s) {', '.join(unknown)}; fields are {', '.join(FIELDS)}")
    present = set(frame.columns)
    chosen = {field: _column_for(field, columns, present) for field in FIELDS}
    missing = [field for field in REQUIRED_FIELDS if chosen[field] is None]
    # An optional field the user mapped must exist too: a typo would otherwise fall back silently (row numbers as ids).
    mistyped = [field for field in OPTIONAL_FIELDS if field in columns and chosen[field] is None]
    if missing or mistyped:
        parts = []
        if missing:
            parts.append("missing required column(s) for " + "; ".join(
                f"{field} (column {columns[field]!r})" if field in columns
                else f"{field} (column {' or '.join(map(repr, dict.fromkeys((BOOKING_COLUMNS[field], field))))})"
                for field in missing))
        if mistyped:
            parts.append("mapped column(s) not found for " + "; ".join(
                f"{field} (column {columns[field]!r})" for field in mistyped))
        raise ReviewDataError(f"{source}: {'; '.join(parts)}; found {', '.join(map(repr, frame.columns))}."
                              " Map fields to your columns with FIELD=COLUMN (sctc run --reviews-columns).")
    frame = frame.reset_index(drop=True)
    out = pd.DataFrame(index=frame.index)
    out["review_id"] = (_identifiers(frame[chosen["review_id"]]) if chosen["review_id"]
                        else pd.Series(frame.index.astype(str), index=frame.index, dtype="string"))
    out["hotel_id"] = _identifiers(frame[chosen["hotel_id"]])
    nationality = frame[chosen["nationality"]].astype("string").str.strip()
    out["nationality"] = nationality.mask(nationality == "")
    score = pd.to_numeric(frame[chosen["score"]], errors="coerce")
    out["score"] = score
    for field in TEXT_FIELDS:
        out[field] = _text(frame[chosen[field]])
    out["review_time"] = (frame[chosen["review_time"]].astype("string") if chosen["review_time"]
                          else pd.Series(pd.NA, index=frame.index, dtype="string"))

    problems = []
    for field in ("review_id", "hotel_id"):
        blank = out[field].isna() | (out[field] == "")
        if blank.any():
            problems.append(f"{field} (column {chosen[field]!r}) is empty in row(s) {_rows(blank)}")
    bad_score = score.isna() | (score < 1) | (score > 10) | (score != np.floor(score))
    if bad_score.any():
        shown = frame.loc[bad_score, chosen["score"]].head(3).tolist()
        problems.append(f"score (column {chosen['score']!r}) must be a whole number from 1 to 10: row(s) "
                        f"{_rows(bad_score)} have {shown}")
    duplicated = out["review_id"].duplicated(keep=False) & out["review_id"].notna()
    if duplicated.any():
        problems.append(f"review_id (column {chosen['review_id']!r}) repeats in row(s) {_rows(duplicated)}: "
                        f"{sorted(out.loc[duplicated, 'review_id'].unique())[:3]}")
    if problems:
        raise ReviewDataError(f"{source}: " + "; ".join(problems))
    out["score"] = score.astype("int64")
    return out[REVIEW_COLUMNS]


def is_empty(reviews: pd.DataFrame) -> pd.Series:
    """No title, positive or negative text (the paper keeps only reviews with at least one of them)."""
    return (reviews[list(TEXT_FIELDS)] == "").all(axis=1)
