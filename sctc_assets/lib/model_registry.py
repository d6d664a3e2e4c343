"""The model registry: a YAML file mapping model keys to a backend and its settings.

    models:
      my-model:
        backend: openai              # openai | transformers | replay | package.module:ClassName
        description: free text
        default: true                # part of `sctc run` when no --models is given
        enabled: false               # an example: listed by `sctc models`, but no partition and no runs
        benchmarks:                  # per-benchmark run settings (e.g. fewer trials for slow CPU models)
          term: {trials: 1}
        budget: {max_calls: 5000, max_cost_usd: 2.5}   # optional: new calls of this model per run (lib/budget.py)
        origin: {country: US, developer: OpenAI}        # optional: who made it (ISO 3166 country code), for group tests
        observe: daily               # optional: watch the served model, re-audit when it changes (lib/served_model.py);
                                     # {every_hours: N, probe: models}: the model listing instead of a chat call
        model: gpt-4o-mini           # every other key is a backend setting
        api_key_env: OPENAI_API_KEY

Model keys become Dagster partition keys and folder names, hence the restricted alphabet.

Generated or local entries live in drop-in files: every `*.yaml` in the `models.d/` folder next to the registry file
is read after it, in name order, with the same format (`sctc run --tsb-results` writes `models.d/tsb-results.yaml`).
A key defined twice is an error naming both files.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.budget import BudgetError, BudgetLimits
from sctc_assets.lib.served_model import CHAT_PROBE, ObserveError, parse_observe, parse_probe
from sctc_assets.lib.yaml_files import load_yaml

MODEL_KEY_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
RESERVED_KEYS = ("backend", "description", "default", "enabled", "benchmarks", "budget", "origin", "observe")
# `origin: {country: CN, developer: Alibaba}`: an ISO 3166-1 alpha-2 country code and the developer's name.
COUNTRY_PATTERN = re.compile(r"^[A-Z]{2}$")
OVERLAY_DIR_NAME = "models.d"


class RegistryError(ValueError):
    pass


@dataclass(frozen=True)
class ModelEntry:
    key: str
    backend: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    default: bool = False
    enabled: bool = True  # false: an example entry, listed but never a `models` partition
    benchmarks: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    source: str = ""  # the registry or drop-in file that defines the entry, for error messages
    budget: BudgetLimits = field(default_factory=BudgetLimits)
    # Who made the model: {"country": "CN", "developer": "Alibaba"}; empty when the registry does not say.
    origin: Mapping[str, str] = field(default_factory=dict)
    # Hours between observations of the served model (`observe:`); None: not observed.
    observe_hours: float | None = None
    # How it is observed: `chat` (a one-token chat completion) or `models` (the provider's model listing).
    observe_probe: str = CHAT_PROBE

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
        enabled = raw.get("enabled", True)
        if not isinstance(enabled, bool):
            raise RegistryError(f"{where}: `enabled` must be true or false")
        if not enabled and raw.get("default"):
            raise RegistryError(f"{where}: an entry with `enabled: false` cannot be `default: true`")
        benchmarks = raw.get("benchmarks") or {}
        if not isinstance(benchmarks, Mapping) or not all(isinstance(v, Mapping) for v in benchmarks.values()):
            raise RegistryError(f"{where}: `benchmarks` must map benchmark names to settings")
        try:
            budget = BudgetLimits.parse(raw.get("budget"), where=where)
        except BudgetError as exc:
            raise RegistryError(str(exc)) from None
        entries[key] = ModelEntry(
            key=key,
            backend=backend,
            settings={name: value for name, value in raw.items() if name not in RESERVED_KEYS},
            description=str(raw.get("description") or ""),
            default=bool(raw.get("default", False)),
            enabled=enabled,
            benchmarks={name: dict(value) for name, value in benchmarks.items()},
            source=source,
            budget=budget,
            origin=parse_origin(raw.get("origin"), where=where),
            observe_hours=_observe_hours(raw.get("observe"), backend, where=where),
            observe_probe=_observe_probe(raw.get("observe"), where=where),
        )
    return entries


def _observe_hours(raw: Any, backend: str, *, where: str) -> float | None:
    try:
        hours = parse_observe(raw, where=where)
    except ObserveError as exc:
        raise RegistryError(str(exc)) from None
    if hours is not None and not traits(backend).observable:
        raise RegistryError(f"{where}: observe: the {backend!r} backend's served model cannot be observed (only an "
                            "OpenAI-compatible endpoint's; never a replay or a local model)")
    return hours


def _observe_probe(raw: Any, *, where: str) -> str:
    try:
        return parse_probe(raw, where=where)
    except ObserveError as exc:
        raise RegistryError(str(exc)) from None


def parse_origin(raw: Any, *, where: str) -> dict[str, str]:
    """A registry entry's `origin`, checked: absent gives {}; else a country code and a developer, nothing else."""
    if raw is None:
        return {}
    expected = "expected `origin: {country: XX, developer: NAME}` (XX an ISO 3166 code such as CN, US, FR)"
    if not isinstance(raw, Mapping):
        raise RegistryError(f"{where}: origin: {expected}, found {type(raw).__name__}")
    unknown = sorted(str(name) for name in raw if name not in ("country", "developer"))
    if unknown:
        raise RegistryError(f"{where}: origin: unknown field(s) {', '.join(unknown)}; {expected}")
    country, developer = raw.get("country"), raw.get("developer")
    if not isinstance(country, str) or not COUNTRY_PATTERN.match(country):
        raise RegistryError(f"{where}: origin.country: {expected}, found {country!r}")
    if not isinstance(developer, str) or not developer.strip():
        raise RegistryError(f"{where}: origin.developer: {expected}, found {developer!r}")
    return {"country": country, "developer": developer.strip()}


# Parsed files by (path, inode, size, modification time): every stage of a run asks for the registry, and parsing
# the YAML again each time cost seconds of a re-analysis. A rewritten file has a new size or time.
_PARSED: dict[tuple, dict[str, ModelEntry]] = {}


def _load_file(path: Path) -> dict[str, ModelEntry]:
    try:
        status = path.stat()
        key = (str(path.absolute()), status.st_ino, status.st_size, status.st_mtime_ns)
    except OSError:
        key = None  # load_yaml names the file and why it cannot be read
    if key is None or key not in _PARSED:
        entries = parse_registry(load_yaml(path, what="model registry", error=RegistryError), source=str(path))
        if key is None:
            return entries
        if len(_PARSED) > 64:
            _PARSED.clear()
        _PARSED[key] = entries
    return dict(_PARSED[key])


def overlay_dir(registry_path: str | Path) -> Path:
    return Path(registry_path).parent / OVERLAY_DIR_NAME


def load_registry(path: str | Path) -> dict[str, ModelEntry]:
    """The registry file's entries, then those of its `models.d/*.yaml` drop-in files."""
    path = Path(path)
    entries = _load_file(path)
    defined_in = dict.fromkeys(entries, path)
    folder = overlay_dir(path)
    for overlay in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        for key, entry in _load_file(overlay).items():
            if key in defined_in:
                raise RegistryError(f"{overlay}: model {key!r} is already defined in {defined_in[key]}")
            entries[key] = entry
            defined_in[key] = overlay
    return entries


def write_overlay(registry_path: str | Path, name: str, models: Mapping[str, Mapping[str, Any]], *,
                  comment: str) -> Path:
    """Replace the drop-in file `models.d/<name>.yaml` with `models` (checked first), atomically."""
    target = overlay_dir(registry_path) / f"{name}.yaml"
    parse_registry({"models": models}, source=str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    header = "".join(f"# {line}\n" for line in comment.splitlines())
    body = yaml.safe_dump({"models": {key: dict(value) for key, value in models.items()}},
                          allow_unicode=True, sort_keys=False)
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(header + body)
    os.replace(temp_name, target)
    return target
