"""The SC-TC-Bench upstream data as a Dagster resource."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import dagster as dg
from pydantic import Field

from sctc_assets.lib.paths import default_upstream_cache_dir
from sctc_assets.lib.sctc_upstream import SCTC_ENV_VAR, open_sctc_upstream, resolved_location, sctc_provenance
from sctc_assets.lib.upstream_source import UpstreamSource


class SCTCUpstreamResource(dg.ConfigurableResource):
    """Where the SC-TC-Bench data comes from: a directory, a .tar.gz/.tar.xz/.zip archive or a URL.

    Unset, it reads `$SCTC_UPSTREAM`; failing that it uses a copy of the pinned commit that an earlier run
    extracted under `data/upstream/`, else downloads the pinned GitHub archive once per machine into the download
    cache (`$SCTC_DOWNLOAD_CACHE`) and extracts it under `data/upstream/`.
    """

    location: Optional[str] = Field(
        default=None, description=f"Directory, archive or URL; default ${SCTC_ENV_VAR}, else the pinned GitHub archive."
    )
    cache_dir: Optional[str] = Field(default=None, description="Where archives are extracted (URLs are downloaded into "
                                                               "the machine's download cache).")

    def resolved_location(self) -> str:
        return resolved_location(self.location, self._cache_dir())

    def _cache_dir(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else default_upstream_cache_dir()

    def open(self) -> UpstreamSource:
        return open_sctc_upstream(self.location, self._cache_dir())

    def provenance(self) -> dict[str, str]:
        return sctc_provenance(self.open())
