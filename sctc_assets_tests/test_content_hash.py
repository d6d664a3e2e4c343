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
