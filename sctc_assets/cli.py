"""`sctc`: run benchmarks from the command line into the same Dagster instance the UI shows.

Dagster, torch and transformers are imported only by the commands that need them (`run`, and `plan` for the
backends): `sctc --help` and `sctc models` stay fast (`test_cli` checks that none of them is imported).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

try:
    from sctc_assets.benchmarks import BENCHMARKS, SPECS
except ValueError as exc:  # a benchmark module of another package that cannot serve (sctc_assets.benchmarks.plugins)
    print(f"error: {exc}", file=sys.stderr)
    raise SystemExit(2) from None
from sctc_assets.lib.paths import default_dagster_home, default_outputs_dir
from sctc_assets.lib.sctc_upstream import SCTC_DEFAULT_URL, SCTC_ENV_VAR

DESCRIPTION = """Audit LLMs for bias across Chinese varieties (SC-TC-Bench and friends) with Dagster assets.

Results go into a persistent Dagster instance ($DAGSTER_HOME, default data/dagster_home), so `sctc ui` (or
`dagster dev` with the same DAGSTER_HOME) shows every materialization, and every table is also written as Parquet.
"""
ALL = "all"
# Contract with the backends' budget (ModelRegistryResource reads these): one scope per `sctc run`, so every
# partition and process of the run shares one budget.
BUDGET_ENV_VARS = {"max_calls": "SCTC_MAX_CALLS", "max_cost": "SCTC_MAX_COST_USD"}
BUDGET_SCOPE_ENV_VAR = "SCTC_BUDGET_SCOPE"
NO_REPORT_ENV_VAR = "SCTC_NO_REPORT"  # scripted runs (and the tests) that never read the report
# Forwarded to `dagster dev` so that stopping `sctc ui` stops the UI and its daemon.
FORWARDED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def _add_run_arguments(parser: argparse.ArgumentParser, *, budget: bool) -> None:
    parser.add_argument("--benchmarks", nargs="+", default=["term"], choices=[*BENCHMARKS, ALL], metavar="BENCHMARK",
                        help=f"benchmarks to run, of {', '.join(BENCHMARKS)}, or {ALL} (default: term)")
    parser.add_argument("--models", nargs="+", metavar="KEY",
                        help="registry keys (default: every entry marked `default: true`)")
    parser.add_argument("--upstream", metavar="PATH|URL",
                        help=f"SC-TC-Bench data: directory, .tar.gz/.tar.xz/.zip or URL (default ${SCTC_ENV_VAR}, "
                             f"else {SCTC_DEFAULT_URL})")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"folder for the Parquet tables (default {default_outputs_dir()})")
    parser.add_argument("--registry", metavar="YAML", help="model registry (default $SCTC_MODELS or data/models.yaml)")
    if budget:
        group = parser.add_argument_group("plan and budget")
        group.add_argument("--dry-run", action="store_true",
                           help="print what the run would ask (calls, cached answers, estimated tokens and cost per "
                                "model × benchmark × language) and stop; the same as `sctc plan`")
        group.add_argument("--max-calls", type=int, metavar="N",
                           help=f"stop asking models after N paid calls in this run (cached answers are free; "
                                f"default ${BUDGET_ENV_VARS['max_calls']}, else no limit)")
        group.add_argument("--max-cost", type=float, metavar="USD",
                           help=f"stop asking models once this run has spent USD, by the registry's prices "
                                f"(default ${BUDGET_ENV_VARS['max_cost']}, else no limit)")
    for spec in SPECS.values():
        spec.add_arguments(parser)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sctc", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="materialize benchmarks for models and write the tables as Parquet",
                              description="Materialize the chosen benchmarks for the chosen models, print a "
                                          "summary and write every table asset to --out as <asset>.parquet. "
                                          "What is unchanged since its last materialization (code version, "
                                          "inputs, options, data settings, the model's registry entry; no failed "
                                          "calls) is left as it is and said so; its tables are still written. "
                                          "Checks the options and the chosen registry entries first (exit 2, one "
                                          "line per problem). Exits with 1 when a stage failed or an asset check "
                                          "did not pass, with 130 when Ctrl-C or SIGTERM stopped it (answers stored "
                                          "so far are kept; a second Ctrl-C quits at once).")
    _add_run_arguments(run, budget=True)
    run.add_argument("--debug", action="store_true",
                     help="print every Dagster event with its stack trace (default: one line per failed stage, the "
                          "traces in the log file it names)")
    run.add_argument("--no-report", action="store_true", default=os.environ.get(NO_REPORT_ENV_VAR) == "1",
                     help="skip the audit report at the end (OUT/report/; `sctc report` builds it later; default "
                          f"on when ${NO_REPORT_ENV_VAR}=1)")

    plan = commands.add_parser("plan", aliases=["estimate"],
                               help="the estimate: what `sctc run` with the same options would ask, and its cost",
                               description="Print, per model × benchmark × language, the model calls the run would "
                                           "make, how many are already in the response cache, and the estimated "
                                           "input/output tokens and cost from the registry's prices. Calls no "
                                           "model and writes nothing. Takes the options of `sctc run`.")
    _add_run_arguments(plan, budget=False)

    models = commands.add_parser("models", help="list the registry's models (or, with --presets, ready-made entries)")
    models.add_argument("--registry", metavar="YAML")
    models.add_argument("--presets", action="store_true",
                        help="print registry entries for OpenAI, OpenRouter, a local vLLM and a local llama.cpp "
                             "server, to copy into the registry")

    _add_report_parser(commands)

    ui = commands.add_parser("ui", help="open the Dagster UI (dagster dev) on the same instance as `sctc run`")
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--upstream", metavar="PATH|URL", help=f"SC-TC-Bench data for runs launched from the UI "
                                                          f"(default ${SCTC_ENV_VAR}, else what `sctc run` extracted)")
    return parser


def _add_report_parser(commands: Any) -> None:
    report = commands.add_parser(
        "report", help="build the audit report (HTML, Markdown, figures) from the materialized tables",
        description="Materialize the audit_report asset: every benchmark's tables as OUT/report/index.html (one "
                    "self-contained page: scorecard, the papers' figures and tables, provenance), report.md and "
                    "figures/<name>.png and .svg. Models without results, and benchmarks not run, are said so.")
    report.add_argument("--models", nargs="+", metavar="KEY",
                        help="only these models (default: every model with results in the tables)")
    report.add_argument("--out", type=Path, default=None,
                        help=f"the report goes to OUT/report/ (default {default_outputs_dir()})")
    report.add_argument("--registry", metavar="YAML", help="model registry (default $SCTC_MODELS or data/models.yaml)")


def _build_report(models: list[str] | None, out: Path | None) -> int:
    import dagster as dg

    from sctc_assets.running.report import materialize_report

    outcome = materialize_report(dg.DagsterInstance.get(), models=models, out_dir=out)
    if not outcome.ok:
        print(f"report: failed: {outcome.message}", file=sys.stderr)
        return 1
    print(f"report: {outcome.html} ({outcome.message})")
    return 0


def _report(args: argparse.Namespace) -> int:
    return _build_report(args.models, args.out.resolve() if args.out else None)


def _prepare_environment(args: argparse.Namespace) -> None:
    if getattr(args, "upstream", None):
        os.environ[SCTC_ENV_VAR] = args.upstream
    if getattr(args, "registry", None):
        os.environ["SCTC_MODELS"] = str(Path(args.registry).resolve())
    home = Path(os.environ.get("DAGSTER_HOME") or default_dagster_home())
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    if not settings.exists():
        # Offline machines gain nothing from telemetry, and an explicit file silences Dagster's warning.
        settings.write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = str(home.resolve())


def chosen_benchmarks(names: Sequence[str]) -> list[str]:
    """`--benchmarks` with `all` expanded, in the registry order, each once."""
    if ALL in names:
        return list(BENCHMARKS)
    return list(dict.fromkeys(names))


# --- checks before anything runs -------------------------------------------------------------------------------------

@dataclass
class Selection:
    """The models a run covers: the registry, its default models, and the models each benchmark's preparation
    added (imported result files)."""

    entries: dict
    default_models: list[str]
    added: dict[str, list[str]] = field(default_factory=dict)
    explicit: list[str] | None = None

    def running(self, benchmarks: Sequence[str]) -> list[str]:
        """The models a run of `benchmarks` asks (a benchmark that needs --models for any, such as reviews and
        corpus, adds none without it)."""
        return list(dict.fromkeys(model for name in benchmarks for model in self.for_benchmark(name)[0]))

    def for_benchmark(self, name: str) -> tuple[list[str], list[str]]:
        """(chosen, served): the benchmark's models, and those whose registry entry can answer it."""
        defaults = self.default_models if SPECS[name].default_models else []
        chosen = self.explicit or list(dict.fromkeys(defaults + self.added.get(name, [])))
        return chosen, [model for model in chosen if model in self.entries and SPECS[name].serves(self.entries[model])]


def _print_problems(problems: Sequence[str]) -> int:
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 2


def _select(args: argparse.Namespace, *, check_keys: bool) -> Selection | int:
    """Everything checked before any stage runs: option ranges, the registry and every chosen model and judge,
    the corpora. Returns the selection, or exit status 2 after printing one line per problem."""
    from sctc_assets.lib.paths import default_registry_path
    from sctc_assets.lib.model_registry import load_registry
    from sctc_assets.lib.upstream_source import UpstreamError
    from sctc_assets.validation import corpus_problems, model_problems, option_problems

    options = vars(args)
    problems = option_problems(options)
    if "corpus" in args.benchmarks:
        problems += corpus_problems(options)
    if problems:
        return _print_problems(problems)
    try:  # preparing may import published results as registry entries, so it comes before reading the registry
        added = {name: SPECS[name].prepare(options) for name in args.benchmarks}
        entries = load_registry(default_registry_path())
    except (UpstreamError, ValueError, OSError) as exc:  # registry and option errors are ValueErrors naming the file
        return _print_problems([str(exc)])
    selection = Selection(entries, [key for key, entry in entries.items() if entry.default], added, args.models)
    problems = model_problems(entries, selection.running(args.benchmarks), args.benchmarks, options,
                              check_keys=check_keys)
    return _print_problems(problems) if problems else selection


def _apply_budget(args: argparse.Namespace) -> None:
    """`--max-calls`/`--max-cost` become the environment the model registry reads its budget from, with a scope
    of this run unless one is set (the same scope shares one budget across runs)."""
    given = {name: getattr(args, name, None) for name in BUDGET_ENV_VARS}
    for name, value in given.items():
        if value is not None:
            os.environ[BUDGET_ENV_VARS[name]] = str(value)
    if any(value is not None for value in given.values()) and not os.environ.get(BUDGET_SCOPE_ENV_VAR):
        os.environ[BUDGET_SCOPE_ENV_VAR] = f"sctc-run-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"


# --- plan ------------------------------------------------------------------------------------------------------------

def _models_per_benchmark(args: argparse.Namespace, selection: Selection) -> dict[str, list[str]]:
    planned = {}
    for name in args.benchmarks:
        chosen, served = selection.for_benchmark(name)
        if len(served) < len(chosen):
            print(f"{name}: skipping {', '.join(m for m in chosen if m not in served)} (no answers for this benchmark)")
        planned[name] = served
    return planned


def _estimate(args: argparse.Namespace) -> int:
    from sctc_assets.estimate import build_estimate
    from sctc_assets.lib.estimate import render
    from sctc_assets.lib.upstream_source import UpstreamError
    from sctc_assets.validation import key_problems

    args.benchmarks = chosen_benchmarks(args.benchmarks)
    selection = _select(args, check_keys=False)
    if isinstance(selection, int):
        return selection
    try:
        estimate = build_estimate(_models_per_benchmark(args, selection), selection.entries, vars(args))
    except (UpstreamError, ValueError, OSError) as exc:
        return _print_problems([str(exc)])
    estimate.warnings += [f"{problem}: `sctc run` would stop here"
                          for problem in key_problems(selection.entries, selection.running(args.benchmarks),
                                                      args.benchmarks, vars(args))]
    print(render(estimate))
    return 0


# --- run -------------------------------------------------------------------------------------------------------------

def halted_stages(failures: Sequence[Any]) -> list[Any]:
    """The stages that stopped because model calls were halted (budget spent, Ctrl-C): `GenerationHalted`, known by
    the runner's `halted` flag or, failing that, by the class name Dagster records in the message."""
    return [failure for failure in failures
            if getattr(failure, "halted", False) or "GenerationHalted" in (failure.message or "")]


def report_halt(args: argparse.Namespace, entries: Mapping[str, Any], default_models: Sequence[str],
                added: Mapping[str, Sequence[str]], halted: Sequence[Any]) -> None:
    """After a run that halted: why, and what is left to ask per model × benchmark × partition, from a fresh estimate
    (the cache holds every answer that arrived, so the estimate counts exactly the calls a rerun makes)."""
    from sctc_assets.estimate import build_estimate

    reason = (halted[0].message or "").split("GenerationHalted", 1)[-1].lstrip(":").strip()
    print(f"\nmodel calls halted: {reason}", file=sys.stderr)
    selection = Selection(dict(entries), list(default_models), {name: list(keys) for name, keys in added.items()},
                          args.models)
    try:
        estimate = build_estimate({name: selection.for_benchmark(name)[1] for name in args.benchmarks},
                                  selection.entries, vars(args))
    except Exception as exc:  # noqa: BLE001 - the run's own report matters more than this estimate
        print(f"(what is left could not be computed: {exc})", file=sys.stderr)
        return
    left = [row for row in estimate.rows if row.to_ask]
    total = sum(row.to_ask for row in left)
    cost = sum(row.cost_usd or 0.0 for row in left)
    print(f"every answer that arrived is stored; left to ask: {total:,} calls"
          + (f" (about ${cost:,.2f}, {'at most' if any(row.output_ceiling for row in left) else 'estimated'})"
             if any(row.cost_usd for row in left) else ""), file=sys.stderr)
    for row in left:
        print(f"  {row.benchmark} {row.model}/{row.partition}: {row.to_ask:,}", file=sys.stderr)
    print("rerun the same command to continue (raise or drop --max-calls/--max-cost first)", file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    if args.dry_run:
        return _estimate(args)
    args.benchmarks = chosen_benchmarks(args.benchmarks)
    selection = _select(args, check_keys=True)
    if isinstance(selection, int):
        return selection
    _apply_budget(args)

    from sctc_assets.lib.upstream_source import UpstreamError
    from sctc_assets.running.cli_run import run_benchmarks

    options = vars(args)
    try:
        for name in args.benchmarks:  # a bad option (an unknown corpus, say) stops the run before it starts
            SPECS[name].partitioned_inputs(options)
    except (UpstreamError, ValueError) as exc:  # registry and option errors are ValueErrors naming the file
        print(f"error: {exc}", file=sys.stderr)
        return 2
    entries, default_models, added = selection.entries, selection.default_models, selection.added
    halted: list[Any] = []
    status = run_benchmarks(args, options, entries, default_models, added, failures=halted)
    halted = halted_stages(halted)
    if halted:
        report_halt(args, entries, default_models, added, halted)
    if args.no_report:
        return status
    return max(status, _build_report(None, args.out.resolve() if args.out else None))


# --- models ----------------------------------------------------------------------------------------------------------

def _entry_problems(entry: Any) -> list[str]:
    """Settings the entry's backend does not have, found without importing a built-in backend (Dagster)."""
    from sctc_assets.lib.backend_catalog import BUILTIN_BACKENDS, builtin_settings

    where = f"{entry.source}: model {entry.key!r}"
    known = builtin_settings(entry.backend)
    if known is None:
        if ":" not in entry.backend:
            return [f"{where}: unknown backend {entry.backend!r}; use one of {sorted(BUILTIN_BACKENDS)} or "
                    "'module:ClassName'"]
        from sctc_assets.lib.model_registry import RegistryError
        from sctc_assets.resources.model_registry import ModelRegistryResource  # your own backend: import it to check

        try:
            ModelRegistryResource().checked_backend_class(entry)
        except RegistryError as exc:
            return [str(exc)]
        return []
    unknown = sorted(set(entry.settings) - known)
    if not unknown:
        return []
    message = f"{where}: unknown setting(s) {', '.join(map(repr, unknown))} for the {entry.backend!r} backend"
    if "api_key" in unknown:
        message += ("; API keys do not belong in the registry: put the key in an environment variable and give its "
                    "name as `api_key_env`")
    return [f"{message} (settings: {', '.join(sorted(known))})"]


def _models(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from sctc_assets.lib.paths import default_registry_path
    from sctc_assets.lib.model_registry import RegistryError, load_registry

    if args.presets:
        from sctc_assets.presets import render_presets

        print(render_presets())
        return 0
    path = default_registry_path()
    try:
        entries = load_registry(path)
    except RegistryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems = [problem for entry in entries.values() for problem in _entry_problems(entry)]
    rows = [{"key": key, "backend": entry.backend, "default": "yes" if entry.default else "",
             "enabled": "yes" if entry.enabled else "no (example)", "description": entry.description}
            for key, entry in entries.items()]
    print(f"registry: {path}")
    print(tabulate(rows, headers="keys", tablefmt="github"))
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 2 if problems else 0


# --- ui --------------------------------------------------------------------------------------------------------------

def run_forwarding_signals(command: Sequence[str]) -> int:
    """Run `command` in its own process group, pass it every SIGINT/SIGTERM/SIGHUP this process receives, and wait
    for it to exit; its exit status (128 + N when a signal N ended it) is returned.

    Its own group, so a Ctrl-C in the terminal reaches it once (through us) rather than twice, which `dagster dev`
    would take as "stop now" instead of shutting its webserver and daemon down."""
    process = subprocess.Popen(list(command), start_new_session=True)

    def forward(signum: int, frame: Any) -> None:
        if process.poll() is None:
            process.send_signal(signum)

    previous = {number: signal.signal(number, forward) for number in FORWARDED_SIGNALS}
    try:
        while True:
            try:
                status = process.wait()
                break
            except InterruptedError:  # a signal arrived while waiting; it was forwarded, keep waiting
                continue
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return status if status >= 0 else 128 - status


def _ui(args: argparse.Namespace) -> int:
    from sctc_assets.running.instance import report_dead_runs

    report_dead_runs()  # runs of a killed `sctc run` would otherwise show as running for ever
    workspace = Path(__file__).resolve().parents[1] / "workspace.yaml"
    # This interpreter's dagster, so the UI works without an activated virtual environment.
    command = [sys.executable, "-m", "dagster", "dev", "-p", str(args.port)]
    command += ["-w", str(workspace)] if workspace.exists() else ["-m", "sctc_assets.definitions"]
    print(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']}: {' '.join(command)}")
    return run_forwarding_signals(command)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _prepare_environment(args)
    return {"run": _run, "plan": _estimate, "estimate": _estimate, "models": _models, "report": _report,
            "ui": _ui}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
