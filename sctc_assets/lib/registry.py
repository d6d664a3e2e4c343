"""The model registry: a YAML file mapping model keys to a backend and its settings.

    models:
      my-model:
        backend: openai              # openai | transformers | replay | package.module:ClassName
        description: free text
        default: true                # part of `sctc run` when no --models is given
        benchmarks:                  # per-benchmark run settings (e.g. fewer trials for slow CPU models)
          term: {trials: 1}
        model: gpt-4o-mini           # every other key is a backend setting
        api_key_env: OPENAI_API_KEY

Model keys become Dagster partition keys and folder names, hence the restricted alphabet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

MODEL_KEY_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
RESERVED_KEYS = ("backend", "description", "default", "benchmarks")


class RegistryError(ValueError):
    pass


@dataclass(frozen=True)
class ModelEntry:
    key: str
    backend: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    default: bool = False
    benchmarks: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def benchmark_settings(self, benchmark: str) -> dict[str, Any]:
        return dict(self.benchmarks.get(benchmark) or {})


def parse_registry(document: Any, *, source: str) -> dict[str, ModelEntry]:
    if not isinstance(document, Mapping) or not isinstance(document.get("models"), Mapping):
        raise RegistryError(f"{source}: expected a top-level `models:` mapping")
    entries: dict[str, ModelEntry] = {}
    for key, raw in document["models"].items():
        where = f"{source}: model {key!r}"
        if not isinstance(key, str) or not MODEL_KEY_PATTERN.match(key):
            raise RegistryError(
                f"{where}: keys use lowercase letters, digits, '.', '_' and '-' (they become partition keys)"
            )
        if not isinstance(raw, Mapping):
            raise RegistryError(f"{where}: expected a mapping of settings")
        backend = raw.get("backend")
        if not isinstance(backend, str) or not backend:
            raise RegistryError(f"{where}: missing `backend`")
        benchmarks = raw.get("benchmarks") or {}
        if not isinstance(benchmarks, Mapping) or not all(isinstance(v, Mapping) for v in benchmarks.values()):
            raise RegistryError(f"{where}: `benchmarks` must map benchmark names to settings")
        entries[key] = ModelEntry(
            key=key,
            backend=backend,
            settings={name: value for name, value in raw.items() if name not in RESERVED_KEYS},
            description=str(raw.get("description") or ""),
            default=bool(raw.get("default", False)),
            benchmarks={name: dict(value) for name, value in benchmarks.items()},
        )
    return entries


def load_registry(path: str | Path) -> dict[str, ModelEntry]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read the model registry ({exc})") from exc
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}: invalid YAML ({exc})") from exc
    return parse_registry(document, source=str(path))
