"""Model backends behind one interface (`ModelBackend`), chosen per model by the registry.

Backend classes are imported lazily so loading the Dagster definitions never imports torch.
"""

from __future__ import annotations

import importlib

from sctc_assets.backends.base import BackendUnavailable, ModelBackend
from sctc_assets.lib.backend_catalog import BUILTIN_BACKENDS


def backend_class(name: str) -> type[ModelBackend]:
    """A built-in backend name, or `package.module:ClassName` for a backend of your own."""
    target = BUILTIN_BACKENDS.get(name, name)
    if ":" not in target:
        raise ValueError(f"unknown backend {name!r}; use one of {sorted(BUILTIN_BACKENDS)} or 'module:ClassName'")
    module_name, class_name = target.split(":", 1)
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, ModelBackend)):
        raise ValueError(f"backend {name!r}: {target} is not a ModelBackend subclass")
    return cls


__all__ = ["BUILTIN_BACKENDS", "BackendUnavailable", "ModelBackend", "backend_class"]
