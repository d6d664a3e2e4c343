"""The built-in backends by name, and the settings and traits each one has, known without importing it.

A backend is a Dagster resource, so importing one loads Dagster (and the openai SDK, or torch). `sctc models` only
needs the names of a built-in backend's settings to catch a typo, so they are read from the class body in its
source file: every annotated attribute that is neither a `ClassVar` nor private is a pydantic field, hence a
setting (`test_backend_catalog` checks this against `model_fields` of every built-in backend).

A backend's traits (`BackendTraits`: whether it uses the response cache, whose published answers it replays and for
which benchmarks, whether `sctc run` may fork it) are class variables of its class, stated once there (defaults on
`ModelBackend`); for a built-in backend they are read here from the source too (literal values), for a backend of
your own (`module:Class`) from the imported class. Code that treats backends differently asks `traits(name)`, never
compares backend names.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

BUILTIN_BACKENDS = {
    "openai": "sctc_assets.backends.openai_backend:OpenAIBackend",
    "anthropic": "sctc_assets.backends.anthropic_backend:AnthropicBackend",
    "gemini": "sctc_assets.backends.gemini_backend:GeminiBackend",
    "transformers": "sctc_assets.backends.transformers_backend:TransformersBackend",
    "replay": "sctc_assets.backends.replay:ReplayBackend",
    "tsb_replay": "sctc_assets.backends.tsb_replay:TSBReplayBackend",
    "tsb_raw_replay": "sctc_assets.backends.tsb_raw_replay:TSBRawReplayBackend",
}
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_BASE_CLASS = "sctc_assets.backends.base:ModelBackend"


@dataclass(frozen=True)
class BackendTraits:
    """A backend class's traits (its class variables of these names; the defaults are `ModelBackend`'s)."""

    uses_cache: bool = True  # answers go through the response cache
    replays: str | None = None  # whose published answers it replays (the study's name); None: it asks a model
    replayed_benchmarks: tuple[str, ...] = ()  # the benchmarks those published answers cover
    forkable: bool = False  # `sctc run` may run its model stages in a forked worker process
    batch_api: str | None = None  # the provider batch API it can use (`batch: true`): openai, anthropic, gemini
    observable: bool = False  # its served model can be observed (`observe:` in the registry, lib/served_model.py)

    def answers(self, benchmark: str) -> bool:
        """Whether the backend has answers to `benchmark`'s prompts: any backend that asks a model; a replay only
        for the benchmarks its published answers cover."""
        return self.replays is None or benchmark in self.replayed_benchmarks

    def replays_benchmark(self, benchmark: str) -> bool:
        """Whether its answers to `benchmark` are published ones (read from the study's files)."""
        return self.replays is not None and benchmark in self.replayed_benchmarks


TRAIT_NAMES = tuple(field.name for field in dataclasses.fields(BackendTraits))


def _source_file(module: str) -> Path:
    return _PACKAGE_ROOT.joinpath(*module.split(".")).with_suffix(".py")


def _is_class_var(annotation: ast.expr) -> bool:
    target = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return (isinstance(target, ast.Name) and target.id == "ClassVar") or \
        (isinstance(target, ast.Attribute) and target.attr == "ClassVar")


def _imported_names(tree: ast.Module, module: str) -> dict[str, str]:
    """Local name → `module:Name` for the module's `from sctc_assets… import Name` statements."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sctc_assets"):
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}:{alias.name}"
    return found


def _class_node(target: str) -> tuple[ast.ClassDef, list[str]]:
    """The class statement of `module:Class` in its source file, and its base classes as `module:Class` targets."""
    module, class_name = target.split(":", 1)
    tree = ast.parse(_source_file(module).read_text(encoding="utf-8"))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    if class_name not in classes:
        raise LookupError(f"{module} defines no class {class_name}")
    node = classes[class_name]
    if target == _BASE_CLASS:
        return node, []  # the interface's own bases are Dagster's
    imported = _imported_names(tree, module)
    bases = []
    for base in node.bases:
        if isinstance(base, ast.Name):
            base_target = f"{module}:{base.id}" if base.id in classes else imported.get(base.id)
            if base_target is None:
                raise LookupError(f"{target}: cannot follow base class {base.id}")
            bases.append(base_target)
    return node, bases


@lru_cache(maxsize=None)
def _fields(target: str) -> frozenset[str]:
    if target == _BASE_CLASS:
        return frozenset()  # the interface defines methods and class variables only
    node, bases = _class_node(target)
    names = {statement.target.id for statement in node.body
             if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
             and not statement.target.id.startswith("_") and not _is_class_var(statement.annotation)}
    for base_target in bases:
        names |= _fields(base_target)
    return frozenset(names)


@lru_cache(maxsize=None)
def _class_values(target: str) -> dict[str, Any]:
    """The literal values the class body (and, under them, its bases') assigns to the trait names."""
    node, bases = _class_node(target)
    values: dict[str, Any] = {}
    for base_target in reversed(bases):
        values.update(_class_values(base_target))
    for statement in node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            name, value = statement.target.id, statement.value
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name):
            name, value = statement.targets[0].id, statement.value
        else:
            continue
        if name in TRAIT_NAMES and value is not None:
            try:
                values[name] = ast.literal_eval(value)
            except ValueError as exc:
                raise LookupError(f"{target}: trait {name} must be a literal, so it can be read without "
                                  "importing the backend") from exc
    return values


def _traits(values: Any) -> BackendTraits:
    return BackendTraits(**{name: tuple(value) if name == "replayed_benchmarks" else value
                            for name, value in values.items() if name in TRAIT_NAMES})


def builtin_settings(backend: str) -> frozenset[str] | None:
    """The settings of a built-in backend, or None for a backend of your own (`module:Class`, imported to check)."""
    target = BUILTIN_BACKENDS.get(backend)
    return _fields(target) if target is not None else None


def traits(backend: str | None) -> BackendTraits:
    """The traits of a registry `backend:` value: a built-in backend's read from its source, a backend of your own
    (`module:Class`) imported to read them from its class. An unknown name, or a class that cannot be imported,
    has the defaults (the registry's own check reports it)."""
    target = BUILTIN_BACKENDS.get(backend) if backend is not None else None
    if target is not None:
        return _traits(_class_values(target))
    if backend is None or ":" not in backend:
        return BackendTraits()
    module, _, name = backend.partition(":")
    try:
        backend_class = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return BackendTraits()
    return _traits({trait: getattr(backend_class, trait) for trait in TRAIT_NAMES if hasattr(backend_class, trait)})


def uses_response_cache(backend: str) -> bool:
    """Whether a backend's answers go through the response cache (its `uses_cache`: not a replay of published
    answers). A backend that cannot be imported counts as caching (the asset then fails with the registry's own
    message)."""
    return traits(backend).uses_cache
