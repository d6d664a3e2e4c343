"""The one rule for which models a benchmark runs (`lib/model_selection.ModelSelection`), and its callers: `sctc
plan`'s per-benchmark models, the runner's (`running/cli_run.run_benchmarks`) and `sctc run`'s halt report and
unchanged-run record all read the one selection `cli/selection.select` builds, so they cannot disagree."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pytest

from sctc_assets.benchmarks.spec import BenchmarkSpec
from sctc_assets.lib.model_selection import ModelSelection

PACKAGE = Path(__file__).resolve().parents[1] / "sctc_assets"


def _entry(default: bool, backend: str = "openai") -> SimpleNamespace:
    return SimpleNamespace(default=default, backend=backend, settings={}, benchmarks={})


# Three benchmarks shaped like the real ones: one that runs the defaults and serves every entry (term), one that
# runs the defaults but serves only some entries (sovereignty: not a `term-only` replay), and one that runs no
# default model (reviews, corpus: `default_models=False`).
TERM = BenchmarkSpec.of_stages(name="alpha", langs=("zh_hans",))
SOVEREIGNTY = BenchmarkSpec.of_stages(name="beta", langs=("zh_hans",),
                                      serves=lambda entry: entry.backend != "term-only")
REVIEWS = BenchmarkSpec.of_stages(name="gamma", langs=("zh_hans",), default_models=False)
ENTRIES = {"a": _entry(True), "b": _entry(True, "term-only"), "c": _entry(False), "pro": _entry(False)}


def test_without_models_each_benchmark_runs_the_defaults_it_takes_and_what_its_preparation_added():
    # `pro` was imported for beta only (and names `a` again: listed once); gamma takes no defaults and was given none
    selection = ModelSelection.of(ENTRIES, {"beta": ["a", "pro"]})
    assert selection.default_models == ("a", "b")
    assert (selection.chosen(TERM), selection.served(TERM), selection.skipped(TERM)) == (["a", "b"], ["a", "b"], [])
    assert (selection.chosen(SOVEREIGNTY), selection.served(SOVEREIGNTY), selection.skipped(SOVEREIGNTY)) == \
        (["a", "b", "pro"], ["a", "pro"], ["b"])
    assert (selection.chosen(REVIEWS), selection.served(REVIEWS)) == ([], [])
    assert selection.running([TERM, SOVEREIGNTY, REVIEWS]) == ["a", "b", "pro"]
    assert selection.running([REVIEWS]) == []
    assert selection.served_by([TERM, SOVEREIGNTY, REVIEWS]) == {"alpha": ["a", "b"], "beta": ["a", "pro"],
                                                                 "gamma": []}


def test_models_given_replace_defaults_and_added_ones_for_every_benchmark_even_one_without_defaults():
    selection = ModelSelection.of(ENTRIES, {"beta": ["pro"], "gamma": ["pro"]}, ["c", "b", "c"])
    for spec in (TERM, REVIEWS):
        assert selection.chosen(spec) == selection.served(spec) == ["c", "b"]
    assert (selection.served(SOVEREIGNTY), selection.skipped(SOVEREIGNTY)) == (["c"], ["b"])
    assert selection.running([TERM, SOVEREIGNTY, REVIEWS]) == ["c", "b"]


def test_a_key_the_registry_lacks_is_chosen_but_never_served_and_a_benchmark_without_additions_needs_none():
    selection = ModelSelection.of(ENTRIES, {}, ["gone", "a"])
    assert (selection.chosen(TERM), selection.served(TERM), selection.skipped(TERM)) == (["gone", "a"], ["a"], ["gone"])
    assert ModelSelection.of(ENTRIES, None, []).chosen(TERM) == ["a", "b"]  # an empty --models is no --models
    assert ModelSelection({}).running([TERM, SOVEREIGNTY, REVIEWS]) == []


def test_the_plan_and_the_runner_run_the_same_models_from_the_one_selection(isolated_data_dir, monkeypatch, capsys,
                                                                              tmp_path):
    """`sctc plan` (`models_per_benchmark`) and the runner (`run_benchmarks`, handed the selection) give each
    benchmark the same models and print the same skipping line."""
    import sctc_assets.running.schedule as schedule
    from sctc_assets.cli import selection as cli_selection
    from sctc_assets.running.cli_run import run_benchmarks

    specs = {spec.name: spec for spec in (TERM, SOVEREIGNTY, REVIEWS)}
    monkeypatch.setattr(cli_selection, "SPECS", specs)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    selection = ModelSelection.of(ENTRIES, {"beta": ["pro"], "gamma": []})
    args = argparse.Namespace(benchmarks=list(specs), models=None, out=tmp_path / "out", debug=False)

    planned = cli_selection.models_per_benchmark(args, selection)
    plan_lines = capsys.readouterr().out.splitlines()
    assert planned == {"alpha": ["a", "b"], "beta": ["a", "pro"], "gamma": []}
    assert plan_lines == ["beta: skipping b (no answers for this benchmark)"]

    handed: dict[str, list[str]] = {}

    def record(runner, works, before_cross=None):
        handed.update({work.spec.name: list(work.models) for work in works})
        raise RuntimeError("recorded")  # stop before any stage: only the models handed down matter here

    monkeypatch.setattr(schedule, "run_all", record)
    project = SimpleNamespace(specs=specs, defs=dg.Definitions(), resources={})
    assert run_benchmarks(args, {}, selection, project=project) == 1
    out = capsys.readouterr().out
    assert handed == planned
    assert [line for line in out.splitlines() if "skipping" in line] == plan_lines


def test_a_halted_run_estimates_what_is_left_for_the_models_the_selection_serves(monkeypatch, capsys):
    from sctc_assets.cli import run as cli_run
    from sctc_assets.cli import selection as cli_selection

    specs = {spec.name: spec for spec in (TERM, SOVEREIGNTY, REVIEWS)}
    monkeypatch.setattr(cli_selection, "SPECS", specs)
    asked = {}

    def estimate(models_by_benchmark, entries, options):
        asked.update(models_by_benchmark)
        return SimpleNamespace(rows=[])

    monkeypatch.setattr(cli_run, "build_estimate", estimate)
    selection = ModelSelection.of(ENTRIES, {"beta": ["pro"]}, None)
    halted = SimpleNamespace(stage="x", halted=True, message="GenerationHalted: budget spent")
    cli_run.report_halt(argparse.Namespace(benchmarks=list(specs)), selection, [halted])
    assert asked == {"alpha": ["a", "b"], "beta": ["a", "pro"], "gamma": []}
    assert "left to ask: 0 calls" in capsys.readouterr().err


@pytest.mark.parametrize("attribute", ["default_models", "serves"])
def test_no_copy_of_the_rule_is_left(attribute):
    """Only `lib/model_selection.py` reads a spec's `default_models` or calls its `serves`: a second place that
    decides which models a benchmark runs would be a copy that can drift."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in ("lib/model_selection.py", "benchmarks/spec.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == attribute:
                found.append(f"{relative}:{node.lineno}")
    assert found == []
