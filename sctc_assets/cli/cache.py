"""`sctc cache export --to URL|PATH` and `sctc cache import --from URL|PATH`: copy the response cache's answers,
refusals and scores between a SQLite file and PostgreSQL (not its claims or budget ledger, which belong to the runs
of one store). A key the target already holds keeps its row, so copying twice adds nothing. The cache in use
(`$SCTC_DATABASE_URL`, else the data folder's SQLite file) is the source of an export and the target of an import;
`--cache` names another. Imports no Dagster."""

from __future__ import annotations

import argparse
import sys

from sctc_assets.lib.cache import CacheUnavailable, copy_cache, open_cache


def main(args: argparse.Namespace) -> int:
    try:
        here = open_cache(args.cache)
        other = open_cache(args.to if args.cache_command == "export" else args.source)
    except CacheUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"error: {exc.name or 'psycopg'} is not installed: pip install 'sctc-assets[postgres]'", file=sys.stderr)
        return 2
    source, target = (here, other) if args.cache_command == "export" else (other, here)
    try:
        copied = copy_cache(source, target)
    except CacheUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        here.close()
        other.close()
    for table, (read, added) in copied.items():
        print(f"{table}: {read} rows in {source.location}, {added} new in {target.location}, "
              f"{read - added} already there")
    return 0
