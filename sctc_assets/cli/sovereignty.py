"""`sctc sovereignty import-ratings FILE`: a person's pass/fail decisions on the stored sovereignty answers, checked
row by row and written into the reviews file the next `sctc run` reads; then their agreement with the automatic
statuses and with the judge(s). Reads the stored tables (no Dagster, no model)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from sctc_assets.lib.sovereignty.answer_review import EMPTY_REVIEWS, merge_reviews, read_reviews
from sctc_assets.lib.sovereignty.ratings_import import queue_file, read_ratings, reviews_file, write_reviews
from sctc_assets.lib.sovereignty.raters import MAJORITY, current_reviews, rater_agreement
from sctc_assets.lib.table_store import shown, table_store
from sctc_assets.lib.upstream_source import UpstreamSchemaError

RESULTS, JUDGEMENTS = "sovereignty_results", "sovereignty_judgements"


def _stored(table: str, beside: Path | None) -> pd.DataFrame:
    """A stored table across its partitions: the Parquet file beside `beside` (a run's --out folder), else every
    partition in the table store."""
    if beside is not None:
        path = beside.with_name(f"{table}.parquet")
        return pd.read_parquet(path) if path.is_file() else pd.DataFrame()
    folder = table_store().joinpath(table)
    files = sorted(folder.rglob("*.parquet")) if folder.exists() else []
    frames = [pd.read_parquet(path) for path in files]
    frames = [frame for frame in frames if not frame.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _line(row: dict) -> str:
    kappa = "κ undefined (one verdict throughout)" if pd.isna(row["kappa"]) else f"κ {row['kappa']:.2f}"
    return (f"  {row['rater_a']} vs {row['rater_b'] or 'each other'}: {row['n']} answer(s), agree on "
            f"{row['agreement']:.0%}, {kappa}, verdict changed on {row['changed']:.0%}")


def import_ratings(args: argparse.Namespace) -> int:
    results_path = Path(args.results) if args.results else None
    if results_path is not None and not results_path.is_file():
        print(f"error: {results_path}: no such file (a sovereignty_results.parquet written by `sctc run --out`)",
              file=sys.stderr)
        return 2
    results = _stored(RESULTS, results_path) if results_path is None else pd.read_parquet(results_path)
    if results.empty:
        where = results_path or shown(table_store().joinpath(RESULTS))
        print(f"error: no stored sovereignty answers in {where}: run `sctc run --benchmarks sovereignty` first",
              file=sys.stderr)
        return 2
    answers = results.drop_duplicates(["model", "lang", "prompt_set", "prompt_id", "sample"])
    target = reviews_file(args.reviews)
    try:
        ratings, skipped = read_ratings(Path(args.file), answers)
        added, replaced = write_reviews(ratings, target)
        files = [read_reviews(path) if path.is_file() else EMPTY_REVIEWS for path in (queue_file(), target)]
    except UpstreamSchemaError as exc:  # RatingsError, or a reviews file that cannot be read back
        print(f"error: {exc}", file=sys.stderr)
        return 2
    reviewers = sorted(set(ratings["reviewer"]))
    print(f"imported {len(ratings)} rating(s) by {', '.join(reviewers) or 'nobody'} from {args.file} into {target} "
          f"({added} new, {replaced} replacing the same reviewer's earlier decision); the next `sctc run "
          "--benchmarks sovereignty` applies them" + (f"; {skipped} row(s) without a decision skipped" if skipped
                                                     else ""))
    decisions = current_reviews(results, merge_reviews(*files)[0])
    table = rater_agreement(results, decisions, _stored(JUDGEMENTS, results_path))
    shown_rows = table[(table["comparison"] != "review_vs_rule") | table["rater_a"].isin([*reviewers, MAJORITY])]
    if shown_rows.empty:
        print("no agreement to show: none of the rated answers has an automatic paper or judge status")
        return 0
    titles = {"review_vs_rule": "with the automatic statuses (paper) and the judge(s) (judge, judge:<key>)",
              "reviewers": "among the reviewers", "reviewer_pair": "between pairs of reviewers",
              "judges": "between the judges"}
    for comparison, title in titles.items():
        rows = shown_rows[shown_rows["comparison"] == comparison].to_dict("records")
        if rows:
            print(f"agreement {title}:")
            for row in rows:
                print(_line(row))
    return 0


def main(args: argparse.Namespace) -> int:
    if args.sovereignty_command == "import-ratings":
        return import_ratings(args)
    raise AssertionError(args.sovereignty_command)
