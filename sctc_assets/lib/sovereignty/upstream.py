"""Layout of the Taiwan Sovereignty Benchmark data: two repositories, each pinned to one commit.

- hsiaoa/ai-taiwan-sovereignty-benchmark: the prompts (stage 1, the quick test, stages 2 and 3) and the red-flag
  list v1.0.0 (Traditional Chinese and English only).
- dAAAb/ai-taiwan-sovereignty-benchmark-pro: the red-flag list v1.1.0 (adds Simplified forms) and the published
  bilingual results (`results/bilingual/*.json`).

A location may hold either repository, both side by side (one or two folders down), or be one repository's
archive.
"""

from __future__ import annotations

import json
import os
import shlex
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from sctc_assets.lib.paths import default_upstream_cache_dir
from sctc_assets.lib.text_files import json_type, read_utf8
from sctc_assets.lib.upstream_source import (UpstreamError, UpstreamSchemaError, candidate_roots, is_url,
                                            local_directory)

TSB_COMMIT = "2351914892de9a9eb65f5bc90f7abd7870daabcd"
PRO_COMMIT = "470ccf6d9e593174835a30d43dd6155b181da1d6"
TSB_DEFAULT_URLS = (
    f"https://github.com/hsiaoa/ai-taiwan-sovereignty-benchmark/archive/{TSB_COMMIT}.tar.gz",
    f"https://github.com/dAAAb/ai-taiwan-sovereignty-benchmark-pro/archive/{PRO_COMMIT}.tar.gz",
)
TSB_ENV_VAR = "SCTC_TSB_UPSTREAM"
RED_FLAGS_ENV_VAR = "SCTC_TSB_RED_FLAGS"

BENCHMARK_MARKER = "benchmark/stage1_sovereignty/prompts.json"
PRO_RESULTS_DIR = "results/bilingual"
ORIGINAL_RED_FLAGS = "benchmark/stage1_sovereignty/red_flags.json"
# The shared copy keeps the Pro list at its top; the Pro repository keeps it where the original repository does.
PRO_RED_FLAGS = ("red_flags.json", ORIGINAL_RED_FLAGS)

# Prompt set → (file, key of its prompt list) pairs. Stage 1 is the benchmark; the others are optional extras.
PROMPT_SETS: dict[str, tuple[tuple[str, str], ...]] = {
    "stage1_sovereignty": ((BENCHMARK_MARKER, "prompts"),),
    "quick_test": (("benchmark/quick_test.json", "prompts"),),
    "stage2_knowledge": tuple((f"benchmark/stage2_knowledge/{topic}.json", "prompts")
                              for topic in ("politics", "history", "economy", "culture")),
    "stage3_stress": (("benchmark/stage3_stress/sensitive_topics.json", "sensitive_topics"),
                      ("benchmark/stage3_stress/sensitive_topics.json", "fact_check")),
}
MAIN_PROMPT_SET = "stage1_sovereignty"

# Red-flag types: the paper's A (instant fail), B (warning, manual review) and C (soft censorship).
FLAG_TYPES = {"a": "instant_fail", "b": "warning", "c": "soft_censorship"}
FLAG_LANGS = ("zh", "en")


@dataclass(frozen=True)
class TSBRoots:
    benchmark: Path
    pro: Path | None


@dataclass(frozen=True)
class RedFlagList:
    version: str
    source: str
    # type letter ("a", "b", "c") → "zh"/"en" → phrases, in the file's order
    phrases: Mapping[str, Mapping[str, tuple[str, ...]]]


def read_json(path: Path, *, name: str | None = None) -> Any:
    """A JSON file; a missing or unreadable one is reported with its name."""
    where = name or str(path)
    if not path.is_file():
        raise UpstreamError(f"file missing: {where}")
    text = read_utf8(path, name=where, error=UpstreamSchemaError)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UpstreamSchemaError(f"{where}: not valid JSON ({exc})") from exc


def locate_roots(directories: Sequence[Path], origin: str) -> TSBRoots:
    """The original repository's data root and the Pro repository's (if any) among `directories`, each searched
    two folders deep (an archive of both repositories side by side adds a top folder)."""
    candidates = [folder for directory in directories for child in candidate_roots(directory)
                  for folder in ([child] if child == directory else candidate_roots(child))]
    pro = [folder for folder in candidates if (folder / PRO_RESULTS_DIR).is_dir()]
    benchmark = [folder for folder in candidates if (folder / BENCHMARK_MARKER).is_file()]
    # The Pro repository carries a copy of the prompts; the original repository's are the reference.
    benchmark.sort(key=lambda folder: folder in pro)
    if not benchmark:
        raise UpstreamError(f"{origin}: no {BENCHMARK_MARKER} found here or one folder down")
    return TSBRoots(benchmark=benchmark[0], pro=pro[0] if pro else None)


def upstream_locations(configured: str | None = None) -> tuple[str, ...]:
    """The locations to read: `configured`, else `$SCTC_TSB_UPSTREAM` (shell quoting allowed), else the pinned
    GitHub archives."""
    configured = configured or os.environ.get(TSB_ENV_VAR)
    return tuple(shlex.split(configured)) if configured else TSB_DEFAULT_URLS


def open_roots(locations: Sequence[str], cache_dir: Path) -> TSBRoots:
    """The benchmark's and the Pro study's folders among `locations` (extracted or downloaded under `cache_dir`)."""
    try:
        directories = [local_directory(location, cache_dir) for location in locations]
    except UpstreamError as exc:
        raise UpstreamError(f"{exc} (point --tsb-upstream or ${TSB_ENV_VAR} at a copy)") from exc
    return locate_roots(directories, origin=" ".join(locations))


_opened_roots: dict[tuple[tuple[str, ...], str], TSBRoots] = {}
_roots_lock = threading.Lock()


def shared_roots(location: str | None = None, cache_dir: Path | None = None) -> TSBRoots:
    """`open_roots` of `upstream_locations(location)`, opened once per process (the resource and the estimate)."""
    cache_dir = cache_dir or default_upstream_cache_dir()
    key = (upstream_locations(location), str(cache_dir))
    with _roots_lock:
        if key not in _opened_roots:
            _opened_roots[key] = open_roots(key[0], cache_dir)
        return _opened_roots[key]


def _string_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise UpstreamSchemaError(f"{where}: expected a list of non-empty strings, found {json_type(value)}")
    wrong = [index for index, item in enumerate(value) if not (isinstance(item, str) and item)]
    if wrong:
        raise UpstreamSchemaError(f"{where}[{wrong[0]}]: expected a non-empty string, found {json_type(value[wrong[0]])}")
    return tuple(value)


def parse_red_flags(document: Any, source: str) -> RedFlagList:
    if not isinstance(document, Mapping):
        raise UpstreamSchemaError(f"{source}: expected an object, found {json_type(document)}")
    phrases: dict[str, dict[str, tuple[str, ...]]] = {}
    for letter, section in FLAG_TYPES.items():
        if section not in document:
            raise UpstreamSchemaError(f"{source}: missing object `{section}`")
        block = document[section]
        if not isinstance(block, Mapping):
            raise UpstreamSchemaError(f"{source}: section `{section}`: expected an object (one phrase list per "
                                      f"language: {', '.join(FLAG_LANGS)}), found {json_type(block)}")
        phrases[letter] = {lang: _string_list(block.get(lang), f"{source}: {section}.{lang}") for lang in FLAG_LANGS}
    metadata = document.get("metadata") if isinstance(document.get("metadata"), Mapping) else {}
    return RedFlagList(version=str(metadata.get("version") or "unknown"), source=source, phrases=phrases)


def red_flag_file(roots: TSBRoots, version: str) -> Path:
    """The list of a published version: v1.0.0 from the original repository, v1.1.0 from the Pro repository."""
    if version == "1.0.0":
        return roots.benchmark / ORIGINAL_RED_FLAGS
    if roots.pro is None:
        raise UpstreamError(f"red-flag list v{version} is in the Pro repository, which the upstream location lacks"
                            f" (add it, or choose a list with --red-flags PATH|URL)")
    for relative in PRO_RED_FLAGS:
        if (roots.pro / relative).is_file():
            return roots.pro / relative
    raise UpstreamError(f"{roots.pro}: none of {list(PRO_RED_FLAGS)} found")


def prompt_items(roots: TSBRoots, prompt_set: str) -> list[dict[str, str]]:
    """The prompts of one set: id, category, prompt_zh (Traditional Chinese) and prompt_en, checked field by field,
    and `source`, the file and position each came from."""
    if prompt_set not in PROMPT_SETS:
        raise ValueError(f"unknown prompt set {prompt_set!r}; choose from {', '.join(PROMPT_SETS)}")
    items = []
    for relative, key in PROMPT_SETS[prompt_set]:
        document = read_json(roots.benchmark / relative, name=relative)
        entries = document.get(key) if isinstance(document, Mapping) else None
        if not isinstance(entries, list):
            raise UpstreamSchemaError(f"{relative}: missing list `{key}`")
        for index, entry in enumerate(entries):
            where = f"{relative}: {key}[{index}]"
            if not isinstance(entry, Mapping):
                raise UpstreamSchemaError(f"{where}: expected an object")
            for field_name in ("id", "prompt_zh", "prompt_en"):
                if not isinstance(entry.get(field_name), str) or not entry[field_name].strip():
                    raise UpstreamSchemaError(f"{where}.{field_name}: expected a non-empty string")
            items.append({"prompt_id": entry["id"], "category": str(entry.get("category") or key),
                          "prompt_zh": entry["prompt_zh"], "prompt_en": entry["prompt_en"],
                          "source": f"{roots.benchmark / relative}: {key}[{index}]"})
    return items


def load_red_flags(choice: str, roots: TSBRoots, fetch: Callable[[str], Path]) -> RedFlagList:
    """`v1.1.0` / `v1.0.0` (the published lists in the upstream location) or a file path or URL (`fetch` downloads)."""
    version = choice.strip().lower().removeprefix("v")
    if version in ("1.0.0", "1.1.0"):
        path = red_flag_file(roots, version)
        listing = parse_red_flags(read_json(path), str(path))
        if listing.version != version:
            raise UpstreamSchemaError(f"{path}: metadata.version is {listing.version!r}, expected {version!r}")
        return listing
    path = fetch(choice) if is_url(choice) else Path(choice).expanduser()
    if not is_url(choice) and not path.is_file():
        raise UpstreamError(f"red-flag list {choice!r}: neither a published version (v1.1.0, v1.0.0) nor an existing"
                            " file; give a version, a path or a URL")
    return parse_red_flags(read_json(path, name=choice), choice)
