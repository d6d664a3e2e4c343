"""`sctc plan` (alias `sctc estimate`, and `sctc run --dry-run`): what the run would ask, and its cost."""

from __future__ import annotations

import argparse

from sctc_assets.cli.selection import (apply_batch, batch_environment, chosen_benchmarks, models_per_benchmark,
                                       print_problems, select)
from sctc_assets.estimate import build_estimate
from sctc_assets.lib.estimate import render
from sctc_assets.lib.upstream_source import UpstreamError
from sctc_assets.validation import key_problems


def main(args: argparse.Namespace) -> int:
    with batch_environment():  # --batch and --no-wait last as long as the command
        return _plan(args)


def _plan(args: argparse.Namespace) -> int:
    args.benchmarks = chosen_benchmarks(args.benchmarks)
    selection = select(args, check_keys=False)
    if isinstance(selection, int):
        return selection
    batch_error = apply_batch(args, selection)
    if batch_error is not None:
        return batch_error
    try:
        estimate = build_estimate(models_per_benchmark(args, selection), selection.entries, vars(args))
    except (UpstreamError, ValueError, OSError) as exc:
        return print_problems([str(exc)])
    estimate.warnings += [f"{problem}: `sctc run` would stop here"
                          for problem in key_problems(selection.entries, selection.running(args.benchmarks),
                                                      args.benchmarks, vars(args))]
    print(render(estimate))
    return 0
