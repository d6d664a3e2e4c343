"""The batch settings of a registry entry, as `sctc run`, `sctc plan` and `sctc models` read them before any backend
is built: their checks (one line each, naming the file, the model and the key), what `sctc run --batch` turns on,
and the price a batch model is estimated at.

A registry entry of an API model sends its uncached requests as provider batches with `batch: true`
(docs/batches.md); `sctc run --batch` does the same for every chosen model whose backend has a batch API, through
`$SCTC_BATCH_MODELS` (the keys it applies to, which `ModelRegistryResource.backend` reads as an override, so the
registry file is left as it is). `$SCTC_BATCH_WAIT` says what a backend does while its batches run: `foreground`
(poll until they end; what `sctc run` sets) or `detach` (record them and stop; `sctc run --no-wait`, and every run
started elsewhere, such as the UI's).

Pure Python: the backends' traits come from `lib/backend_catalog.py`, which reads them without importing a backend.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from sctc_assets.lib.backend_catalog import traits

BATCH_MODELS_ENV = "SCTC_BATCH_MODELS"  # registry keys (space-separated) `sctc run --batch` runs as batches
from sctc_assets.lib.batch_driver import WAIT_ENV as BATCH_WAIT_ENV  # noqa: E402  (one name for the wait mode)
FOREGROUND, DETACH = "foreground", "detach"
# What a batch costs against the synchronous price: the three providers' batch APIs charge half.
DEFAULT_PRICE_FACTOR = 0.5
# The registry settings of batches (`ApiBackend`'s fields) and their ranges: (lowest, lowest is allowed, highest).
_RANGES: dict[str, tuple[float, bool, float | None]] = {
    "batch_poll_seconds": (1, True, None),
    "batch_price_factor": (0, False, 1),
    "batch_retry_sync_max": (0, True, None),
    "batch_max_rounds": (1, True, None),
}
_INTEGER_SETTINGS = ("batch_retry_sync_max", "batch_max_rounds")


def batch_api(backend: str | None) -> str | None:
    """The batch API a registry `backend:` value's class has (`"openai"`, `"anthropic"`, `"gemini"`), else None:
    its `batch_api` trait."""
    return getattr(traits(backend), "batch_api", None)


def _range_text(low: float, low_in: bool, high: float | None) -> str:
    return f"{'[' if low_in else '('}{low:g}, {'∞)' if high is None else f'{high:g}]'}"


def batch_setting_problems(entry: Any) -> dict[str, str]:
    """The entry's batch settings that are wrong, by key, each as one line naming the file, the model and the key:
    `batch` not a boolean, or true on a backend without a batch API; a number out of its range."""
    where = f"{entry.source}: model {entry.key!r}"
    settings: Mapping[str, Any] = entry.settings
    problems: dict[str, str] = {}
    if "batch" in settings:
        value = settings["batch"]
        if not isinstance(value, bool):
            problems["batch"] = f"{where}: batch: must be true or false, got {value!r}"
        elif value and batch_api(entry.backend) is None:
            problems["batch"] = (f"{where}: batch: true, but the {entry.backend!r} backend has no batch API (the "
                                 "openai, anthropic and gemini backends have one); remove `batch` from the entry")
    for name, (low, low_in, high) in _RANGES.items():
        if name not in settings:
            continue
        value = settings[name]
        integer = name in _INTEGER_SETTINGS
        if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
            problems[name] = f"{where}: {name}: must be {'a whole number' if integer else 'a number'}, got {value!r}"
        elif value < low or (value == low and not low_in) or (high is not None and value > high):
            problems[name] = f"{where}: {name}: must be in {_range_text(low, low_in, high)}, got {value!r}"
    return problems


def batch_models_from_environment() -> frozenset[str]:
    """The registry keys `sctc run --batch` turned batches on for (`$SCTC_BATCH_MODELS`)."""
    return frozenset(os.environ.get(BATCH_MODELS_ENV, "").split())


def batch_overrides(key: str) -> dict[str, Any]:
    """The backend settings `sctc run --batch` adds to the entry `key`: `{"batch": True}` when it chose it."""
    return {"batch": True} if key in batch_models_from_environment() else {}


def batch_pricing(backend: Any, pricing: tuple[float | None, float | None]) -> tuple[tuple[float | None, float | None],
                                                                                     float | None]:
    """(prices, factor): the USD per million input and output tokens a backend's calls cost, at the batch price
    (`batch_price_factor` × the synchronous price) when it sends them as batches; factor None when it does not."""
    if not getattr(backend, "batch", False):
        return pricing, None
    factor = float(getattr(backend, "batch_price_factor", DEFAULT_PRICE_FACTOR))
    return tuple(None if price is None else price * factor for price in pricing), factor  # type: ignore[return-value]
