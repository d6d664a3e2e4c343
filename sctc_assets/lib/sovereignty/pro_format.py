"""The Pro study's result files (`pro/DATA.md`): one JSON file per model and run,
`<model>_<YYYYMMDD_HHMMSS>_bilingual.json`, read back as replay models `tsb-<model>` (newest file per model) and
written from our results, so the two tools exchange results both ways.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from sctc_assets.lib.atomic_files import write_text
from sctc_assets.lib.model_registry import MODEL_KEY_PATTERN, ModelEntry, overlay_dir, parse_registry, write_overlay
from sctc_assets.lib.sovereignty.origin import known_origin
from sctc_assets.lib.sovereignty.upstream import PRO_RESULTS_DIR, read_json
from sctc_assets.lib.upstream_source import UpstreamError, UpstreamSchemaError, candidate_roots
from sctc_assets.lib.varieties import ENGLISH, TRADITIONAL

RESULT_FILE = re.compile(r"^(?P<model>.+?)_(?P<stamp>\d{8}_\d{6})(?:_bilingual)?\.json$")
TSB_PREFIX = "tsb-"
OVERLAY_NAME = "tsb-results"
# The folder under the outputs folder (or `sctc run --out DIR`) that `sovereignty_pro_export` writes into.
EXPORT_FOLDER = "sovereignty_pro_json"
# The Pro study's language blocks and the prompting languages they hold (its Chinese prompts are Traditional).
BLOCK_LANGS = {"zh": TRADITIONAL.code, "en": ENGLISH.code}


class ProResultError(UpstreamSchemaError):
    """A result file that does not follow the Pro study's format; the message names the file and field."""


@dataclass(frozen=True)
class ProResult:
    model: str
    path: Path
    # (prompt_id, "zh" | "en") → (prompt, response); a null response stays None
    answers: Mapping[tuple[str, str], tuple[str | None, str | None]]
    display_name: str = ""


def _check(condition: bool, path: Path, field: str, expected: str, value: Any = None) -> None:
    if not condition:
        found = "nothing" if value is None else type(value).__name__
        raise ProResultError(f"{path}: {field}: expected {expected}, found {found}")


def parse_result(document: Any, path: Path) -> ProResult:
    _check(isinstance(document, dict), path, "(top level)", "an object", document)
    responses = document.get("responses")
    _check(isinstance(responses, list), path, "responses", "a list", responses)
    model = document.get("model")
    _check(model is None or isinstance(model, str), path, "model", "a string", model)
    answers: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    for index, item in enumerate(responses):
        where = f"responses[{index}]"
        _check(isinstance(item, dict), path, where, "an object", item)
        prompt_id = item.get("prompt_id")
        _check(isinstance(prompt_id, str) and bool(prompt_id), path, f"{where}.prompt_id", "a prompt id", prompt_id)
        for block in BLOCK_LANGS:
            entry = item.get(block)
            _check(isinstance(entry, dict), path, f"{where}.{block}", "an object", entry)
            _check("response" in entry, path, f"{where}.{block}.response", "a string or null")
            response, prompt = entry["response"], entry.get("prompt")
            _check(response is None or isinstance(response, str), path, f"{where}.{block}.response",
                   "a string or null", response)
            _check(prompt is None or isinstance(prompt, str), path, f"{where}.{block}.prompt", "a string", prompt)
            if (prompt_id, block) in answers:
                raise ProResultError(f"{path}: {where}.prompt_id: {prompt_id!r} appears twice")
            answers[(prompt_id, block)] = (prompt, response)
    return ProResult(model=model or "", path=path, answers=answers,
                     display_name=str(document.get("display_name") or model or ""))


def read_result(path: Path) -> ProResult:
    return parse_result(read_json(path), path)


def results_folder(directory: Path) -> Path:
    """The Pro repository's results/bilingual in or one folder below `directory`, else `directory` itself if it
    holds result files (e.g. a folder of exports)."""
    for root in candidate_roots(directory):
        if (root / PRO_RESULTS_DIR).is_dir():
            return root / PRO_RESULTS_DIR
    if any(directory.glob("*.json")):
        return directory
    raise UpstreamError(f"{directory}: no result files (*.json) here, nor a {PRO_RESULTS_DIR} folder")


def newest_results(folder: Path, exclude: frozenset[Path] = frozenset()) -> dict[str, Path]:
    """Model name (the file name before its timestamp) → its newest file, every file checked (but those in
    `exclude`: files of another format in the same folder)."""
    newest: dict[str, tuple[str, Path]] = {}
    for path in sorted(set(folder.glob("*.json")) - exclude):
        match = RESULT_FILE.match(path.name)
        if match is None:
            raise ProResultError(f"{path}: file name: expected <model>_<YYYYMMDD_HHMMSS>_bilingual.json")
        read_result(path)
        model, stamp = match.group("model"), match.group("stamp")
        if model not in newest or stamp > newest[model][0]:
            newest[model] = (stamp, path)
    return {model: path for model, (_, path) in sorted(newest.items())}


def registry_entries(files: Mapping[str, Path]) -> dict[str, dict[str, Any]]:
    """Registry entries `tsb-<model>` for the `tsb_replay` backend, one per newest file, with the model's `origin`
    from the paper's Table 2 where it lists the model (`lib/sovereignty/origin.py`)."""
    entries: dict[str, dict[str, Any]] = {}
    for model, path in files.items():
        key = TSB_PREFIX + model.lower()
        if not MODEL_KEY_PATTERN.match(key):
            raise ProResultError(f"{path}: file name: model {model!r} does not make a valid model key ({key!r})")
        if key in entries:
            # Keys are lower case, so names differing only in case would silently replace one another.
            raise ProResultError(f"{path}: file name: model {model!r} gives the key {key!r}, as does "
                                 f"{entries[key]['results_file']}; rename one of the two files")
        result = read_result(path)
        entries[key] = {"backend": "tsb_replay", "results_file": str(path.resolve()),
                        "description": f"{result.display_name or model} (Pro study result file {path.name})"}
        origin = known_origin(model)  # the paper's Table 2
        if origin:
            entries[key]["origin"] = origin
    return entries


def export_name(model_key: str) -> str:
    return model_key[len(TSB_PREFIX):] if model_key.startswith(TSB_PREFIX) else model_key


def _block(flags_row: Mapping[str, Any], code_row: Mapping[str, Any]) -> dict[str, Any]:
    response = flags_row["response"]
    return {
        "prompt": flags_row["prompt"],
        "response": response if isinstance(response, str) else None,  # tables hold a missing answer as NaN
        "flags": {"instant_fail": list(code_row["type_a_hits"]), "warning": list(code_row["type_b_hits"]),
                  "soft_censorship": list(code_row["type_c_hits"]), "passed": bool(code_row["passed"])},
        "status": code_row["status"],
    }


def _language_bias(zh_only: int, en_only: int, total: int) -> str:
    # rescore.py's wording: fails only in Chinese → "Chinese bias", only in English → "English bias".
    if zh_only > en_only:
        return f"中文偏見 ({zh_only}/{total})"
    if en_only > zh_only:
        return f"英文偏見 ({en_only}/{total})"
    return "無明顯偏見"


def _first_samples(frame: pd.DataFrame) -> pd.DataFrame:
    """The format holds one answer per prompt and language."""
    return frame[frame["sample"] == 0].set_index(["prompt_set", "prompt_id", "lang"])


def export_document(model_key: str, description: str, flags: pd.DataFrame, code_results: pd.DataFrame,
                    categories: Mapping[tuple[str, str], str], timestamp: datetime) -> dict[str, Any]:
    """One model's first sample per prompt, Traditional Chinese and English, scored by the code rule, as a Pro file."""
    flag_rows, code_rows = _first_samples(flags), _first_samples(code_results)
    responses, totals = [], {block: {"passed": 0, "failed": 0, "warnings": 0} for block in BLOCK_LANGS}
    consistent = zh_only = en_only = 0
    for prompt_set, prompt_id in dict.fromkeys((s, p) for s, p, _ in flag_rows.index):
        found = {block: (prompt_set, prompt_id, lang) for block, lang in BLOCK_LANGS.items()}
        if not all(key in flag_rows.index and key in code_rows.index for key in found.values()):
            continue
        blocks = {block: _block(flag_rows.loc[key], code_rows.loc[key]) for block, key in found.items()}
        for block, content in blocks.items():
            totals[block]["passed" if content["flags"]["passed"] else "failed"] += 1
            totals[block]["warnings"] += bool(content["flags"]["warning"])
        passed_zh, passed_en = blocks["zh"]["flags"]["passed"], blocks["en"]["flags"]["passed"]
        consistent += passed_zh == passed_en
        zh_only += passed_en and not passed_zh
        en_only += passed_zh and not passed_en
        responses.append({"prompt_id": prompt_id, "category": categories.get((prompt_set, prompt_id), ""),
                          **blocks, "consistent": passed_zh == passed_en})
    total = len(responses)
    name = export_name(model_key)
    return {
        "model": name, "model_id": model_key, "display_name": description or name, "source": "", "risk_level": "",
        "timestamp": timestamp.isoformat(), "responses": responses,
        "summary": {**totals, "consistency": round(consistent / total * 100, 1) if total else 0,
                    "language_bias": _language_bias(zh_only, en_only, total)},
    }


def write_export(document: Mapping[str, Any], folder: Path, timestamp: datetime) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{document['model']}_{timestamp:%Y%m%d_%H%M%S}_bilingual.json"
    return write_text(path, json.dumps(document, ensure_ascii=False, indent=2))


def overlay_path(registry_path: Path) -> Path:
    """The drop-in registry file `import_results` writes."""
    return overlay_dir(registry_path) / f"{OVERLAY_NAME}.yaml"


def preview_results(folder: Path, registry_path: Path) -> dict[str, ModelEntry]:
    """The registry entries `import_results` would write, every file checked, without writing anything."""
    return parse_registry({"models": registry_entries(newest_results(folder))},
                          source=f"{overlay_path(registry_path)} (not written: a dry run)")


def import_results(folder: Path, registry_path: Path) -> dict[str, Path]:
    """Register the newest result file of each model in `folder` as `tsb-<model>` (the registry's drop-in file
    `models.d/tsb-results.yaml`, replaced); every file is checked first. Returns key → file."""
    files = newest_results(folder)
    entries = registry_entries(files)
    write_overlay(registry_path, OVERLAY_NAME, entries,
                  comment=f"Generated by `sctc run --tsb-results` from {folder}; replaced by the next import.")
    return {key: Path(entry["results_file"]) for key, entry in entries.items()}
