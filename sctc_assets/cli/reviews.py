"""`sctc reviews import-ratings FILE`: a person's ratings of reviews (the paper's Appendix B studies) checked row by
row against the last review run's tables, kept under the data folder for the next run's `review_human_agreement`,
and their agreement with the stars and the models printed at once (`lib/reviews/human_ratings.py`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from sctc_assets.lib.paths import default_outputs_dir
from sctc_assets.lib.reviews import human_ratings
from sctc_assets.lib.reviews.pairing import pair_of

NEEDED = ("review_varieties", "review_pairs")


def _table(folder: Path, name: str) -> pd.DataFrame | None:
    path = folder / f"{name}.parquet"
    return pd.read_parquet(path) if path.is_file() else None


def _agreement_lines(table: pd.DataFrame) -> str:
    rows = []
    for row in table.to_dict("records"):
        measures = (f"mean {row['mean']:.2f} (SD {row['sd']:.2f})" if pd.notna(row["mean"]) and pd.notna(row["sd"])
                    else f"mean {row['mean']:.2f}" if pd.notna(row["mean"])
                    else f"native-like {row['share']:.1f} %" if pd.notna(row["share"])
                    else f"acc {row['accuracy']:.1f} %, MSE {row['mse']:.3f}, weighted κ "
                         f"{row['weighted_kappa']:.3f}" if pd.notna(row["accuracy"]) else "no overlap")
        against = "–" if pd.isna(row["against"]) else row["against"] if pd.isna(row["format"]) \
            else f"{row['against']} ({row['format']})"
        rows.append({"rater": row["rater"], "variety": row["variety"], "question": row["question"],
                     "against": against, "n": row["n"], "result": measures})
    return tabulate(rows, headers="keys", tablefmt="github")


def import_ratings(args: argparse.Namespace) -> int:
    source: Path = args.file
    out = Path(args.out) if args.out else default_outputs_dir()
    if not source.is_file():
        print(f"error: {source}: no such file", file=sys.stderr)
        return 2
    tables = {name: _table(out, name) for name in (*NEEDED, "review_predictions")}
    missing = [name for name in NEEDED if tables[name] is None]
    if missing:
        print(f"error: {out}: no {' or '.join(f'{name}.parquet' for name in missing)}: run `sctc run --benchmarks "
              "reviews` (with the export the ratings are about) first, or name its folder with --out",
              file=sys.stderr)
        return 2
    varieties, pairs = tables["review_varieties"], tables["review_pairs"]
    a, b = pair_of(pairs).suffixes
    members = {int(row["pair_id"]): {str(row[f"review_id_{a}"]), str(row[f"review_id_{b}"])}
               for row in pairs.to_dict("records")}
    try:
        ratings = human_ratings.read_ratings(source, set(varieties["review_id"].astype(str)), members)
    except human_ratings.RatingsError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    stored = human_ratings.store_ratings(ratings, source)
    print(f"checked {len(ratings)} ratings by {ratings['rater'].nunique()} rater(s) of "
          f"{ratings['review_id'].nunique()} reviews; kept in {stored} (the next `sctc run --benchmarks reviews "
          "--models …` writes review_human_agreement from every file kept there)")
    table = human_ratings.agreement_table(human_ratings.stored_ratings(), varieties, tables["review_predictions"])
    if not table.empty:
        print(_agreement_lines(table))
    return 0


def main(args: argparse.Namespace) -> int:
    return {"import-ratings": import_ratings}[args.reviews_command](args)
