"""Compare two `sctc run --out` folders cell by cell: what a restructuring must leave unchanged.

    python bench/compare_outputs.py BEFORE_DIR AFTER_DIR [--report] [--ignore-column NAME …] [--ignore-file GLOB …]

Every Parquet table is read with pandas and compared cell by cell (column names, order and dtypes, row count, then
each cell; NaN equals NaN); every other file outside `report/` (the Pro-format JSON exports, CSVs) is compared byte
for byte. `--report` also compares the audit report's HTML and Markdown line by line and its figures byte for byte
(they carry the build time and the output folder's path, so two cold runs differ there by nature: the lines that
differ are printed, for a person to judge). `--ignore-column` leaves out columns that differ between two runs by
nature (`latency_s`, and `cached` when the second run answered from a copy of the first one's response cache);
`--ignore-file` files such as the export manifest or timestamped Pro-format files. Prints one line per difference and a closing count; exits 1 when a
table or an exported file differs or is missing on one side.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path
from typing import Sequence

import pandas as pd

MAX_CELLS_SHOWN = 5


def table_differences(before: pd.DataFrame, after: pd.DataFrame, ignored: Sequence[str] = ()) -> list[str]:
    """What differs between two tables, in words; empty when they are equal cell by cell."""
    before = before.drop(columns=[column for column in ignored if column in before.columns])
    after = after.drop(columns=[column for column in ignored if column in after.columns])
    if list(before.columns) != list(after.columns):
        return [f"columns {list(before.columns)} != {list(after.columns)}"]
    problems = [f"column {column!r}: dtype {before[column].dtype} != {after[column].dtype}"
                for column in before.columns if str(before[column].dtype) != str(after[column].dtype)]
    if len(before) != len(after):
        return problems + [f"{len(before)} rows != {len(after)} rows"]
    if not before.index.equals(after.index):
        problems.append("row index differs")
    for column in before.columns:
        left, right = before[column].reset_index(drop=True), after[column].reset_index(drop=True)
        if left.dtype == object:  # lists and arrays in cells: compare their text
            same = left.map(repr) == right.map(repr)
        else:
            same = (left == right).fillna(False).astype(bool) | (left.isna() & right.isna())
        different = [int(row) for row in (~same).to_numpy().nonzero()[0]]
        if different:
            shown = ", ".join(f"row {row}: {left[row]!r} != {right[row]!r}" for row in different[:MAX_CELLS_SHOWN])
            problems.append(f"column {column!r}: {len(different)} cell(s) differ ({shown})")
    return problems


def compare(before: Path, after: Path, *, report: bool, ignored_columns: Sequence[str] = (),
            ignored_files: Sequence[str] = ()) -> tuple[list[str], int, list[str]]:
    """(differences, files compared, report lines that differ)."""
    files = {path.relative_to(before) for path in before.rglob("*") if path.is_file()}
    files |= {path.relative_to(after) for path in after.rglob("*") if path.is_file()}
    differences: list[str] = []
    report_lines: list[str] = []
    compared = 0
    for relative in sorted(files, key=str):
        in_report = relative.parts[0] == "report"
        if (in_report and not report) or any(fnmatch.fnmatch(str(relative), glob) for glob in ignored_files):
            continue
        left, right = before / relative, after / relative
        if not left.exists() or not right.exists():
            differences.append(f"{relative}: only in {'after' if not left.exists() else 'before'}")
            continue
        compared += 1
        if relative.suffix == ".parquet":
            problems = table_differences(pd.read_parquet(left), pd.read_parquet(right), ignored_columns)
            differences += [f"{relative}: {problem}" for problem in problems]
        elif in_report and relative.suffix in (".html", ".md"):
            old, new = left.read_text(encoding="utf-8").splitlines(), right.read_text(encoding="utf-8").splitlines()
            report_lines += [f"{relative}:{number}: {a[:160]!r} != {b[:160]!r}"
                             for number, (a, b) in enumerate(zip(old, new), 1) if a != b]
            if len(old) != len(new):
                report_lines.append(f"{relative}: {len(old)} lines != {len(new)} lines")
        elif left.read_bytes() != right.read_bytes():
            (report_lines if in_report else differences).append(f"{relative}: bytes differ")
    return differences, compared, report_lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--report", action="store_true", help="also compare the audit report's files")
    parser.add_argument("--ignore-column", action="append", default=[], metavar="NAME",
                        help="leave this column out of every table (repeat for several)")
    parser.add_argument("--ignore-file", action="append", default=[], metavar="GLOB",
                        help="leave out the files whose path under the folder matches (repeat for several)")
    args = parser.parse_args(argv)
    for folder in (args.before, args.after):
        if not folder.is_dir():
            parser.error(f"{folder}: not a folder")
    differences, compared, report_lines = compare(args.before, args.after, report=args.report,
                                                  ignored_columns=args.ignore_column, ignored_files=args.ignore_file)
    for line in differences:
        print(line)
    for line in report_lines:
        print(f"report (informational): {line}")
    ignored = (f" (columns left out: {', '.join(args.ignore_column)}; files left out: {', '.join(args.ignore_file)})"
               if args.ignore_column or args.ignore_file else "")
    print(f"{compared} file(s) compared, {len(differences)} difference(s){ignored}"
          + (f", {len(report_lines)} report line(s) differ" if args.report else ""))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
