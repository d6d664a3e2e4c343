"""`sctc models`: the registry's models and the problems of their settings, or (`--presets`) ready-made entries.
Imports no Dagster: a built-in backend's settings are read from its source (`lib/backend_catalog.py`)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from tabulate import tabulate

from sctc_assets.lib.backend_catalog import BUILTIN_BACKENDS, builtin_settings
from sctc_assets.lib.batch_settings import batch_setting_problems
from sctc_assets.lib.model_registry import RegistryError, load_registry
from sctc_assets.lib.paths import default_registry_path
from sctc_assets.cli.presets import render_presets


def _entry_problems(entry: Any) -> list[str]:
    """The entry's wrong batch settings, then the settings its backend does not have, found without importing a
    built-in backend (Dagster); a wrong batch key is named once."""
    batch = batch_setting_problems(entry)
    return [*batch.values(), *_setting_problems(entry, set(batch))]


def _setting_problems(entry: Any, named: set[str]) -> list[str]:
    where = f"{entry.source}: model {entry.key!r}"
    known = builtin_settings(entry.backend)
    if known is None:
        if ":" not in entry.backend:
            return [f"{where}: unknown backend {entry.backend!r}; use one of {sorted(BUILTIN_BACKENDS)} or "
                    "'module:ClassName'"]
        # Conditional on purpose: only a registry naming a backend of your own ('module:ClassName') pays for
        # importing it, and the resource that checks it (Dagster).
        from sctc_assets.resources.model_registry import ModelRegistryResource

        try:
            ModelRegistryResource().checked_backend_class(dataclasses.replace(
                entry, settings={name: value for name, value in entry.settings.items() if name not in named}))
        except RegistryError as exc:
            return [str(exc)]
        return []
    unknown = sorted(set(entry.settings) - known - named)
    if not unknown:
        return []
    message = f"{where}: unknown setting(s) {', '.join(map(repr, unknown))} for the {entry.backend!r} backend"
    if "api_key" in unknown:
        message += ("; API keys do not belong in the registry: put the key in an environment variable and give its "
                    "name as `api_key_env`")
    return [f"{message} (settings: {', '.join(sorted(known))})"]


def main(args: argparse.Namespace) -> int:
    if args.presets:
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
