"""Benchmarks from other packages: each a module whose `SPEC` is a `BenchmarkSpec` naming its `assets_module` and its
table `schemas`.

They come from the `sctc_assets.benchmarks` entry-point group of installed packages (`name = "package.module"`, as
inspect_ai's tasks do) and from `$SCTC_BENCHMARK_MODULES` (module names separated by spaces; a folder of your own
on `PYTHONPATH`, as lm-evaluation-harness's `--include_path`). The CLI, the runner, the estimate and the Dagster
definitions then treat them as the built-in ones.
"""

from __future__ import annotations

import importlib
import os
from importlib.metadata import entry_points
from typing import Mapping

from sctc_assets.benchmarks.spec import BenchmarkSpec

MODULES_ENV_VAR = "SCTC_BENCHMARK_MODULES"
ENTRY_POINT_GROUP = "sctc_assets.benchmarks"


class BenchmarkPluginError(ValueError):
    pass


def plugin_modules() -> list[str]:
    """The modules named by installed packages, then by the environment variable, each once."""
    named = [entry.value for entry in entry_points(group=ENTRY_POINT_GROUP)]
    named += os.environ.get(MODULES_ENV_VAR, "").split()
    return list(dict.fromkeys(named))


def plugin_specs(built_in: Mapping[str, BenchmarkSpec]) -> dict[str, BenchmarkSpec]:
    """Each plug-in module's `SPEC`, refused with the module's name when it is missing, of the wrong kind, lacks
    its assets module or takes a benchmark's name that is taken."""
    specs: dict[str, BenchmarkSpec] = {}
    for module_name in plugin_modules():
        where = f"benchmark module {module_name!r} (${MODULES_ENV_VAR} or entry point group {ENTRY_POINT_GROUP})"
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise BenchmarkPluginError(f"{where}: cannot be imported ({exc})") from exc
        spec = getattr(module, "SPEC", None)
        if not isinstance(spec, BenchmarkSpec):
            raise BenchmarkPluginError(f"{where}: has no SPEC that is a BenchmarkSpec")
        if not spec.assets_module:
            raise BenchmarkPluginError(f"{where}: its SPEC names no assets_module (the module of its assets)")
        if spec.name in built_in or spec.name in specs:
            raise BenchmarkPluginError(f"{where}: benchmark name {spec.name!r} is taken")
        specs[spec.name] = spec
    return specs
