"""A table's content hash: equal for equal tables, whatever process, run or dtype spelling produced them.

It is the data version of the assets whose table depends on more than their code and inputs, so re-materializing an
unchanged table leaves everything downstream up to date. Columns that differ between two runs of the same answers
(`VOLATILE_COLUMNS`: latency, whether the answer came from the cache) are left out.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

VOLATILE_COLUMNS = ("latency_s", "cached")


def _canonical(value: Any) -> Any:
    """A JSON-able form of one cell: missing values are one null, numbers compare by value, arrays as lists."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_canonical(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _canonical(item) for key, item in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if math.isnan(number):
            return None
        return int(number) if number.is_integer() and abs(number) < 2**53 else repr(number)
    if isinstance(value, (pd.Timestamp, np.datetime64)):
        return pd.Timestamp(value).isoformat()
    return str(value)


_MISSING_TEXT = "\x00<missing>"
_NUMBER_KINDS = {"boolean", "integer", "floating", "mixed-integer-float", "decimal"}


def _digest_numbers(values: pd.Series) -> bytes:
    if isinstance(values.dtype, np.dtype) and values.dtype.kind in "biuf":  # no Python objects: cast in C
        numbers = values.to_numpy(dtype="float64")
    elif isinstance(values.dtype, pd.api.extensions.ExtensionDtype) and values.dtype.kind in "biuf":
        numbers = values.to_numpy(dtype="float64", na_value=np.nan)  # Int64, boolean, Float64 (masked or Arrow)
    else:
        numbers = values.astype(object).where(values.notna(), np.nan).astype("float64").to_numpy()
    return b"n" + hashlib.sha256(np.where(np.isnan(numbers), np.inf, numbers).tobytes()).digest()


_BATCH = 1 << 16  # texts joined at a time: the hash is streamed, so memory stays a batch, not a column


def _digest_texts(texts: list) -> bytes:
    """Texts joined by a separator no text of these tables holds, missing ones as a marker no text equals."""
    digest = hashlib.sha256()
    for start in range(0, len(texts), _BATCH):
        batch = texts[start:start + _BATCH]
        try:
            joined = "\x1e".join(batch)  # no missing text in the batch, the common case, joined in C
        except TypeError:
            joined = "\x1e".join(text if isinstance(text, str) else _MISSING_TEXT for text in batch)
        if start:
            digest.update(b"\x1e")
        digest.update(joined.encode("utf-8", "surrogatepass"))
    return b"s" + digest.digest()


def _digest_arrow_texts(values: pd.Series) -> bytes | None:
    """`_digest_texts` of an Arrow-backed text column without a Python object per cell: the same bytes, joined by
    Arrow (its texts are UTF-8 already); None when the column is not Arrow-backed text."""
    dtype = values.dtype
    if not ((isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow") or isinstance(dtype, pd.ArrowDtype)):
        return None
    chunked = pa.chunked_array(values.array.__arrow_array__())
    if not (pa.types.is_string(chunked.type) or pa.types.is_large_string(chunked.type)):
        return None
    texts = pc.fill_null(chunked, _MISSING_TEXT).cast(pa.large_string())
    digest = hashlib.sha256()
    for start in range(0, len(texts), _BATCH):
        batch = texts[start:start + _BATCH].combine_chunks()
        joined = pc.binary_join(pa.LargeListArray.from_arrays(pa.array([0, len(batch)], pa.int64()), batch),
                                 pa.scalar("\x1e", pa.large_string()))
        if start:
            digest.update(b"\x1e")
        buffer = joined[0].as_buffer()  # None for one empty text
        if buffer is not None:
            digest.update(buffer)
    return b"s" + digest.digest()


def _item_text(cell: Any) -> str:
    try:
        return "\x1d" + "\x1f".join(cell)  # a list of texts, the common case, joined in C
    except TypeError:
        return "\x1d" + "\x1f".join(str(_canonical(item)) for item in cell)


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))


def _column_digest(values: pd.Series) -> bytes:
    """Numbers (ints, floats, booleans, however stored) are hashed vectorized, texts and lists (as the text of their
    items) joined; anything else (dicts, mixed cells) cell by cell as JSON."""
    if pd.api.types.is_bool_dtype(values.dtype) or pd.api.types.is_numeric_dtype(values.dtype):
        return _digest_numbers(values)
    kind = pd.api.types.infer_dtype(values, skipna=True)
    if kind in ("string", "empty"):
        digest = _digest_arrow_texts(values)
        return digest if digest is not None else _digest_texts(values.astype(object).tolist())
    if kind in _NUMBER_KINDS:
        return _digest_numbers(values)
    cells = values.tolist()
    if all(_is_sequence(cell) or _is_missing(cell) for cell in cells):
        return b"l" + _digest_texts([_item_text(cell) if _is_sequence(cell) else None for cell in cells])
    digest = hashlib.sha256(b"j")
    for cell in cells:
        digest.update(json.dumps(_canonical(cell), ensure_ascii=False, separators=(",", ":")).encode())
        digest.update(b"\x1e")
    return digest.digest()


def _is_missing(value: Any) -> bool:
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))


def table_hash(frame: pd.DataFrame, ignore: Iterable[str] = VOLATILE_COLUMNS) -> str:
    """sha256 over the column names (sorted) and each column's values in row order, as 16 hex digits.

    Values are compared by content, not dtype: `1` stored as int64 or Int64 or 1.0, and a missing text stored as
    None, NaN or pd.NA, hash alike, so a storage change of dtypes does not make every table look new.
    """
    skipped = set(ignore)
    digest = hashlib.sha256(f"rows={len(frame)}".encode())
    for name in sorted((str(column) for column in frame.columns if str(column) not in skipped)):
        digest.update(name.encode() + b"\x1f")
        digest.update(_column_digest(frame[name]))
    return digest.hexdigest()[:16]
