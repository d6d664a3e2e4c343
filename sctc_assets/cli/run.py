"""`sctc run`: check everything, materialize the chosen benchmarks for the chosen models through Dagster, say what a
halted run left to ask, and end with the audit report."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Sequence

from sctc_assets.benchmarks import SPECS
from sctc_assets.cli import BUDGET_ENV_VARS, BUDGET_SCOPE_ENV_VAR
from sctc_assets.cli import plan, unchanged_run
from sctc_assets.cli.report import build_report
from sctc_assets.cli.selection import batch_environment, select_for_run, specs_of
from sctc_assets.cli.plan import build_estimate
from sctc_assets.lib.batch_settings import BATCH_WAIT_ENV, DETACH, FOREGROUND
from sctc_assets.lib.model_selection import ModelSelection
from sctc_assets.lib.upstream_source import UpstreamError
from sctc_assets.running.cli_run import run_benchmarks
from sctc_assets.running.signals import PENDING_ERROR


def apply_budget(args: argparse.Namespace) -> None:
    """`--max-calls`/`--max-cost` become the environment the model registry reads its budget from, with a scope
    of this run unless one is set (the same scope shares one budget across runs)."""
    given = {name: getattr(args, name, None) for name in BUDGET_ENV_VARS}
    for name, value in given.items():
        if value is not None:
            os.environ[BUDGET_ENV_VARS[name]] = str(value)
    if any(value is not None for value in given.values()) and not os.environ.get(BUDGET_SCOPE_ENV_VAR):
        os.environ[BUDGET_SCOPE_ENV_VAR] = f"sctc-run-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"




def halted_stages(failures: Sequence[Any]) -> list[Any]:
    """The stages that stopped because model calls were halted (budget spent, Ctrl-C): `GenerationHalted`, known by
    the runner's `halted` flag or, failing that, by the class name Dagster records in the message."""
    return [failure for failure in failures
            if getattr(failure, "halted", False) or "GenerationHalted" in (failure.message or "")
            or PENDING_ERROR in (failure.message or "")]


def report_halt(args: argparse.Namespace, selection: ModelSelection, halted: Sequence[Any]) -> None:
    """After a run that halted: why, and what is left to ask per model × benchmark × partition, from a fresh estimate
    (the cache holds every answer that arrived, so the estimate counts exactly the calls a rerun makes)."""
    pending = [failure for failure in halted if PENDING_ERROR in (failure.message or "")]
    if pending:  # batches submitted and still running at their provider: nothing is left to ask, only to collect
        print(f"\n{len(pending)} stage(s) wait for provider batches that are still running; rerun the same command "
              "to collect them (`sctc batches` lists them)", file=sys.stderr)
        for failure in pending:
            print(f"  {failure.stage}: {(failure.message or '').split(PENDING_ERROR, 1)[-1].lstrip(':').strip()}",
                  file=sys.stderr)
        halted = [failure for failure in halted if failure not in pending]
        if not halted:
            return
    reason = (halted[0].message or "").split("GenerationHalted", 1)[-1].lstrip(":").strip()
    print(f"\nmodel calls halted: {reason}", file=sys.stderr)
    try:
        estimated = build_estimate(selection.served_by(specs_of(args.benchmarks)), selection.entries, vars(args))
    except Exception as exc:  # noqa: BLE001 - the run's own report matters more than this estimate
        print(f"(what is left could not be computed: {exc})", file=sys.stderr)
        return
    left = [row for row in estimated.rows if row.to_ask]
    total = sum(row.to_ask for row in left)
    cost = sum(row.cost_usd or 0.0 for row in left)
    print(f"every answer that arrived is stored; left to ask: {total:,} calls"
          + (f" (about ${cost:,.2f}, {'at most' if any(row.output_ceiling for row in left) else 'estimated'})"
             if any(row.cost_usd for row in left) else ""), file=sys.stderr)
    for row in left:
        print(f"  {row.benchmark} {row.model}/{row.partition}: {row.to_ask:,}", file=sys.stderr)
    print("rerun the same command to continue (raise or drop --max-calls/--max-cost first)", file=sys.stderr)


def main(args: argparse.Namespace) -> int:
    with batch_environment():  # --batch and --no-wait last as long as the command
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    if args.dry_run:
        return plan.main(args)
    selection = select_for_run(args, check_keys=True)
    if isinstance(selection, int):
        return selection
    # Batch models wait for their batches in this process unless --no-wait (a run started elsewhere detaches)
    os.environ[BATCH_WAIT_ENV] = DETACH if args.no_wait else FOREGROUND
    apply_budget(args)

    options = vars(args)
    try:
        for name in args.benchmarks:  # a bad option (an unknown corpus, say) stops the run before it starts
            SPECS[name].partitioned_inputs(options)
    except (UpstreamError, ValueError) as exc:  # registry and option errors are ValueErrors naming the file
        print(f"error: {exc}", file=sys.stderr)
        return 2
    halted: list[Any] = []
    call_errors: dict[tuple[str, str | None], int] = {}
    first_errors: dict[tuple[str, str | None], str] = {}
    summaries: list[str] = []
    status = run_benchmarks(args, options, selection, failures=halted, call_errors=call_errors,
                            summaries=summaries, first_errors=first_errors)
    halted = halted_stages(halted)
    if halted:
        report_halt(args, selection, halted)
    if not args.no_report:
        status = max(status, build_report(None, args.out.resolve() if args.out else None, printed=summaries))
    if call_errors:  # the last line, where a person and a script look
        total, where = sum(call_errors.values()), len(call_errors)
        first = next((first_errors[key] for key in call_errors if key in first_errors), None)
        print(f"{total:,} model call(s) ended in an error after retries and have no stored answer ({where} "
              f"partition(s){f'; the first: {first}' if first else ''}); errors are never scored: "
              "rerun the same command to retry them"
              + ("" if args.fail_on_errors else " (--fail-on-errors makes this exit 1)"), file=sys.stderr)
        if args.fail_on_errors:
            status = max(status, 1)
    ran = selection.running(specs_of(args.benchmarks))
    unchanged_run.remember(args, args.benchmarks, selection.entries, sorted(ran), "\n".join(summaries),
                           complete=status == 0 and not halted and not call_errors)
    return status
