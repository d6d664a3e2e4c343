"""Review varieties declared in a file (`sctc run --reviews-varieties-file FILE`), beside `REVIEW_VARIETIES`, so
that `--reviews-pair` can name any pair (`pt-pt pt-br`) with no code edit.

The file is YAML (a list of rows, or a mapping with a `varieties` list) or CSV (one row per variety). Columns:

- `code` (required): the variety's code, lower case letters and digits joined by `-` (`pt-br`); the table value of
  `variety` and, with `-` written `_`, the column suffix (`acc_pt_br`). A code of `REVIEW_VARIETIES` cannot be
  redeclared.
- `prompt_language` (required): the language its rating prompts are written in.
- `display_name` (required): "Brazilian Portuguese"; `short_name` (optional, default the display name): "Brazilian".
- `opencc` (optional): the OpenCC configuration that converts a text of the other variety into this one
  (`s2twp`, `tw2sp`, … of `lib.conversion.CONFIGS`); only a pair whose two varieties have one gets the OpenCC
  control.
- `regions` (optional): the reviewers' region codes that write this variety (a YAML list; in CSV separated by
  spaces, commas or semicolons), matched case-insensitively; each variety's code maps to itself anyway.
- `system_prompt`, `structured_prompt`, `text_prompt` (optional, all three or none): the rating prompts in the
  prompt language, with `{title}`, `{positive}`, `{negative}` in the structured one and `{text}` in the other.
  Required (on one row of that language at least) for a prompt language `prompts.TEMPLATES` lacks; the paper's
  English prompts serve `en`.

Every problem stops the run with one line naming the file, the row (data rows from 1) and the column.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

import yaml

from sctc_assets.lib.conversion import CONFIGS
from sctc_assets.lib.reviews.prompts import TEMPLATES
from sctc_assets.lib.reviews.source import TEXT_FIELDS, ReviewDataError
from sctc_assets.lib.reviews.varieties import REVIEW_VARIETIES, ReviewVariety

REQUIRED_COLUMNS = ("code", "prompt_language", "display_name")
PROMPT_COLUMNS = ("system_prompt", "structured_prompt", "text_prompt")
FILE_COLUMNS = (*REQUIRED_COLUMNS, "short_name", "opencc", "regions", *PROMPT_COLUMNS)
_CODE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_PLACEHOLDERS = {"structured_prompt": set(TEXT_FIELDS), "text_prompt": {"text"}, "system_prompt": set()}


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise ReviewDataError(f"{path}: varieties file not found")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff"), newline=""))
        unknown = [column for column in reader.fieldnames or [] if column not in FILE_COLUMNS]
        if unknown:
            raise ReviewDataError(f"{path}: column {unknown[0]!r}: unknown column (columns: {', '.join(FILE_COLUMNS)})")
        return [{key: value for key, value in row.items() if value not in (None, "")} for row in reader]
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ReviewDataError(f"{path}: a varieties file is .yaml, .yml or .csv")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ReviewDataError(f"{path}: not YAML ({exc})") from exc
    if isinstance(data, dict):
        data = data.get("varieties")
    if not isinstance(data, list) or not data:
        raise ReviewDataError(f"{path}: expected a list of varieties (or a mapping with a `varieties` list)")
    rows = []
    for number, row in enumerate(data, 1):
        if not isinstance(row, dict):
            raise ReviewDataError(f"{path}: row {number}: a variety is a mapping of columns, got {row!r}")
        unknown = [str(column) for column in row if column not in FILE_COLUMNS]
        if unknown:
            raise ReviewDataError(f"{path}: row {number}, column {unknown[0]!r}: unknown column (columns: "
                                  f"{', '.join(FILE_COLUMNS)})")
        rows.append({key: value for key, value in row.items() if value not in (None, "", [])})
    return rows


def _regions(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else re.split(r"[\s,;]+", str(value))
    return tuple(str(item).strip().lower() for item in items if str(item).strip())


def _check_prompt(where: str, column: str, text: str) -> None:
    fields = {name: "" for name in _PLACEHOLDERS[column]}
    try:
        text.format(**fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise ReviewDataError(f"{where}, column {column}: the prompt may hold only "
                              f"{', '.join('{' + name + '}' for name in sorted(fields)) or 'no {field}'} "
                              f"({type(exc).__name__}: {exc})") from None
    missing = [name for name in sorted(fields) if "{" + name + "}" not in text]
    if missing:
        raise ReviewDataError(f"{where}, column {column}: the prompt lacks {', '.join('{' + m + '}' for m in missing)}")


def read_varieties_file(location: str | Path) -> tuple[ReviewVariety, ...]:
    """The varieties a file declares, validated (ReviewDataError naming file, row and column)."""
    path = Path(location).expanduser()
    rows = _rows(path)
    builtin = {row.code for row in REVIEW_VARIETIES}
    seen: dict[str, int] = {}
    parsed = []
    for number, row in enumerate(rows, 1):
        where = f"{path}: row {number}"
        for column in REQUIRED_COLUMNS:
            if not str(row.get(column, "")).strip():
                raise ReviewDataError(f"{where}, column {column}: missing (each variety needs "
                                      f"{', '.join(REQUIRED_COLUMNS)})")
        code = str(row["code"]).strip().lower()
        if not _CODE.fullmatch(code):
            raise ReviewDataError(f"{where}, column code: {row['code']!r} is not a code (letters and digits joined "
                                  "by '-', e.g. pt-br)")
        if code in builtin:
            raise ReviewDataError(f"{where}, column code: {code} is already a review variety "
                                  "(lib/reviews/varieties.py)")
        if code in seen:
            raise ReviewDataError(f"{where}, column code: {code} is declared twice (row {seen[code]} too)")
        seen[code] = number
        opencc = str(row["opencc"]).strip() if "opencc" in row else None
        if opencc is not None and opencc not in CONFIGS:
            raise ReviewDataError(f"{where}, column opencc: unknown OpenCC configuration {opencc!r} (known: "
                                  f"{', '.join(CONFIGS)})")
        given = [column for column in PROMPT_COLUMNS if str(row.get(column, "")).strip()]
        if given and len(given) < len(PROMPT_COLUMNS):
            absent = next(column for column in PROMPT_COLUMNS if column not in given)
            raise ReviewDataError(f"{where}, column {absent}: missing (give all of {', '.join(PROMPT_COLUMNS)} or "
                                  "none)")
        for column in given:
            _check_prompt(where, column, str(row[column]))
        prompts = tuple(str(row[column]) for column in PROMPT_COLUMNS) if given else None
        parsed.append((number, ReviewVariety(
            code, str(row["display_name"]).strip(), str(row.get("short_name") or row["display_name"]).strip(),
            str(row["prompt_language"]).strip().lower(), None, opencc, _regions(row.get("regions", "")), prompts)))
    # A row without prompts takes those of another row of its language, else the language's in `TEMPLATES`.
    by_language = {variety.prompt_language: variety.prompts for _, variety in parsed if variety.prompts}
    declared = []
    for number, variety in parsed:
        if variety.prompts is None and variety.prompt_language not in TEMPLATES:
            if variety.prompt_language not in by_language:
                raise ReviewDataError(
                    f"{path}: row {number}, column structured_prompt: no rating prompts in prompt language "
                    f"{variety.prompt_language!r} (built in: {', '.join(TEMPLATES)}); give system_prompt, "
                    "structured_prompt and text_prompt on a row of that language")
            variety = ReviewVariety(variety.code, variety.display_name, variety.short_name, variety.prompt_language,
                                    None, variety.opencc, variety.regions, by_language[variety.prompt_language])
        declared.append(variety)
    return tuple(declared)


def declared_varieties(location: str | Path | None) -> tuple[ReviewVariety, ...]:
    """The varieties of `location`, none without a file."""
    return read_varieties_file(location) if location else ()
