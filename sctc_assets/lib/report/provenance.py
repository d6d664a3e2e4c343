"""Where the report's numbers come from: platform and package versions, the registry entries (without secrets),
and what the response tables say about each model's answers (served model, fingerprint, cache, tokens, cost)."""

from __future__ import annotations

import datetime as dt
import json
import platform
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit, urlunsplit

import pandas as pd

from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.paths import PACKAGE_DIR
from sctc_assets.lib.batch_usage import BATCH_COLUMN, BatchUsage, batch_cost, batch_usage
from sctc_assets.lib.model_registry import ModelEntry
from sctc_assets.lib.report.inputs import USAGE_COLUMNS
from sctc_assets.lib.table_store import arrow_source

KEY_PACKAGES = ("dagster", "pandas", "pyarrow", "numpy", "scipy", "statsmodels", "matplotlib", "jinja2",
                "opencc", "chinese-converter", "transformers", "torch", "openai", "httpx")
# Setting names that could hold a credential, as whole parts of the name (`access_token`, `X-Api-Key`, not
# `tokenizer`); `*_env` settings hold the NAME of a variable and are kept, and so are numbers (`max_tokens: 512`).
_SECRET_NAME = re.compile(r"(^|[_\-.])(api[_\-]?key|key|tokens?|secrets?|passwords?|passwd|pass|auth|authorization|"
                          r"credentials?|cookies?|bearer)($|[_\-.])", re.IGNORECASE)
REDACTED = "(redacted)"
_USAGE_READ = ["model", "outcome", "status", "cached", "input_tokens", "output_tokens", "served_model",
               "system_fingerprint", BATCH_COLUMN]


def package_versions(names: tuple[str, ...] = KEY_PACKAGES) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(PACKAGE_DIR.parent), *args], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def platform_info() -> dict[str, Any]:
    """Version, git commit (when run from a checkout; `+dirty` with uncommitted changes), Python, packages."""
    try:
        version = metadata.version("sctc-assets")
    except metadata.PackageNotFoundError:
        version = "unknown (not installed)"
    commit = _git("rev-parse", "HEAD") if (PACKAGE_DIR.parent / ".git").exists() else None
    if commit and _git("status", "--porcelain", "--untracked-files=no"):
        commit += " (+ uncommitted changes)"
    return {"version": version, "git_commit": commit or "not a git checkout",
            "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
            "system": f"{platform.system()} {platform.machine()}", "packages": package_versions()}


def _clean_url(value: str) -> str:
    """A URL without its user:password part."""
    try:
        parts = urlsplit(value)
    except ValueError:
        return value
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"{REDACTED}@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return value


def redact(value: Any, name: str = "") -> Any:
    """Settings as they may be shown: credential-like settings replaced, URLs without user info, recursively."""
    if name and _SECRET_NAME.search(name) and not name.endswith("_env") \
            and not isinstance(value, (bool, int, float, type(None))):
        return REDACTED
    if isinstance(value, Mapping):
        return {str(key): redact(item, str(key)) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(item, name) for item in value]
    if isinstance(value, str) and "://" in value:
        return _clean_url(value)
    return value


def registry_entry(entry: ModelEntry) -> dict[str, Any]:
    return {"key": entry.key, "backend": entry.backend, "description": entry.description,
            "settings": redact(dict(entry.settings)), "benchmarks": redact(dict(entry.benchmarks)),
            "defined_in": entry.source}


def model_details(entry: ModelEntry | None) -> dict[str, Any]:
    """What a replayed Pro-study file says about its model (origin, OpenRouter id, date); else nothing."""
    if entry is None or not traits(entry.backend).replays_benchmark("sovereignty") \
            or not entry.settings.get("results_file"):
        return {}
    try:
        document = json.loads(Path(str(entry.settings["results_file"])).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {"origin": document.get("source"), "published_model_id": document.get("model_id"),
            "published_at": document.get("timestamp"), "risk_level": document.get("risk_level")}


def _partition_files(storage_dir: Path, table: str) -> list[Path]:
    folder = storage_dir / table
    return sorted(folder.rglob("*.parquet")) if folder.is_dir() else []


def _distinct(values: pd.Series, limit: int = 5) -> str:
    found = [str(value) for value in values.dropna().unique() if str(value)]
    return ", ".join(found[:limit]) + (f" (+{len(found) - limit} more)" if len(found) > limit else "")


def response_usage(storage_dir: Path, response_tables: Mapping[str, str],
                   models: list[str] | None = None) -> pd.DataFrame:
    """Per benchmark and model: answers, cached/new, errors, tokens (all and new), the served model ids and system
    fingerprints the API returned (tables written before those columns existed have none), when the answers
    were stored, and the answers that came through a provider batch (with the new ones' tokens), from
    `response_tables` (benchmark → its table of answers). Reads a few columns of each partition file only."""
    import pyarrow.parquet as pq

    records = []
    for benchmark, table in response_tables.items():
        frames = []
        for path in _partition_files(storage_dir, table):
            model = next((part.split("=", 1)[1] for part in path.parts if part.startswith("model=")), None)
            if models is not None and model is not None and model not in models:
                continue
            where, filesystem = arrow_source(path)  # the store may be a URL (lib/table_store.py)
            available = set(pq.read_schema(where, filesystem=filesystem).names)
            frame = pd.read_parquet(where, columns=[column for column in _USAGE_READ if column in available],
                                    filesystem=filesystem)
            if frame.empty:
                continue
            frame["stored_at"] = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc)
            frames.append(frame)
        if not frames:
            continue
        answers = pd.concat(frames, ignore_index=True)
        for model, frame in answers.groupby("model", sort=True):
            cached = frame["cached"].fillna(False).astype(bool) if "cached" in frame \
                else pd.Series(False, index=frame.index)
            failed = frame["outcome"].eq("error") if "outcome" in frame else (
                frame["status"].eq("error") if "status" in frame else pd.Series(False, index=frame.index))
            tokens = {}
            for column in ("input_tokens", "output_tokens"):
                values = pd.to_numeric(frame[column], errors="coerce") if column in frame else pd.Series(dtype=float)
                tokens[column] = int(values.sum()) if len(values) else 0
                tokens[f"{column}_new"] = int(values[~cached].sum()) if len(values) else 0
            batched = batch_usage(frame).get(str(model), BatchUsage())
            records.append({
                "benchmark": benchmark, "model": model, "answers": len(frame), "cached": int(cached.sum()),
                "new": int((~cached).sum()), "errors": int(failed.fillna(False).sum()), **tokens,
                "served_models": _distinct(frame["served_model"]) if "served_model" in frame else "",
                "system_fingerprints": _distinct(frame["system_fingerprint"]) if "system_fingerprint" in frame else "",
                "stored_at": frame["stored_at"].max(), "batched": batched.answers,
                "input_tokens_batched_new": batched.input_tokens_new,
                "output_tokens_batched_new": batched.output_tokens_new,
            })
    return pd.DataFrame(records, columns=USAGE_COLUMNS)


def usage_count(value: Any) -> int:
    """A usage count; 0 where a usage table has none (a frame of an earlier version: missing or NaN)."""
    return int(value) if isinstance(value, (int, float)) and value == value else 0


def cost(row: Mapping[str, Any], entry: ModelEntry | None) -> float | None:
    """Cost of the new (not cached) answers at the registry's prices, those that came through a provider batch at
    the batch price (`batch_price_factor`); None when the entry has no price."""
    if entry is None:
        return None
    price_in, price_out = entry.settings.get("price_input_per_mtok"), entry.settings.get("price_output_per_mtok")
    if price_in is None and price_out is None:
        return None
    batched = BatchUsage(*(usage_count(row.get(name)) for name in ("batched", "input_tokens_batched_new",
                                                                 "output_tokens_batched_new")))
    synchronous = (int(row["input_tokens_new"]) - batched.input_tokens_new) * float(price_in or 0) \
        + (int(row["output_tokens_new"]) - batched.output_tokens_new) * float(price_out or 0)
    return synchronous / 1e6 + (batch_cost(batched, entry.settings) or 0.0)
