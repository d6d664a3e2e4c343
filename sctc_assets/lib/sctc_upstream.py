"""The SC-TC-Bench data (github.com/brucelyu17/SC-TC-Bench), pinned to one commit (pure Python, no Dagster): the
layout of its files, and opening it (where it comes from, and one open copy per location).

The Dagster resource (`resources/upstream.py`) and the estimate (`sctc plan`) both open it here, so a run and its
estimate read the same files.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from sctc_assets.lib.paths import default_upstream_cache_dir
from sctc_assets.lib.upstream_source import UpstreamArchiveError, UpstreamError, UpstreamSource
from sctc_assets.lib.varieties import MAINLAND, TAIWAN, VARIETIES

SCTC_COMMIT = "aaad554832988d6b3bcc0fa041968f62f87b9ba0"
SCTC_DEFAULT_URL = f"https://github.com/brucelyu17/SC-TC-Bench/archive/{SCTC_COMMIT}.tar.gz"
SCTC_MARKERS = ("source_data", "prompt", "response")
SCTC_ENV_VAR = "SCTC_UPSTREAM"

# Project language codes → the words upstream file names use.
UPSTREAM_LANG = {row.code: row.upstream_spelling for row in VARIETIES}

# The paper's 11 LLMs under their upstream file-name prefixes, in the order the authors' scripts use.
PAPER_MODELS = (
    "qwen", "baichuan2", "chatglm2", "breeze", "taiwan-llm", "ds",
    "gpt4o", "gpt4", "gpt3.5", "llama3-70b", "llama3-8b",
)

TERMS_FILE = "source_data/regional_term_and_definition.csv"
TERM_COLUMNS = ("conceptId", MAINLAND.upstream_spelling, TAIWAN.upstream_spelling, "definition_simplified",
                "definition_traditional", "category", "definition_source")


def term_prompt_file(lang: str, variant: int) -> str:
    return f"prompt/regional_term/{UPSTREAM_LANG[lang]}_{variant}.csv"


def term_response_file(upstream_name: str, lang: str, variant: int, *, no_think: bool = False) -> str:
    suffix = "_no_think" if no_think else ""
    return f"response/regional_term/raw/{upstream_name}_{UPSTREAM_LANG[lang]}_{variant}{suffix}.csv"


def term_judgement_file(upstream_name: str, lang: str, variant: int) -> str:
    return f"response/regional_term/correctness_annotated_by_gpt/{upstream_name}_{UPSTREAM_LANG[lang]}_{variant}.csv"


def term_details_file(lang: str, variant: int) -> str:
    return f"supplementary_data/regional_term/response_details_{UPSTREAM_LANG[lang]}_{variant}.csv"


def commit_of(root: Path) -> str | None:
    """The commit a GitHub archive's top folder names (`SC-TC-Bench-<sha>`), if any."""
    match = re.search(r"([0-9a-f]{7,40})$", Path(root).name)
    return match.group(1) if match else None


# Regional name task. Upstream prompt ids: 0 main, 1 popularity, 2 same name / different script, 3 gender balanced.
NAME_CANDIDATE_COLUMNS = ("trial_num", "mainland_name", "taiwan_name", "candidate_name")


def name_prompt_file(lang: str, prompt_id: int) -> str:
    return f"prompt/regional_name/{UPSTREAM_LANG[lang]}_{prompt_id}.csv"


def name_candidate_file(prompt_id: int) -> str:
    return f"source_data/candidate_name_list/prompt_id_{prompt_id}.csv"


def name_response_file(upstream_name: str, lang: str, prompt_id: int, *, stage: str = "raw") -> str:
    """`stage`: `raw` (the answers) or `final` (the authors' extracted name and region per answer)."""
    return f"response/regional_name/{stage}/{upstream_name}_{UPSTREAM_LANG[lang]}_{prompt_id}.csv"


def name_permutation_file(upstream_name: str, lang: str, permutations: int) -> str:
    return f"response/regional_name/permutation_final/{upstream_name}_{UPSTREAM_LANG[lang]}_{permutations}.csv"


# Opening the data.

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
