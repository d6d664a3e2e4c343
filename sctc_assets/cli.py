"""`sctc`: run benchmarks from the command line into the same Dagster instance the UI shows."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sctc_assets.benchmarks import PLANS
from sctc_assets.lib.paths import default_dagster_home, default_outputs_dir
from sctc_assets.lib.sctc_upstream import SCTC_DEFAULT_URL, SCTC_ENV_VAR

DESCRIPTION = """Audit LLMs for bias across Chinese varieties (SC-TC-Bench and friends) with Dagster assets.

Results go into a persistent Dagster instance ($DAGSTER_HOME, default data/dagster_home), so `sctc ui` (or
`dagster dev` with the same DAGSTER_HOME) shows every materialization, and every table is also written as Parquet.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sctc", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="materialize benchmarks for models and write the tables as Parquet",
                              description="Materialize the chosen benchmarks for the chosen models, print a "
                                          "summary and write every table asset to --out as <asset>.parquet. "
                                          "Exits with 1 when a stage failed or an asset check did not pass.")
    run.add_argument("--benchmarks", nargs="+", default=["term"], choices=list(PLANS),
                     help="benchmarks to run (default: term)")
    run.add_argument("--models", nargs="+", metavar="KEY",
                     help="registry keys (default: every entry marked `default: true`)")
    run.add_argument("--upstream", metavar="PATH|URL",
                     help=f"SC-TC-Bench data: directory, .tar.gz/.tar.xz/.zip or URL (default ${SCTC_ENV_VAR}, "
                          f"else {SCTC_DEFAULT_URL})")
    run.add_argument("--out", type=Path, default=None,
                     help=f"folder for the Parquet tables (default {default_outputs_dir()})")
    run.add_argument("--registry", metavar="YAML", help="model registry (default $SCTC_MODELS or data/models.yaml)")
    run.add_argument("--no-report", action="store_true",
                     help="skip the audit report at the end (OUT/report/; `sctc report` builds it later)")
    for plan in PLANS.values():
        plan.add_arguments(run)

    models = commands.add_parser("models", help="list the registry's models")
    models.add_argument("--registry", metavar="YAML")

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

    from sctc_assets.assets.report.run import materialize_report

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


def _run(args: argparse.Namespace) -> int:
    import dagster as dg
    import pandas as pd

    from sctc_assets.definitions import defs, shared_resources
    from sctc_assets.lib.upstream_source import UpstreamError
    from sctc_assets.resources.io_manager import ParquetIOManager
    from sctc_assets.resources.registry import ModelRegistryResource
    from sctc_assets.runner import Runner, export_tables, stale_tables

    options = vars(args)
    try:
        added = {name: PLANS[name].prepare(options) for name in args.benchmarks}
        entries = ModelRegistryResource().entries()
        for name in args.benchmarks:  # a bad option (an unknown corpus, say) stops the run before it starts
            PLANS[name].partitioned_inputs(options)
    except (UpstreamError, ValueError) as exc:  # registry and option errors are ValueErrors naming the file
        print(f"error: {exc}", file=sys.stderr)
        return 2
    default_models = [key for key, entry in entries.items() if entry.default]
    models = args.models or list(dict.fromkeys(default_models + [key for keys in added.values() for key in keys]))
    unknown = [model for model in models if model not in entries]
    if unknown:
        print(f"error: not in the registry: {', '.join(unknown)} (see `sctc models`)", file=sys.stderr)
        return 2
    out_dir = (args.out or default_outputs_dir()).resolve()
    instance = dg.DagsterInstance.get()
    resources = shared_resources()
    runner = Runner(defs, instance, resources)
    print(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']}")
    status = 0
    for name in args.benchmarks:
        plan = PLANS[name]
        chosen = args.models or list(dict.fromkeys((default_models if plan.default_models else []) + added[name]))
        served = [model for model in chosen if plan.serves(entries[model])]
        if len(served) < len(chosen):
            print(f"{name}: skipping {', '.join(m for m in chosen if m not in served)} (no answers for this benchmark)")
        print(f"{name}: models {', '.join(served) or '(none: model-independent assets only)'}")
        report = runner.run(plan, served, options)
        tables: dict[str, pd.DataFrame] = {}
        if report.inputs_failed:
            print(f"\n{name}: the inputs stage failed, so nothing else ran; no tables written", file=sys.stderr)
        else:
            written = export_tables(plan, served, resources["io_manager"] if isinstance(
                resources["io_manager"], ParquetIOManager) else ParquetIOManager(), out_dir, defs)
            tables = {asset: pd.read_parquet(path) for asset, path in written.items()}
            print()
            print(plan.summary(tables, served))
            print(f"\n{len(written)} tables written to {out_dir}: {', '.join(sorted(written))}")
        if not report.ok:
            status = 1
            print(f"\n{len(report.failures)} stage(s) or check(s) failed:", file=sys.stderr)
            for failure in report.failures:
                print(f"  {failure.stage}: {failure.message}", file=sys.stderr)
        if report.failed_models:
            print(f"\n{name}: stages failed for {', '.join(report.failed_models)}", file=sys.stderr)
            for model, names in stale_tables(tables, report.stale_models).items():
                print(f"  {model}: its rows in {', '.join(names)} (and the summary above) are from an earlier run,"
                      " not this one", file=sys.stderr)
    if args.no_report:
        return status
    return max(status, _build_report(None, args.out.resolve() if args.out else None))


def _models(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from sctc_assets.lib.registry import RegistryError
    from sctc_assets.resources.registry import ModelRegistryResource

    registry = ModelRegistryResource()
    try:
        entries = registry.entries()
    except RegistryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems = []
    for entry in entries.values():
        try:
            registry.checked_backend_class(entry)
        except RegistryError as exc:
            problems.append(str(exc))
    rows = [{"key": key, "backend": entry.backend, "default": "yes" if entry.default else "",
             "description": entry.description} for key, entry in entries.items()]
    print(f"registry: {registry.path()}")
    print(tabulate(rows, headers="keys", tablefmt="github"))
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 2 if problems else 0


def _ui(args: argparse.Namespace) -> int:
    workspace = Path(__file__).resolve().parents[1] / "workspace.yaml"
    # This interpreter's dagster, so the UI works without an activated virtual environment.
    command = [sys.executable, "-m", "dagster", "dev", "-p", str(args.port)]
    command += ["-w", str(workspace)] if workspace.exists() else ["-m", "sctc_assets.definitions"]
    print(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']}: {' '.join(command)}")
    return subprocess.call(command)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _prepare_environment(args)
    return {"run": _run, "models": _models, "report": _report, "ui": _ui}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
