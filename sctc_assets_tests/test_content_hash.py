"""The content hash behind the data versions: equal tables hash alike whatever their dtypes, any change shows."""

import numpy as np
import pandas as pd

from sctc_assets.lib.content_hash import table_hash
from sctc_assets.resources.io_manager import ParquetIOManager


def _answers() -> pd.DataFrame:
    return pd.DataFrame({
        "model": ["a", "a", "a"], "trial": [0, 1, 2], "response": ["复印件", None, "影本"],
        "outcome": ["ok", "error", "ok"], "input_tokens": pd.array([3, None, 4], dtype="Int64"),
        "expected": [["复印件"], ["影本", "複印品"], []], "cached": [False, False, True], "latency_s": [0.1, 2.0, None],
    })


def test_the_same_table_hashes_alike_through_storage_and_across_dtypes(tmp_path):
    frame = _answers()
    path = tmp_path / "t.parquet"
    frame.to_parquet(path, index=False)
    stored = pd.read_parquet(path)
    assert table_hash(stored) == table_hash(frame)
    respelled = frame.astype({"response": "string", "input_tokens": "float64"})
    respelled["expected"] = [np.array(value, dtype=object) for value in frame["expected"]]
    assert table_hash(respelled) == table_hash(frame)
    assert table_hash(frame[list(reversed(frame.columns))]) == table_hash(frame)


def test_timing_and_cache_columns_do_not_count_but_every_answer_does():
    frame = _answers()
    replayed = frame.assign(cached=True, latency_s=None)
    assert table_hash(replayed) == table_hash(frame)
    for change in (frame.assign(response=["复印件", None, "影印本"]), frame.assign(outcome=["ok", "refusal", "ok"]),
                   frame.assign(expected=[["复印件"], ["影本"], []]), frame.iloc[:2], frame.iloc[[1, 0, 2]],
                   frame.rename(columns={"trial": "sample"}), frame.assign(input_tokens=pd.array([3, 0, 4], "Int64"))):
        assert table_hash(change) != table_hash(frame)


def test_a_missing_text_hashes_alike_whether_none_nan_or_na():
    texts = [pd.DataFrame({"response": pd.Series(["a", missing], dtype=dtype)})
             for missing, dtype in ((None, object), (np.nan, object), (pd.NA, "string"))]
    assert len({table_hash(frame) for frame in texts}) == 1
    assert table_hash(pd.DataFrame({"response": ["a", ""]})) != table_hash(texts[0])


def test_through_the_projects_io_manager(tmp_path):
    """What the assets hash is what the IO manager stores and the next run reads back."""
    import dagster as dg

    manager = ParquetIOManager(base_dir=str(tmp_path))
    frame = _answers()
    key = dg.AssetKey("table")
    manager.handle_output(dg.build_output_context(asset_key=key), frame)
    loaded = manager.load_input(dg.build_input_context(asset_key=key))
    assert table_hash(loaded) == table_hash(frame)


def _reference_column_digest(values: pd.Series) -> bytes:
    """The column digest as first written (a Python object per cell), which the vectorized one must equal."""
    import hashlib

    from sctc_assets.lib import content_hash as ch

    def numbers(column: pd.Series) -> bytes:
        floats = column.astype(object).where(column.notna(), np.nan).astype("float64").to_numpy()
        return b"n" + hashlib.sha256(np.where(np.isnan(floats), np.inf, floats).tobytes()).digest()

    def texts(items: list) -> bytes:
        joined = "\x1e".join(text if isinstance(text, str) else ch._MISSING_TEXT for text in items)
        return b"s" + hashlib.sha256(joined.encode("utf-8", "surrogatepass")).digest()

    if pd.api.types.is_bool_dtype(values.dtype) or pd.api.types.is_numeric_dtype(values.dtype):
        return numbers(values)
    kind = pd.api.types.infer_dtype(values, skipna=True)
    if kind in ("string", "empty"):
        return texts(values.astype(object).tolist())
    if kind in ch._NUMBER_KINDS:
        return numbers(values)
    return ch._column_digest(values)  # lists and mixed cells: unchanged code


def test_the_vectorized_column_digests_equal_the_cell_by_cell_ones(monkeypatch):
    """Arrow-backed and object texts with missing values (None, NaN, pd.NA) anywhere, including at the edges of
    the batches the hash streams, empty and all-missing columns, and every number dtype."""
    import pyarrow as pa

    from sctc_assets.lib import content_hash as ch

    monkeypatch.setattr(ch, "_BATCH", 4)  # many batches on a small column
    rng = np.random.default_rng(0)
    words = ["复印件", "", "影本", "a\x1fb", "x" * 50, "複印品", " "]
    for rows in (0, 1, 3, 4, 5, 8, 9, 37):
        cells = [words[i] for i in rng.integers(0, len(words), rows)]
        with_missing = [None if i % 4 == 3 else cell for i, cell in enumerate(cells)]
        columns = {
            "object": pd.Series(cells, dtype=object),
            "object_none": pd.Series(with_missing, dtype=object),
            "object_nan": pd.Series([np.nan if c is None else c for c in with_missing], dtype=object),
            "string_arrow": pd.Series(with_missing, dtype="string[pyarrow]"),
            "string_python": pd.Series(with_missing, dtype="string[python]"),
            "str_nan": pd.Series(with_missing, dtype=pd.StringDtype("pyarrow", na_value=np.nan)),
            "arrow_dtype": pd.Series(with_missing, dtype=pd.ArrowDtype(pa.string())),
            "arrow_large": pd.Series(with_missing, dtype=pd.ArrowDtype(pa.large_string())),
            "all_missing": pd.Series([None] * rows, dtype="string[pyarrow]"),
            "all_missing_object": pd.Series([np.nan] * rows, dtype=object),
            "one_empty_text": pd.Series([""] * rows, dtype="string[pyarrow]"),
            "chunked": pd.Series(pd.arrays.ArrowStringArray(pa.chunked_array(
                [pa.array(with_missing[:rows // 2], pa.string()), pa.array(with_missing[rows // 2:], pa.string())]))),
            "int64": pd.Series(rng.integers(-5, 5, rows), dtype="int64"),
            "uint64": pd.Series([2**63 + 12345] * rows, dtype="uint64"),
            "Int64": pd.Series([None if i % 3 == 0 else i for i in range(rows)], dtype="Int64"),
            "bool": pd.Series([i % 2 == 0 for i in range(rows)], dtype=bool),
            "boolean": pd.Series([None if i % 3 == 0 else i % 2 == 0 for i in range(rows)], dtype="boolean"),
            "float32": pd.Series(rng.random(rows), dtype="float32"),
            "float64_nan": pd.Series([np.nan if i % 2 else -0.0 for i in range(rows)], dtype="float64"),
            "Float64": pd.Series([None if i % 2 else 0.1 * i for i in range(rows)], dtype="Float64"),
            "arrow_int": pd.Series([None if i % 2 else i for i in range(rows)], dtype=pd.ArrowDtype(pa.int64())),
            "object_ints": pd.Series([None if i % 2 else i for i in range(rows)], dtype=object),
        }
        for name, column in columns.items():
            assert ch._column_digest(column) == _reference_column_digest(column), (name, rows)
    surrogate = pd.Series(["a\ud800b", None], dtype=object)  # a lone surrogate survives in object columns only
    assert ch._column_digest(surrogate) == _reference_column_digest(surrogate)
