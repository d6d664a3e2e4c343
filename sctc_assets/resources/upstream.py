"""The SC-TC-Bench upstream data as a Dagster resource."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Optional

import dagster as dg
from pydantic import Field

from sctc_assets.lib.paths import default_upstream_cache_dir
from sctc_assets.lib.sctc_upstream import SCTC_COMMIT, SCTC_DEFAULT_URL, SCTC_ENV_VAR, SCTC_MARKERS, commit_of
from sctc_assets.lib.upstream_source import UpstreamArchiveError, UpstreamError, UpstreamSource

_opened: dict[tuple[str, str], UpstreamSource] = {}
_lock = threading.Lock()


class SCTCUpstreamResource(dg.ConfigurableResource):
    """Where the SC-TC-Bench data comes from: a directory, a .tar.gz/.tar.xz/.zip archive or a URL.

    Unset, it reads `$SCTC_UPSTREAM`; failing that it uses a copy of the pinned commit that an earlier run
    extracted under `data/upstream/`, else downloads the pinned GitHub archive once into `data/upstream/`.
    """

    location: Optional[str] = Field(
        default=None, description=f"Directory, archive or URL; default ${SCTC_ENV_VAR}, else the pinned GitHub archive."
    )
    cache_dir: Optional[str] = Field(default=None, description="Where archives are extracted and URLs downloaded.")

    def resolved_location(self) -> str:
        configured = self.location or os.environ.get(SCTC_ENV_VAR)
        if configured:
            return configured
        # The pinned commit's files are the same wherever they came from: an archive extracted by an earlier run
        # (`sctc run --upstream …`) serves the default, so the UI works on machines that cannot reach GitHub.
        extracted = self._cache_dir() / "extracted"
        for candidate in sorted(extracted.glob(f"*/*{SCTC_COMMIT}")) if extracted.is_dir() else []:
            # `.staging-*` folders carry `.complete` just before they are renamed or discarded.
            finished = (candidate.parent / ".complete").exists() and not candidate.parent.name.startswith(".")
            if finished and candidate.is_dir():
                return str(candidate)
        return SCTC_DEFAULT_URL

    def _cache_dir(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else default_upstream_cache_dir()

    def open(self) -> UpstreamSource:
        location = self.resolved_location()
        cache_dir = str(self._cache_dir())
        with _lock:
            key = (location, cache_dir)
            if key not in _opened:
                try:
                    _opened[key] = UpstreamSource.open(location, cache_dir=cache_dir, markers=SCTC_MARKERS)
                except UpstreamError as exc:
                    if isinstance(exc, UpstreamArchiveError):
                        raise
                    raise UpstreamError(f"{exc} (point --upstream or ${SCTC_ENV_VAR} at a copy: a directory, "
                                        "archive or URL)") from exc
            return _opened[key]

    def provenance(self) -> dict[str, str]:
        source = self.open()
        commit = commit_of(source.root)
        note = "pinned commit" if commit and SCTC_COMMIT.startswith(commit) else (
            f"WARNING: not the pinned commit {SCTC_COMMIT}" if commit else "commit unknown (plain directory)")
        return {"upstream": source.origin, "upstream_commit": commit or "unknown", "upstream_note": note}
