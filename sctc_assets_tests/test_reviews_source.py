"""Loading review exports: formats, URL, Hugging Face datasets, column mapping and the errors that name the fault."""

from __future__ import annotations

import http.server
import threading
from functools import partial
from pathlib import Path

import pandas as pd
import pytest

from sctc_assets.lib.reviews.source import (
    REVIEW_COLUMNS,
    SHIPPED_REVIEWS,
    ReviewDataError,
    canonical_reviews,
    read_file,
    read_hf_dataset,
)

EXPORT = pd.DataFrame({
    "hotel__booking_id": [311092, 311092, 42],
    "user_nationality": ["tw", "cn", "TW"],
    "score": [10.0, 7.0, 3.0],
    "review_title": [None, "还行", "  "],
    "positive_review": ["櫃檯很友善", "位置方便", None],
    "negative_review": [None, "早餐一般", "冷氣很吵"],
    "review_time": ["2023-05-15 10:55:59+00:00", "2023-06-01 08:00:00+00:00", None],
})


def _load(path: Path, **kwargs) -> pd.DataFrame:
    frame, origin = read_file(str(path), path.parent / "cache", **kwargs)
    return canonical_reviews(frame, origin)


def test_csv_parquet_and_jsonl_give_the_same_table(tmp_path):
    EXPORT.to_csv(tmp_path / "reviews.csv", index=False)
    EXPORT.to_parquet(tmp_path / "reviews.parquet", index=False)
    EXPORT.to_json(tmp_path / "reviews.jsonl", orient="records", lines=True, force_ascii=False)
    EXPORT.to_csv(tmp_path / "export.txt", index=False)
    tables = [_load(tmp_path / name) for name in ("reviews.csv", "reviews.parquet", "reviews.jsonl")]
    tables.append(_load(tmp_path / "export.txt", declared_format="csv"))
    for table in tables:
        pd.testing.assert_frame_equal(table, tables[0])
    first = tables[0]
    assert list(first.columns) == REVIEW_COLUMNS
    assert first["review_id"].tolist() == ["0", "1", "2"]  # no id column: the row numbers
    assert first["hotel_id"].tolist() == ["311092", "311092", "42"]
    assert first["score"].tolist() == [10, 7, 3]
    assert first["title"].tolist() == ["", "还行", ""]
    assert first["negative"].tolist() == ["", "早餐一般", "冷氣很吵"]


def test_an_unnamed_format_is_refused(tmp_path):
    EXPORT.to_csv(tmp_path / "export.txt", index=False)
    with pytest.raises(ReviewDataError, match="export.txt: cannot tell the format"):
        _load(tmp_path / "export.txt")


def test_missing_columns_are_named_with_what_was_looked_for(tmp_path):
    EXPORT.drop(columns=["score", "user_nationality"]).to_csv(tmp_path / "reviews.csv", index=False)
    with pytest.raises(ReviewDataError) as error:
        _load(tmp_path / "reviews.csv")
    message = str(error.value)
    assert "reviews.csv" in message
    assert "nationality (column 'user_nationality' or 'nationality')" in message
    assert "score (column 'score')" in message
    assert "hotel_id" not in message.split("found")[0]


def test_a_column_mapping_reads_other_exports_and_checks_its_fields():
    frame = pd.DataFrame({"id": ["a", "b"], "hotel": ["h1", "h1"], "region": ["tw", "cn"], "rating": [9, 8],
                          "title": ["x", "y"], "pros": ["好", "好"], "cons": ["", ""]})
    mapping = {"review_id": "id", "hotel_id": "hotel", "nationality": "region", "score": "rating",
               "positive": "pros", "negative": "cons"}
    table = canonical_reviews(frame, "mine.csv", mapping)
    assert table["review_id"].tolist() == ["a", "b"] and table["positive"].tolist() == ["好", "好"]
    assert table["review_time"].isna().all()
    with pytest.raises(ReviewDataError, match="unknown field"):
        canonical_reviews(frame, "mine.csv", {"stars": "rating"})
    with pytest.raises(ReviewDataError, match=r"score \(column 'stars'\)"):
        canonical_reviews(frame, "mine.csv", {**mapping, "score": "stars"})


def test_a_mapped_optional_column_that_is_absent_is_an_error_not_a_fallback():
    frame = EXPORT.assign(rid=["a", "b", "c"])
    with pytest.raises(ReviewDataError) as error:
        canonical_reviews(frame, "export.csv", {"review_id": "rid_typo"})
    message = str(error.value)
    assert message.startswith("export.csv: mapped column(s) not found for review_id (column 'rid_typo')")
    assert "'rid'" in message.split("found")[-1]
    with pytest.raises(ReviewDataError, match=r"export.csv: mapped .* review_time \(column 'when'\)"):
        canonical_reviews(EXPORT, "export.csv", {"review_time": "when"})
    both = EXPORT.drop(columns=["score"])
    with pytest.raises(ReviewDataError, match=r"required column\(s\) for score .*; mapped column\(s\) not found for "
                                              r"review_id \(column 'rid_typo'\)"):
        canonical_reviews(both, "export.csv", {"review_id": "rid_typo"})
    # Unmapped optional fields still fall back: no id column gives row numbers.
    assert canonical_reviews(EXPORT, "export.csv")["review_id"].tolist() == ["0", "1", "2"]


def test_bad_scores_blank_ids_and_repeated_ids_name_their_rows():
    frame = EXPORT.assign(score=["10", "7.5", "11"], review_id=["a", "b", "a"])
    frame.loc[1, "hotel__booking_id"] = None
    with pytest.raises(ReviewDataError) as error:
        canonical_reviews(frame, "export.csv")
    message = str(error.value)
    assert message.startswith("export.csv: ")
    assert "hotel_id (column 'hotel__booking_id') is empty in row(s) 2" in message
    assert "whole number from 1 to 10: row(s) 2, 3 have ['7.5', '11']" in message
    assert "review_id (column 'review_id') repeats in row(s) 1, 3" in message


def test_the_shipped_set_is_readable_and_labelled_fictional():
    table = _load(SHIPPED_REVIEWS)
    assert len(table) == 32 and table["review_id"].is_unique
    assert set(table["nationality"].dropna().str.lower()) == {"tw", "cn", "hk", "sg"}
    assert "fictional" in (SHIPPED_REVIEWS.parent / "README.md").read_text(encoding="utf-8")


def test_a_url_is_downloaded_once(tmp_path):
    served = tmp_path / "site"
    served.mkdir()
    EXPORT.to_csv(served / "reviews.csv", index=False)
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    requests: list[str] = []

    class Logged(http.server.ThreadingHTTPServer):
        def finish_request(self, request, client_address):
            requests.append(str(client_address))
            super().finish_request(request, client_address)

    server = Logged(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/reviews.csv"
        for _ in range(2):
            frame, origin = read_file(url, tmp_path / "cache")
            assert origin == url and len(canonical_reviews(frame, origin)) == 3
    finally:
        server.shutdown()
        server.server_close()
    assert len(requests) == 1


def test_a_hugging_face_dataset_loads_through_load_dataset(tmp_path, monkeypatch):
    import datasets

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    folder = tmp_path / "hotel-reviews"
    (folder / "data").mkdir(parents=True)
    records = EXPORT.rename(columns={"hotel__booking_id": "hotel", "user_nationality": "country"})
    datasets.Dataset.from_pandas(records.iloc[:2]).to_parquet(folder / "data" / "train-00000-of-00001.parquet")
    datasets.Dataset.from_pandas(records.iloc[2:]).to_parquet(folder / "data" / "test-00000-of-00001.parquet")
    frame, origin = read_hf_dataset(str(folder), split="train")
    table = canonical_reviews(frame, origin, {"hotel_id": "hotel", "nationality": "country"})
    assert origin == f"{folder}[train]"
    assert table["nationality"].tolist() == ["tw", "cn"] and table["hotel_id"].tolist() == ["311092", "311092"]
    test_split, _ = read_hf_dataset(str(folder), split="test")
    assert len(test_split) == 1
    with pytest.raises(ReviewDataError, match=r"no-such-dataset\[train\]: cannot load"):
        read_hf_dataset(str(tmp_path / "no-such-dataset"))
