"""The built-in backends by name, and the settings each one has, known without importing it.

A backend is a Dagster resource, so importing one loads Dagster (and the openai SDK, or torch). `sctc models` only
needs the names of a built-in backend's settings to catch a typo, so they are read from the class body in its
source file: every annotated attribute that is neither a `ClassVar` nor private is a pydantic field, hence a
setting (`test_backend_catalog` checks this against `model_fields` of every built-in backend).
"""

from __future__ import annotations

import ast
import importlib
from functools import lru_cache
from pathlib import Path

BUILTIN_BACKENDS = {
    "openai": "sctc_assets.backends.openai_backend:OpenAIBackend",
    "anthropic": "sctc_assets.backends.anthropic_backend:AnthropicBackend",
    "gemini": "sctc_assets.backends.gemini_backend:GeminiBackend",
    "transformers": "sctc_assets.backends.transformers_backend:TransformersBackend",
    "replay": "sctc_assets.backends.replay:ReplayBackend",
    "tsb_replay": "sctc_assets.backends.tsb_replay:TSBReplayBackend",
}
# The built-in backends that replay published answers and so bypass the response cache (their `uses_cache`).
REPLAY_BACKENDS = frozenset({"replay", "tsb_replay"})
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_BASE_CLASS = "sctc_assets.backends.base:ModelBackend"


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


@lru_cache(maxsize=None)
def _fields(target: str) -> frozenset[str]:
    if target == _BASE_CLASS:
        return frozenset()  # the interface defines methods and class variables only
    module, class_name = target.split(":", 1)
    tree = ast.parse(_source_file(module).read_text(encoding="utf-8"))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    if class_name not in classes:
        raise LookupError(f"{module} defines no class {class_name}")
    node = classes[class_name]
    names = {statement.target.id for statement in node.body
             if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
             and not statement.target.id.startswith("_") and not _is_class_var(statement.annotation)}
    imported = _imported_names(tree, module)
    for base in node.bases:
        if isinstance(base, ast.Name):
            base_target = f"{module}:{base.id}" if base.id in classes else imported.get(base.id)
            if base_target is None:
                raise LookupError(f"{target}: cannot follow base class {base.id}")
            names |= _fields(base_target)
    return frozenset(names)


def builtin_settings(backend: str) -> frozenset[str] | None:
    """The settings of a built-in backend, or None for a backend of your own (`module:Class`, imported to check)."""
    target = BUILTIN_BACKENDS.get(backend)
    return _fields(target) if target is not None else None


def uses_response_cache(backend: str) -> bool:
    """Whether a backend's answers go through the response cache: not a replay of published answers. A backend of
    your own (`module:Class`) is imported to read its `uses_cache`; one that cannot be imported counts as caching
    (the asset then fails with the registry's own message)."""
    if backend in BUILTIN_BACKENDS:
        return backend not in REPLAY_BACKENDS
    module, _, name = backend.partition(":")
    try:
        backend_class = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return True
    return bool(getattr(backend_class, "uses_cache", True))
