"""The audit's `options`: `sctc run` options that configure the assets, parsed by `sctc run`'s own parser.

An audit's `options:` maps `sctc run` option names (with or without the leading `--`) to values; each one becomes
argv (`sovereignty-samples: 3` → `--sovereignty-samples 3`, a list → several values, `true` → the bare flag,
`false` or `null` → left out) and is parsed by the very parser of `sctc run` (`sctc_assets.cli.run_parser`), so names,
types, choices and ranges are the command's, and the benchmarks' own option checks (`spec.option_problems`) run on
the result as `sctc run` runs them. Which options configure assets is not listed here: an option does when a chosen
benchmark's `config(options)` reads it (the same function that makes a `sctc run`'s asset config). The others are
refused with a line saying what to use instead (`REFUSED`), or that they configure a benchmark the audit does not run.
"""

from __future__ import annotations

import argparse
from typing import Any, Iterable, Mapping

# `sctc run` options that are not asset configuration, by argparse destination: what an audit uses instead.
_COMMAND = "a setting of the `sctc run` command itself; it does not apply to an audit (Dagster runs its stage jobs)"
_ITEM_SET = ("defines an item set, a benchmark of its own that is made when the package loads: keep the set in "
             "$SCTC_ITEM_SETS in the code location's environment (`sctc run --term-items … --varieties …` keeps it "
             "in the run registry) and name it in the attribute item_sets (docs/item-sets.md)")
REFUSED: dict[str, str] = {
    "benchmarks": "use the attribute benchmarks",
    "models": "use the attribute models",
    "registry": "use the attribute registry",
    "upstream": "use the attribute upstream",
    "out": "an audit's tables are in the attribute storage (under <storage>/<key_prefix>/); it exports no copies",
    "max_calls": "use the attribute max_calls",
    "max_cost": "use the attribute max_cost_usd",
    "batch": "set `batch: true` in the model's registry entry (docs/batches.md)",
    "dry_run": "`sctc plan` with the same options prices a run; an audit has no dry run",
    "no_wait": _COMMAND, "fail_on_errors": _COMMAND, "debug": _COMMAND, "recheck": _COMMAND, "no_report": _COMMAND,
    **{name: _ITEM_SET for name in ("term_items", "varieties", "cue", "extend_from", "item_set_name", "term_limit",
                                    "concepts")},
    "tsb_upstream": "set $SCTC_TSB_UPSTREAM in the code location's environment (the sovereignty upstream resource "
                    "reads it there)",
    "red_flags": "set $SCTC_TSB_RED_FLAGS in the code location's environment",
    "sovereignty_prompt_file": "set $SCTC_TSB_PROMPT_FILES in the code location's environment (paths separated "
                               "by spaces)",
    "tsb_results": "import the result files once with `sctc run --tsb-results …` against the same registry, then "
                   "name their tsb-<model> keys in the attribute models",
    "corpora": "the corpus shards to count are partitions: launch the audit's corpus shard job for them",
}


class OptionError(ValueError):
    """A bad `options` entry: its message starts with `options.<name>:`."""


def _raise(message: str) -> None:
    raise OptionError(message)


def parser() -> argparse.ArgumentParser:
    """`sctc run`'s parser, raising OptionError with argparse's message instead of printing the usage and exiting."""
    from sctc_assets.cli import run_parser

    found = run_parser()
    found.allow_abbrev = False  # `--sov` is no option of an audit: the name must be the option's own
    found.error = _raise  # type: ignore[method-assign]
    return found


def _argv(flag: str, value: Any) -> list[str]:
    if value is None or value is False:
        return []
    if value is True:
        return [flag]
    if isinstance(value, (list, tuple)):
        return [flag, *map(str, value)]
    if isinstance(value, Mapping):  # `reviews-columns: {score: rating}` → score=rating
        return [flag, *(f"{key}={item}" for key, item in value.items())]
    return [flag, str(value)]


def _flag(name: str) -> str:
    return f"--{name.removeprefix('--')}"


def to_argv(options: Mapping[str, Any]) -> list[str]:
    return [part for name, value in options.items() for part in _argv(_flag(name), value)]


def parse(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options as `sctc run` parses them, every destination with its default; an unknown option or a bad value
    raises OptionError naming `options.<name>` and the parser's message."""
    run = parser()
    flags = {flag: action for action in run._actions for flag in action.option_strings}  # noqa: SLF001
    seen: dict[str, str] = {}
    for name, value in options.items():
        flag = _flag(str(name))
        action = flags.get(flag)
        if action is None or action.dest == "help":
            hint = f" (did you mean {flag.replace('_', '-')[2:]}?)" if flag.replace("_", "-") in flags else ""
            raise OptionError(f"options.{name}: no such `sctc run` option{hint}")
        if action.dest in seen:
            raise OptionError(f"options.{name}: given twice (also as {seen[action.dest]})")
        seen[action.dest] = f"options.{name}"
        if action.dest in REFUSED:
            raise OptionError(f"options.{name}: not asset configuration: {REFUSED[action.dest]}")
        try:
            run.parse_args(_argv(flag, value))
        except OptionError as exc:
            raise OptionError(f"options.{name}: {exc}") from None
    return vars(run.parse_args(to_argv(options)))


class _Reads(dict):
    """A mapping that remembers which keys were read."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        super().__init__(values)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)


def read_by(specs: Iterable[Any], options: Mapping[str, Any]) -> dict[str, set[str]]:
    """For each spec's name, the option destinations its `config(options)` reads."""
    found = {}
    for spec in specs:
        recorder = _Reads(options)
        spec.config(recorder)
        found[spec.name] = recorder.read
    return found


def defaults() -> dict[str, Any]:
    return vars(parser().parse_args([]))
