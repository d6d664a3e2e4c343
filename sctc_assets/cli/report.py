"""`sctc report` (and the end of `sctc run`): materialize the audit_report asset from the stored tables."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import dagster as dg

from sctc_assets.cli.selection import print_problems
from sctc_assets.running.report import materialize_report
from sctc_assets.cli.validation import storage_problems


def build_report(models: list[str] | None, out: Path | None, force: bool = False,
                 printed: list[str] | None = None) -> int:
    """Build the report (or leave it, unchanged); 1 when it failed. The line printed is also added to `printed`."""
    outcome = materialize_report(dg.DagsterInstance.get(), models=models, out_dir=out, force=force)
    if not outcome.ok:
        print(f"report: failed: {outcome.message}", file=sys.stderr)
        return 1
    line = (f"report {outcome.message} ({outcome.html})" if outcome.skipped
            else f"report: {outcome.html} ({outcome.message})")
    print(line)
    if printed is not None:
        printed.append(line)
    return 0


def main(args: argparse.Namespace) -> int:
    problems = storage_problems()  # `sctc run` checked them before its report; alone, this command checks here
    if problems:
        return print_problems(problems)
    return build_report(args.models, args.out.resolve() if args.out else None, force=args.force)
