"""Opening the SC-TC-Bench data (pure Python, no Dagster): where it comes from, and one open copy per location.

The Dagster resource (`resources/upstream.py`) and the estimate (`sctc plan`) both open it here, so a run and its
estimate read the same files.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from sctc_assets.lib.paths import default_upstream_cache_dir
from sctc_assets.lib.sctc_upstream import SCTC_COMMIT, SCTC_DEFAULT_URL, SCTC_ENV_VAR, SCTC_MARKERS, commit_of
from sctc_assets.lib.upstream_source import UpstreamArchiveError, UpstreamError, UpstreamSource

_opened: dict[tuple[str, str], UpstreamSource] = {}
_lock = threading.Lock()


def resolved_location(location: str | None = None, cache_dir: Path | None = None) -> str:
    """`location`, else `$SCTC_UPSTREAM`, else a copy of the pinned commit an earlier run extracted under
    `cache_dir`, else the pinned GitHub archive."""
    configured = location or os.environ.get(SCTC_ENV_VAR)
    if configured:
        return configured
    # The pinned commit's files are the same wherever they came from: an archive extracted by an earlier run
    # (`sctc run --upstream …`) serves the default, so the UI works on machines that cannot reach GitHub.
    extracted = (cache_dir or default_upstream_cache_dir()) / "extracted"
    for candidate in sorted(extracted.glob(f"*/*{SCTC_COMMIT}")) if extracted.is_dir() else []:
        # `.staging-*` folders carry `.complete` just before they are renamed or discarded.
        finished = (candidate.parent / ".complete").exists() and not candidate.parent.name.startswith(".")
        if finished and candidate.is_dir():
            return str(candidate)
    return SCTC_DEFAULT_URL


def open_sctc_upstream(location: str | None = None, cache_dir: Path | None = None) -> UpstreamSource:
    """The SC-TC-Bench data at `location` (see `resolved_location`), opened once per process."""
    cache_dir = cache_dir or default_upstream_cache_dir()
    resolved = resolved_location(location, cache_dir)
    with _lock:
        key = (resolved, str(cache_dir))
        if key not in _opened:
            try:
                _opened[key] = UpstreamSource.open(resolved, cache_dir=cache_dir, markers=SCTC_MARKERS)
            except UpstreamError as exc:
                if isinstance(exc, UpstreamArchiveError):
                    raise
                raise UpstreamError(f"{exc} (point --upstream or ${SCTC_ENV_VAR} at a copy: a directory, "
                                    "archive or URL)") from exc
        return _opened[key]


def sctc_provenance(source: UpstreamSource) -> dict[str, str]:
    commit = commit_of(source.root)
    note = "pinned commit" if commit and SCTC_COMMIT.startswith(commit) else (
        f"WARNING: not the pinned commit {SCTC_COMMIT}" if commit else "commit unknown (plain directory)")
    return {"upstream": source.origin, "upstream_commit": commit or "unknown", "upstream_note": note}
