"""Reading text files that must be UTF-8 (registries, upstream data, review exports), with an error that names
the file, where decoding failed, and the encoding the bytes look like."""

from __future__ import annotations

from pathlib import Path

_GUESS_BYTES = 1 << 16


# The most frequent characters of written Chinese in both scripts: text decoded with its real encoding is full of
# them, the same bytes decoded with the other Chinese encoding hardly contain any.
_FREQUENT_HAN = frozenset("的一是不了在人有我他这這个個们們中来來上大为為和国國地到以说說时時要就出会會可也你对對生能而子那"
                          "得于於着著下自之年过過发發后後作里裡用道行所然家种種事成方多经經么麼去法学學如都同现現当當没沒"
                          "动動面起看定天分还還进進好小部其些主样樣理心她本前开開但因只从從想实實台湾灣型试試")
_CHINESE_ENCODINGS = ("big5", "gb18030")


def _frequent_share(text: str) -> float:
    han = [char for char in text if "\u4e00" <= char <= "\u9fff"]
    return sum(char in _FREQUENT_HAN for char in han) / len(han) if han else 0.0


def encoding_guess(data: bytes) -> str:
    """The encoding `data` most likely is in: a byte-order mark, else Big5 or GB18030 when the bytes read as
    ordinary Chinese in one of them, else charset-normalizer's guess on the first 64 KiB."""
    head = data[:_GUESS_BYTES]
    for mark, name in ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"), (b"\xff\xfe", "utf-16"),
                       (b"\xfe\xff", "utf-16")):
        if head.startswith(mark):
            return name
    scores = {}
    for name in _CHINESE_ENCODINGS:
        try:
            scores[name] = _frequent_share(head.decode(name))
        except UnicodeDecodeError:
            continue
    best = max(scores, key=scores.get, default=None)
    if best is not None and scores[best] >= 0.1:
        return best
    from charset_normalizer import from_bytes

    found = from_bytes(head).best()
    return found.encoding.replace("_", "-") if found is not None else "unknown (binary?)"


def not_utf8_message(name: str | Path, data: bytes, error: UnicodeDecodeError | None = None) -> str:
    """`<name>: not UTF-8 text (…); it looks like <guess>` with a way out."""
    where = f"byte 0x{data[error.start]:02x} at offset {error.start}" if error is not None and error.start < len(data) \
        else "undecodable bytes"
    guess = encoding_guess(data)
    return (f"{name}: not UTF-8 text ({where}); it looks like {guess}. Save it as UTF-8 "
            f"(e.g. `iconv -f {guess} -t utf-8`)")


def read_utf8(path: str | Path, *, name: str | None = None, error: type[Exception] = ValueError) -> str:
    """The text of a UTF-8 file (a byte-order mark is dropped); other encodings raise `error` naming the file and
    the encoding it looks like. OSErrors pass through."""
    path = Path(path)
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(not_utf8_message(name or path, data, exc)) from None


def check_utf8(path: str | Path, *, name: str | None = None, error: type[Exception] = ValueError) -> None:
    """Raise `error` (naming the file and its likely encoding) unless the file decodes as UTF-8; for readers that
    decode themselves (pandas) and only say "UnicodeDecodeError"."""
    read_utf8(path, name=name, error=error)


def json_type(value: object) -> str:
    """How a JSON value's type reads in an error message: an object, a list, a string, a number, true/false, null."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else type(value).__name__
