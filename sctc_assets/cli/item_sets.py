"""`--term-items`, `--varieties`, `--cue`, `--extend-from`, `--term-limit`, `--concepts` of `sctc run` and `sctc plan`:
which item set (or part of one) the term benchmark runs on.

A set is a benchmark of its own (`terms_<set>`, see `sctc_assets.benchmarks.item_sets`), and benchmarks are made when
the package is imported. A set this process does not know yet is checked here (before any model is asked), kept in
the run registry (`sctc run`; a plan writes nothing), and the same command runs again in a child process that knows
it."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import replace

from sctc_assets.benchmarks import SPECS
from sctc_assets.benchmarks.item_sets import ITEM_SETS
from sctc_assets.cli.selection import chosen_benchmarks, select
from sctc_assets.lib.term.item_sources import (DEFAULT_SET, ENTRY_ENV_VAR, ItemSetEntry, entry_json, load_entry,
                                               remember, resolve_items, variety_problems)
from sctc_assets.lib.term.items import ItemSetError
from sctc_assets.lib.term.variety_prompts import identical_prompts_warning
from sctc_assets.lib.upstream_source import UpstreamError
from sctc_assets.lib.varieties import load_catalog

TERM = "term"


def requested_entry(args: argparse.Namespace) -> ItemSetEntry:
    """The set the options describe (`resolve_items`): a registered set by name (the options given replace its own),
    else a source (default: the paper's 110 terms, which `--varieties` or `--extend-from` alone extend)."""
    return resolve_items(args.term_items or DEFAULT_SET, ITEM_SETS, name=args.item_set_name, varieties=args.varieties,
                         cue=args.cue, extend_from=args.extend_from, limit=args.term_limit, concepts=args.concepts)


def resolve(args: argparse.Namespace, argv: list[str]) -> int | None:
    """For `sctc run`/`plan` with an item-set option: None when the run can go on in this process (with `term` replaced by the set's benchmark), else the exit
    status: 2 for a set refused, or the child process's."""
    if TERM not in (args.benchmarks or []):
        print("error: --term-items, --varieties, --cue, --extend-from, --term-limit, --concepts and --item-set-name "
              "choose the term benchmark's item set: add --benchmarks term", file=sys.stderr)
        return 2
    catalog = load_catalog()
    try:
        entry = requested_entry(args)
        problems = variety_problems(entry.varieties, catalog)
        if problems:
            raise ItemSetError(f"--varieties: {'; '.join(problems)}")
        chosen = load_entry(entry, catalog=catalog)
    except (ItemSetError, UpstreamError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    entry = replace(entry, varieties=chosen.varieties)
    known = SPECS.get(entry.prefix)
    if known is not None and ITEM_SETS.get(entry.name) == entry:
        for line in identical_prompts_warning([catalog.variety(code) for code in chosen.varieties], cue=entry.cue):
            print(f"warning: {line}", file=sys.stderr)
        for source, matched in chosen.extensions:
            print(f"item set {entry.name}: {matched} of {len(chosen.item_set)} concepts matched {source}")
        args.benchmarks = [entry.prefix if name == TERM else name for name in args.benchmarks]
        return None
    if os.environ.get(ENTRY_ENV_VAR):  # this is the child already: never start another
        print(f"error: item set {entry.name}: not made a benchmark in this process (${ENTRY_ENV_VAR})", file=sys.stderr)
        return 2
    # Everything the run checks before a stage (options, registry, models, storage) is checked before the set is
    # kept: a rejected run keeps nothing. The child process checks it again, finding nothing to print.
    checked = select(argparse.Namespace(**{**vars(args), "benchmarks": chosen_benchmarks(args.benchmarks)}),
                     check_keys=args.command == "run" and not args.dry_run)
    if isinstance(checked, int):
        return checked
    if args.command == "run" and not args.dry_run:
        print(f"item set {entry.name}: kept in {remember(entry)} (its assets: {entry.prefix}_…)")
    environment = {**os.environ, ENTRY_ENV_VAR: entry_json(entry)}
    return subprocess.call([sys.executable, "-m", "sctc_assets.cli", *argv], env=environment)
