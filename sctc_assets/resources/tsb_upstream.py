"""The Taiwan Sovereignty Benchmark data (prompts, red-flag lists, published results) as a Dagster resource."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Optional

import dagster as dg
from pydantic import Field

from sctc_assets.lib.paths import default_upstream_cache_dir
from sctc_assets.lib.sctc_upstream import commit_of
from sctc_assets.lib.sovereignty.prompt_file import PROMPT_FILES_ENV_VAR, CustomPromptSet, read_prompt_files
from sctc_assets.lib.sovereignty.upstream import (
    RED_FLAGS_ENV_VAR, TSB_ENV_VAR, RedFlagList, TSBRoots, load_red_flags, shared_roots, upstream_locations,
)
from sctc_assets.lib.upstream_source import download

class TSBUpstreamResource(dg.ConfigurableResource):
    """Where the benchmark's files come from: directories, .tar.gz/.zip archives or URLs holding the original
    repository (prompts, red flags v1.0.0) and the Pro repository (red flags v1.1.0, published results).

    Unset, it reads `$SCTC_TSB_UPSTREAM` (several locations separated by spaces, shell quoting allowed); failing
    that it downloads both pinned GitHub archives once per machine into the download cache (`$SCTC_DOWNLOAD_CACHE`)
    and extracts them under `data/upstream/`.
    """

    location: Optional[str] = Field(
        default=None, description=f"Directories, archives or URLs separated by spaces; default ${TSB_ENV_VAR}, "
                                  "else the two pinned GitHub archives.")
    red_flags: Optional[str] = Field(
        default=None, description=f"v1.1.0 (default), v1.0.0, or a red_flags.json path or URL; "
                                  f"default ${RED_FLAGS_ENV_VAR}.")
    cache_dir: Optional[str] = Field(default=None, description="Where archives are extracted (URLs are downloaded into "
                                                               "the machine's download cache).")
    prompt_files: Optional[str] = Field(
        default=None, description=f"Custom prompt files (own prompts, red-flag list and judge instructions), "
                                  f"separated by spaces, shell quoting allowed; default ${PROMPT_FILES_ENV_VAR}.")

    def locations(self) -> tuple[str, ...]:
        return upstream_locations(self.location)

    def _cache_dir(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else default_upstream_cache_dir()

    def roots(self) -> TSBRoots:
        return shared_roots(self.location, self._cache_dir())

    def red_flag_choice(self) -> str:
        return self.red_flags or os.environ.get(RED_FLAGS_ENV_VAR) or "v1.1.0"

    def red_flag_list(self) -> RedFlagList:
        return load_red_flags(self.red_flag_choice(), self.roots(),
                              fetch=download)

    def prompt_file_paths(self) -> list[str]:
        configured = self.prompt_files if self.prompt_files is not None else os.environ.get(PROMPT_FILES_ENV_VAR)
        return shlex.split(configured) if configured else []

    def custom_prompt_sets(self) -> dict[str, CustomPromptSet]:
        """The custom prompt sets by name (`--sovereignty-prompt-file`), read and checked on each call."""
        return read_prompt_files(self.prompt_file_paths())

    def provenance(self) -> dict[str, str]:
        roots = self.roots()
        return {"tsb_upstream": " ".join(self.locations()),
                "tsb_benchmark_commit": commit_of(roots.benchmark) or "unknown",
                "tsb_pro_commit": (commit_of(roots.pro) or "unknown") if roots.pro else "not present"}
