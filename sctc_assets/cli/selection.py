"""What `sctc run` and `sctc plan` share: the chosen benchmarks, and everything checked before a stage runs (option
ranges, the registry and the chosen models, the corpora), giving the models each benchmark covers."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from typing import Iterator, Mapping, Sequence

from sctc_assets.benchmarks import BENCHMARKS, SPECS
from sctc_assets.cli import ALL
from sctc_assets.lib.batch_settings import BATCH_MODELS_ENV, BATCH_WAIT_ENV, batch_api
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.judge_families import same_family_warning
from sctc_assets.lib.model_registry import load_registry
from sctc_assets.lib.model_selection import ModelSelection
from sctc_assets.lib.paths import default_registry_path
from sctc_assets.lib.upstream_source import UpstreamError
from sctc_assets.cli.validation import corpus_problems, model_problems, option_problems


def chosen_benchmarks(names: Sequence[str]) -> list[str]:
    """`--benchmarks` with `all` expanded, in the registry order, each once."""
    if ALL in names:
        return list(BENCHMARKS)
    return list(dict.fromkeys(names))


def specs_of(names: Sequence[str]) -> list:
    """The specs of the named benchmarks, in that order."""
    return [SPECS[name] for name in names]


def print_problems(problems: Sequence[str]) -> int:
    """One `error:` line per problem on stderr; the exit status of a command that found them (2)."""
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 2


def select(args: argparse.Namespace, *, check_keys: bool) -> ModelSelection | int:
    """Everything checked before any stage runs: option ranges, the registry and every chosen model and judge,
    the corpora. Returns the model selection (`lib.model_selection`, built here once and passed down), or exit
    status 2 after printing one line per problem."""
    # `sctc plan` and `sctc run --dry-run` write nothing: preparing says what it would write instead.
    options = {**vars(args), "dry_run": args.command != "run" or bool(getattr(args, "dry_run", False))}
    problems = option_problems(options)
    if "corpus" in args.benchmarks:
        problems += corpus_problems(options)
    if problems:
        return print_problems(problems)
    try:  # preparing may import published results as registry entries, so it comes before reading the registry
        prepared = {name: SPECS[name].prepare(options) for name in args.benchmarks}
        entries = load_registry(default_registry_path())
    except (UpstreamError, ValueError, OSError) as exc:  # registry and option errors are ValueErrors naming the file
        return print_problems([str(exc)])
    for keys in prepared.values():  # a dry run's entries, which replace what an earlier import wrote
        if isinstance(keys, Mapping):
            entries.update(keys)
    selection = ModelSelection.of(entries, {name: list(keys) for name, keys in prepared.items()}, args.models)
    problems = model_problems(entries, selection.running(specs_of(args.benchmarks)), args.benchmarks, options,
                              check_keys=check_keys)
    if problems:
        return print_problems(problems)
    for name in args.benchmarks:  # two judges of one provider family: said, not refused
        judges = SPECS[name].chosen_judges(options)
        warning = same_family_warning({key: (entries[key].backend, entries[key].settings) for key in judges
                                       if key in entries}) if len(judges) > 1 else None
        if warning:
            print(f"{name}: {warning}")
    return selection


def say_skipped(selection: ModelSelection, spec) -> None:
    """The line `sctc run` and `sctc plan` print for the chosen models a benchmark does not run."""
    skipped = selection.skipped(spec)
    if skipped:
        print(f"{spec.name}: skipping {', '.join(skipped)} (no answers for this benchmark)")


def models_per_benchmark(args: argparse.Namespace, selection: ModelSelection) -> dict[str, list[str]]:
    """The models each chosen benchmark runs: those whose registry entry can answer it (the others said so)."""
    specs = specs_of(args.benchmarks)
    for spec in specs:
        say_skipped(selection, spec)
    return selection.served_by(specs)


def select_for_run(args: argparse.Namespace, *, check_keys: bool) -> ModelSelection | int:
    """What `sctc run` and `sctc plan` settle before anything runs: the benchmarks (`all` spelled out), the checked
    model selection (`select`) and `--batch` (`apply_batch`). Returns the selection, or exit status 2 after printing
    the problems."""
    args.benchmarks = chosen_benchmarks(args.benchmarks)
    selection = select(args, check_keys=check_keys)
    if isinstance(selection, int):
        return selection
    batch_error = apply_batch(args, selection)
    return selection if batch_error is None else batch_error


def apply_batch(args: argparse.Namespace, selection: ModelSelection) -> int | None:
    """`--batch`: every chosen model and judge whose backend has a batch API goes by batch (`$SCTC_BATCH_MODELS`,
    which the model registry resource reads as `batch: true`); one line names the models asked as usual. Returns 2
    after one error line when no chosen model has a batch API (the flag would change nothing), else None."""
    os.environ.pop(BATCH_MODELS_ENV, None)
    if not getattr(args, "batch", False):
        return None
    options = vars(args)
    judges = [judge for name in args.benchmarks for judge in SPECS[name].chosen_judges(options)]
    chosen = [key for key in dict.fromkeys([*selection.running(specs_of(args.benchmarks)), *judges])
              if key and key in selection.entries]
    asking = [key for key in chosen if traits(selection.entries[key].backend).replays is None]
    batched = [key for key in asking if batch_api(selection.entries[key].backend) is not None]
    if not batched:
        return print_problems([f"--batch: none of the chosen models ({', '.join(asking) or 'none asks a model'}) "
                               "has a backend with a batch API (openai, anthropic, gemini)"])
    os.environ[BATCH_MODELS_ENV] = " ".join(batched)
    skipped = [key for key in asking if key not in batched]
    if skipped:
        print(f"--batch: {', '.join(skipped)} {'has' if len(skipped) == 1 else 'have'} no batch API: asked as usual")
    return None


@contextmanager
def batch_environment() -> Iterator[None]:
    """`$SCTC_BATCH_MODELS` and `$SCTC_BATCH_WAIT` as they were before the command set them, once it ends (a
    caller that goes on, such as a test, keeps no batch mode of an earlier command)."""
    before = {name: os.environ.get(name) for name in (BATCH_MODELS_ENV, BATCH_WAIT_ENV)}
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
