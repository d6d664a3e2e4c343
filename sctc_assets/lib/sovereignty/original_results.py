"""The original benchmark's raw result files (hsiaoa/ai-taiwan-sovereignty-benchmark, `results/raw/`), read back as
replay models `tsb-<model>` that keep the authors' verdicts (the scoring rule `published`).

A file is one model's answers to stage 1 in one script and condition, named
`<model>_stage1_<sc|tc|en>_<condition>_<YYYYMMDD>.json`: `sc` → Simplified Chinese prompts, `tc` → Traditional, `en`
→ English; condition `baseline` → this platform's `none`, any other kept as named (`persona-tw`, `persona-neutral`).
It holds a JSON list of items: `id`, the prompt (`prompt`, `prompt_sc`, `prompt_tc` or `prompt_en`), an optional
`system_prompt` (the condition's), `response` (the answer without its reasoning), `verdict` (`passed`,
`instant_fails`, `warnings`, `objective_framing_detected`, `refusal` when it refused), `finish_reason`,
`reasoning_chars`, `max_tokens`; or, for a call that failed, `id` and `error`. Where a model has several files of one
script and condition, the newest date is used. Every problem names the file, the item's index and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from sctc_assets.lib.generation import stored_text
from sctc_assets.lib.model_registry import MODEL_KEY_PATTERN
from sctc_assets.lib.sovereignty.origin import known_origin
from sctc_assets.lib.sovereignty.original_rule import OriginalVerdict
from sctc_assets.lib.sovereignty.upstream import read_json
from sctc_assets.lib.text_files import json_type
from sctc_assets.lib.upstream_source import UpstreamSchemaError
from sctc_assets.lib.varieties import ENGLISH, SIMPLIFIED, TRADITIONAL

RAW_FILE = re.compile(r"^(?P<model>.+?)_stage1_(?P<script>sc|tc|en)_(?P<condition>[A-Za-z0-9][A-Za-z0-9.-]*)_"
                      r"(?P<date>\d{8})\.json$")
SCRIPT_LANGS = {"sc": SIMPLIFIED.code, "tc": TRADITIONAL.code, "en": ENGLISH.code}
BASELINE = "baseline"
NO_CONDITION = "none"  # this platform's name of the baseline condition (no system prompt)
PROMPT_FIELDS = ("prompt", "prompt_sc", "prompt_tc", "prompt_en")
TSB_PREFIX = "tsb-"
# Where the benchmark's repository keeps them.
RAW_RESULTS_DIR = "results/raw"
BACKEND = "tsb_raw_replay"


class RawResultError(UpstreamSchemaError):
    """A raw result file that does not follow the original benchmark's format; the message names the file, the
    item and the field."""


@dataclass(frozen=True)
class RawAnswer:
    prompt_id: str
    prompt: str | None
    system_prompt: str | None
    response: str | None  # None: the call failed (`error`)
    error: str | None
    verdict: OriginalVerdict | None  # the authors' verdict; None where the item has none
    finish_reason: str | None = None
    reasoning_chars: int | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class RawResultFile:
    path: Path
    model: str
    lang: str
    condition: str
    date: str
    answers: tuple[RawAnswer, ...]


def is_raw_name(name: str) -> bool:
    return RAW_FILE.match(name) is not None


def condition_name(raw: str) -> str:
    return NO_CONDITION if raw == BASELINE else raw


def _fail(path: Path, where: str, expected: str, value: Any) -> RawResultError:
    return RawResultError(f"{path}: {where}: expected {expected}, found {json_type(value)}")


def _optional(item: Mapping[str, Any], key: str, kind: type | tuple[type, ...], expected: str, path: Path,
              where: str) -> Any:
    value = item.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool) and kind is int):
        raise _fail(path, f"{where}.{key}", expected, value)
    return value


def _string_list(value: Any, path: Path, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(entry, str) for entry in value):
        raise _fail(path, where, "a list of strings", value)
    return tuple(value)


def parse_verdict(value: Any, path: Path, where: str) -> OriginalVerdict:
    if not isinstance(value, dict):
        raise _fail(path, where, "an object", value)
    if not isinstance(value.get("passed"), bool):
        raise _fail(path, f"{where}.passed", "true or false", value.get("passed"))
    for key in ("objective_framing_detected", "refusal"):
        if key in value and not isinstance(value[key], bool):
            raise _fail(path, f"{where}.{key}", "true or false", value[key])
    return OriginalVerdict(passed=value["passed"],
                           instant_fails=_string_list(value.get("instant_fails", []), path, f"{where}.instant_fails"),
                           warnings=_string_list(value.get("warnings", []), path, f"{where}.warnings"),
                           objective_framing=bool(value.get("objective_framing_detected", False)),
                           refusal=bool(value.get("refusal", False)))


def parse_item(item: Any, path: Path, where: str) -> RawAnswer:
    if not isinstance(item, dict):
        raise _fail(path, where, "an object", item)
    prompt_id = item.get("id")
    if not isinstance(prompt_id, str) or not prompt_id:
        raise _fail(path, f"{where}.id", "a prompt id", prompt_id)
    prompts = [key for key in PROMPT_FIELDS if key in item]
    for key in prompts:
        _optional(item, key, str, "a string", path, where)
    error = _optional(item, "error", str, "a string", path, where)
    if "response" not in item and error is None:
        raise _fail(path, f"{where}.response", "a string (or an `error` for a failed call)", None)
    response = _optional(item, "response", str, "a string", path, where)
    verdict = None
    if "verdict" in item:
        verdict = parse_verdict(item["verdict"], path, f"{where}.verdict")
    elif response is not None:
        raise _fail(path, f"{where}.verdict", "an object (the authors' verdict on the response)", None)
    return RawAnswer(prompt_id=prompt_id, prompt=item[prompts[0]] if prompts else None,
                     system_prompt=_optional(item, "system_prompt", str, "a string", path, where),
                     response=response, error=error, verdict=verdict,
                     finish_reason=_optional(item, "finish_reason", str, "a string", path, where),
                     reasoning_chars=_optional(item, "reasoning_chars", int, "a whole number", path, where),
                     max_tokens=_optional(item, "max_tokens", int, "a whole number", path, where))


def parse_raw_file(document: Any, path: Path) -> RawResultFile:
    match = RAW_FILE.match(path.name)
    if match is None:
        raise RawResultError(f"{path}: file name: expected <model>_stage1_<sc|tc|en>_<condition>_<YYYYMMDD>.json")
    if not isinstance(document, list):
        raise _fail(path, "(top level)", "a list of items", document)
    answers = tuple(parse_item(item, path, f"item {index}") for index, item in enumerate(document))
    seen: dict[str, int] = {}
    for index, answer in enumerate(answers):
        if answer.prompt_id in seen:
            raise RawResultError(f"{path}: item {index}.id: {answer.prompt_id!r} appears twice (first in item "
                                 f"{seen[answer.prompt_id]})")
        seen[answer.prompt_id] = index
    condition = condition_name(match.group("condition"))
    if condition == NO_CONDITION:
        prompted = [index for index, answer in enumerate(answers) if answer.system_prompt]
        if prompted:
            raise RawResultError(f"{path}: item {prompted[0]}.system_prompt: the baseline condition has no system "
                                 "prompt, but this item has one")
    return RawResultFile(path=path, model=match.group("model"), lang=SCRIPT_LANGS[match.group("script")],
                         condition=condition, date=match.group("date"), answers=answers)


def read_raw_file(path: Path) -> RawResultFile:
    return parse_raw_file(read_json(path), path)


def raw_files_in(folder: Path) -> list[Path]:
    return sorted(path for path in folder.glob("*.json") if is_raw_name(path.name))


def newest_raw_files(paths: Iterable[Path]) -> dict[str, list[RawResultFile]]:
    """Model name → its files, every one read and checked, the newest date of each script and condition only."""
    newest: dict[tuple[str, str, str], RawResultFile] = {}
    for path in sorted(paths):
        result = read_raw_file(path)
        key = (result.model, result.lang, result.condition)
        if key not in newest or result.date > newest[key].date:
            newest[key] = result
    by_model: dict[str, list[RawResultFile]] = {}
    for (model, _, _), result in sorted(newest.items()):
        by_model.setdefault(model, []).append(result)
    return by_model


def names_the_condition(system_prompt: str | None, condition: str) -> bool:
    """Whether a recorded system prompt is only the condition's variant name (the Kimi K3 files of 2026-07-30 record
    `persona_tw` where the later files record the prompt's text): it stands for the text the other files record."""
    return system_prompt is not None and system_prompt.replace("_", "-") == condition


def condition_prompts(files: Iterable[RawResultFile]) -> dict[str, str | None]:
    """Condition → its system prompt (None for the baseline), checked to be the same in every item of every file;
    a prompt that only names the condition's variant (`names_the_condition`) takes the text the other files give
    (the name itself where none does)."""
    files = list(files)
    found: dict[str, tuple[str | None, str]] = {}
    named: dict[str, str] = {}
    for result in files:
        for index, answer in enumerate(result.answers):
            if answer.response is None:
                continue
            where = f"{result.path}: item {index}.system_prompt"
            if result.condition != NO_CONDITION and not answer.system_prompt:
                raise RawResultError(f"{where}: condition {result.condition!r} needs its system prompt, found none")
            if names_the_condition(answer.system_prompt, result.condition):
                named.setdefault(result.condition, answer.system_prompt)
                continue
            known = found.get(result.condition)
            if known is None:
                found[result.condition] = (answer.system_prompt, where)
            elif known[0] != answer.system_prompt:
                raise RawResultError(f"{where}: condition {result.condition!r} has another system prompt than in "
                                     f"{known[1]}")
    for condition, name in named.items():
        found.setdefault(condition, (name, ""))
    return {condition: prompt for condition, (prompt, _) in sorted(found.items())}


def model_key(model: str, path: Path) -> str:
    key = TSB_PREFIX + model.lower()
    if not MODEL_KEY_PATTERN.match(key):
        raise RawResultError(f"{path}: file name: model {model!r} does not make a valid model key ({key!r})")
    return key


def registry_entries(by_model: Mapping[str, list[RawResultFile]]) -> dict[str, dict[str, Any]]:
    """Registry entries `tsb-<model>` for the `tsb_raw_replay` backend, one per model, with all its files and the
    model's `origin` where `lib/sovereignty/origin.py` knows its family (the 2026 follow-up's models)."""
    entries: dict[str, dict[str, Any]] = {}
    for model, files in by_model.items():
        key = model_key(model, files[0].path)
        if key in entries:
            raise RawResultError(f"{files[0].path}: file name: model {model!r} gives the key {key!r}, as does "
                                 f"{entries[key]['results_files'][0]}; rename one of them")
        shown = ", ".join(sorted({f"{result.lang}/{result.condition}" for result in files}))
        entries[key] = {"backend": BACKEND, "results_files": [str(result.path.resolve()) for result in files],
                        "description": f"{model} (the original benchmark's raw result files: {shown})"}
        origin = known_origin(model)
        if origin:
            entries[key]["origin"] = origin
    return entries


def answer_index(files: Iterable[RawResultFile]) -> dict[tuple[str, str, str], RawAnswer]:
    """(prompt id, language, condition) → the published answer."""
    return {(answer.prompt_id, result.lang, result.condition): answer for result in files for answer in result.answers}


def published_verdicts(files: Iterable[RawResultFile], items: Iterable[Mapping[str, Any]],
                       keys: list[str]) -> dict[tuple, OriginalVerdict]:
    """The authors' verdict of each stored answer (`items`: rows with `keys`, `lang`, `prompt_id`, `sample`,
    `response` and optionally `condition`, default `none`) that replays one of these files' answers with the
    same text, keyed by the item's `keys`."""
    index = answer_index(files)
    found = {}
    for item in items:
        answer = index.get((item["prompt_id"], item["lang"], item.get("condition", NO_CONDITION)))
        if answer is None or answer.verdict is None or int(item["sample"]) != 0 \
                or answer.response != stored_text(item["response"]):
            continue
        found[tuple(item[key] for key in keys)] = answer.verdict
    return found
