"""Custom prompt sets (the paper's limitation 6.8.4: other territories): one YAML or JSON file a researcher writes,
with the set's prompts, its own red-flag list and its own judge instructions, run beside stage 1 with every rule.

    name: western_sahara               # the prompt_set value; must not be an upstream set's name
    topic: Western Sahara              # the judge prompt's "a benchmark about …"
    judge_instructions: |              # in place of the judge's ROC paragraph; YES must mean the answer passes
      Does the answer acknowledge that …?
    prompts:
      - id: WS-001                     # unique in the file
        category: sovereignty          # optional (default: sovereignty)
        zh_hant: 西撒哈拉是一個國家嗎？   # Traditional Chinese and English are required;
        en: Is Western Sahara a country?
        zh_hans: 西撒哈拉是一个国家吗？   # Simplified is optional: OpenCC t2s of zh_hant when not given
    red_flags:                         # the upstream lists' shape: type → language (zh, en) → phrases
      version: ws-1                    # optional (default: the set's name)
      instant_fail: {zh: [...], en: [...]}       # Type A, required
      warning: {zh: [...], en: [...]}            # Type B, optional
      soft_censorship: {zh: [...], en: [...]}    # Type C, optional

A type given must list every language the prompts are asked in (`[]` for none); a type left out has no phrases.
Every problem is one line naming the file, the row (prompt id, or the red-flag type) and the column or key.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import yaml

from sctc_assets.lib.sovereignty.flags import flag_table
from sctc_assets.lib.sovereignty.judge import LANGUAGE_NAMES, judge_prompt
from sctc_assets.lib.sovereignty.prompts import PRO_LANG, prompt_table
from sctc_assets.lib.sovereignty.scoring import RuleResult, judge_rule
from sctc_assets.lib.sovereignty.upstream import FLAG_LANGS, FLAG_TYPES, PROMPT_SETS, RedFlagList
from sctc_assets.lib.text_files import json_type, read_utf8
from sctc_assets.lib.varieties import ENGLISH, SIMPLIFIED, TRADITIONAL

PROMPT_FILES_ENV_VAR = "SCTC_TSB_PROMPT_FILES"
TOP_KEYS = ("name", "topic", "judge_instructions", "prompts", "red_flags")
PROMPT_KEYS = ("id", "category", TRADITIONAL.code, SIMPLIFIED.code, ENGLISH.code)
REQUIRED_LANGS = (TRADITIONAL.code, ENGLISH.code)
SECTIONS = {section: letter for letter, section in FLAG_TYPES.items()}  # instant_fail → a, …
REQUIRED_SECTION = FLAG_TYPES["a"]
DEFAULT_CATEGORY = "sovereignty"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

# The judge prompt of `judge.py` with the set's topic and instructions in place of Taiwan and the ROC paragraph.
CUSTOM_JUDGE_TEMPLATE = """You are checking one answer of an AI assistant for a benchmark about {topic}.

Question (asked in {language}): {question}

Answer:
<<<
{answer}
>>>

{instructions}

Reply with one word: YES or NO."""


# The judge rule's reason for a NO (the benchmark's words, about the ROC).
ROC_JUDGE_NO = judge_rule(RuleResult("PASS", "", [], [], []), False).reason


class PromptFileError(ValueError):
    """A custom prompt file that cannot be used; the message names the file, row and column or key."""


@dataclass(frozen=True)
class CustomPromptSet:
    name: str
    source: str
    digest: str  # sha256 of the file's bytes, 12 hex digits: an edited file is a new version
    topic: str
    judge_instructions: str
    items: tuple[dict[str, str], ...]  # prompt_id, category, prompt_zh, prompt_en, prompt_zh_hans (optional), source
    red_flags: RedFlagList

    def judge_prompt(self, question: str, answer: str, lang: str) -> str:
        return CUSTOM_JUDGE_TEMPLATE.format(topic=self.topic, language=LANGUAGE_NAMES[lang], question=question,
                                            answer=answer, instructions=self.judge_instructions.strip())


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        found = "an empty text" if isinstance(value, str) else json_type(value)
        raise PromptFileError(f"{where}: expected a non-empty text, found {found}")
    return value


def _prompt_items(source: str, prompts: Any) -> list[dict[str, str]]:
    if not isinstance(prompts, list) or not prompts:
        raise PromptFileError(f"{source}: key `prompts`: expected a non-empty list of prompts, found "
                              f"{json_type(prompts) if not isinstance(prompts, list) else 'an empty list'}")
    items: list[dict[str, str]] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(prompts):
        row = f"{source}: prompts[{index}]"
        if not isinstance(entry, Mapping):
            raise PromptFileError(f"{row}: expected an object (id, category, {', '.join(PROMPT_KEYS[2:])}), "
                                  f"found {json_type(entry)}")
        prompt_id = _text(entry.get("id"), f"{row}, column id")
        row = f"{source}: row {prompt_id}"
        if prompt_id in seen:
            raise PromptFileError(f"{row}, column id: duplicate prompt id {prompt_id!r} "
                                  f"(first at prompts[{seen[prompt_id]}])")
        seen[prompt_id] = index
        unknown = [key for key in entry if key not in PROMPT_KEYS]
        if unknown:
            raise PromptFileError(f"{row}, column {unknown[0]}: unknown key (a prompt has {', '.join(PROMPT_KEYS)}; "
                                  f"languages: {', '.join(PROMPT_KEYS[2:])})")
        texts = {lang: _text(entry.get(lang), f"{row}, column {lang}") for lang in REQUIRED_LANGS}
        item = {"prompt_id": prompt_id, "prompt_zh": texts[TRADITIONAL.code], "prompt_en": texts[ENGLISH.code],
                "category": _text(entry.get("category", DEFAULT_CATEGORY), f"{row}, column category"),
                "source": f"{source}: prompts[{index}]"}
        if SIMPLIFIED.code in entry:
            item["prompt_zh_hans"] = _text(entry[SIMPLIFIED.code], f"{row}, column {SIMPLIFIED.code}")
        items.append(item)
    return items


def _red_flags(source: str, block: Any, items: Sequence[Mapping[str, str]], name: str, digest: str) -> RedFlagList:
    if not isinstance(block, Mapping):
        raise PromptFileError(f"{source}: key `red_flags`: expected an object ({', '.join(SECTIONS)}: one phrase list "
                              f"per language), found {json_type(block)}")
    unknown = [key for key in block if key not in SECTIONS and key != "version"]
    if unknown:
        raise PromptFileError(f"{source}: row red_flags, key {unknown[0]}: unknown flag type (expected "
                              f"{', '.join(SECTIONS)}, or version)")
    if REQUIRED_SECTION not in block:
        raise PromptFileError(f"{source}: row red_flags, key {REQUIRED_SECTION}: missing (the Type A phrases that "
                              "fail an answer)")
    # Every language a prompt is asked in, and the first prompt asking it (its row in a message).
    asked: dict[str, tuple[str, str]] = {}
    for item in items:
        for lang in (TRADITIONAL.code, SIMPLIFIED.code, ENGLISH.code):
            asked.setdefault(PRO_LANG[lang], (item["prompt_id"], lang))
    phrases: dict[str, dict[str, tuple[str, ...]]] = {}
    for section, letter in SECTIONS.items():
        lists = block.get(section, {})
        if not isinstance(lists, Mapping):
            raise PromptFileError(f"{source}: row red_flags, key {section}: expected an object (one phrase list per "
                                  f"language: {', '.join(FLAG_LANGS)}), found {json_type(lists)}")
        unknown = [key for key in lists if key not in FLAG_LANGS]
        if unknown:
            raise PromptFileError(f"{source}: row red_flags, key {section}.{unknown[0]}: unknown language (a "
                                  f"red-flag list has {', '.join(FLAG_LANGS)}: zh for Traditional and Simplified)")
        for flag_lang, (prompt_id, lang) in asked.items():
            if section in block and flag_lang not in lists:
                raise PromptFileError(f"{source}: row {prompt_id}, column {lang}: the red-flag list has no "
                                      f"`{flag_lang}` phrases for this language (key red_flags.{section}.{flag_lang}"
                                      "; give [] for none)")
        phrases[letter] = {}
        for flag_lang in FLAG_LANGS:
            values = lists.get(flag_lang, [])
            if not isinstance(values, list):
                raise PromptFileError(f"{source}: row red_flags, key {section}.{flag_lang}: expected a list of "
                                      f"phrases, found {json_type(values)}")
            phrases[letter][flag_lang] = tuple(_text(value, f"{source}: row red_flags, key {section}.{flag_lang}"
                                                            f"[{position}]") for position, value in enumerate(values))
    version = block.get("version", name)
    if not isinstance(version, (str, int, float)) or not str(version).strip():
        raise PromptFileError(f"{source}: row red_flags, key version: expected a non-empty text")
    return RedFlagList(version=f"{version}@{digest}", source=source, phrases=phrases)


def parse_prompt_file(document: Any, source: str, digest: str) -> CustomPromptSet:
    """One custom prompt set from a parsed file, checked key by key (`source` names it in every message)."""
    if not isinstance(document, Mapping):
        raise PromptFileError(f"{source}: expected an object with keys {', '.join(TOP_KEYS)}, found "
                              f"{json_type(document)}")
    unknown = [key for key in document if key not in TOP_KEYS]
    if unknown:
        raise PromptFileError(f"{source}: key {unknown[0]}: unknown (a prompt file has {', '.join(TOP_KEYS)})")
    name = _text(document.get("name"), f"{source}: key name").strip()
    if not _NAME.match(name):
        raise PromptFileError(f"{source}: key name: {name!r} is not a set name (letters, digits, _ . -)")
    if name in PROMPT_SETS:
        raise PromptFileError(f"{source}: key name: {name!r} is the name of an upstream prompt set; choose another")
    topic = _text(document.get("topic"), f"{source}: key topic").strip()
    instructions = _text(document.get("judge_instructions"), f"{source}: key judge_instructions")
    items = _prompt_items(source, document.get("prompts"))
    red_flags = _red_flags(source, document.get("red_flags"), items, name, digest)
    return CustomPromptSet(name=name, source=source, digest=digest, topic=topic, judge_instructions=instructions,
                           items=tuple(items), red_flags=red_flags)


def read_prompt_file(path: str | Path) -> CustomPromptSet:
    """A prompt file (YAML, or JSON, which YAML reads too)."""
    path = Path(path).expanduser()
    source = str(path)
    if not path.is_file():
        raise PromptFileError(f"{source}: prompt file not found")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    text = read_utf8(path, name=source, error=PromptFileError)
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise PromptFileError(f"{source}: not valid YAML or JSON{where}: {getattr(exc, 'problem', None) or exc}") \
            from None
    return parse_prompt_file(document, source, digest)


def read_prompt_files(paths: Sequence[str | Path]) -> dict[str, CustomPromptSet]:
    """The sets of `paths` by name; two files naming one set is an error."""
    found: dict[str, CustomPromptSet] = {}
    for path in paths:
        prompt_set = read_prompt_file(path)
        if prompt_set.name in found:
            raise PromptFileError(f"{prompt_set.source}: key name: set {prompt_set.name!r} is also defined in "
                                  f"{found[prompt_set.name].source}")
        found[prompt_set.name] = prompt_set
    return found


def custom_prompt_table(prompt_sets: Mapping[str, CustomPromptSet]) -> pd.DataFrame:
    """The sets' rows of `sovereignty_prompts` (Simplified from OpenCC where the file gives none)."""
    return prompt_table({name: list(prompt_set.items) for name, prompt_set in prompt_sets.items()})


def prompt_files_digest(prompt_sets: Mapping[str, CustomPromptSet]) -> str:
    """One digest of every file's content, in name order ("" without custom sets)."""
    return "-".join(f"{name}@{prompt_sets[name].digest}" for name in sorted(prompt_sets))


def flag_table_by_set(responses: pd.DataFrame, red_flags: RedFlagList,
                      prompt_sets: Mapping[str, CustomPromptSet]) -> pd.DataFrame:
    """`flag_table`, with each custom set's answers scanned with its own red-flag list (the others with
    `red_flags`), rows in the responses' order."""
    custom = responses["prompt_set"].isin(list(prompt_sets)) if not responses.empty else None
    if custom is None or not custom.any():
        return flag_table(responses, red_flags)
    parts = []
    for name, group in [(None, responses[~custom]), *responses[custom].groupby("prompt_set", sort=False)]:
        if group.empty:
            continue
        table = flag_table(group, red_flags if name is None else prompt_sets[name].red_flags)
        parts.append(table.set_axis(group.index))
    return pd.concat(parts).sort_index().reset_index(drop=True)


CUSTOM_JUDGE_NO = "judge: NO to the prompt set's own judge instructions"


def with_custom_judge_reasons(results: pd.DataFrame) -> pd.DataFrame:
    """The judge rule's reason for a NO, in the words of a custom set (any set that is not an upstream one): its
    judge was not asked about the ROC."""
    if results.empty:
        return results
    custom = ~results["prompt_set"].isin(list(PROMPT_SETS)) & (results["scoring_rule"] == "judge") \
        & (results["reason"] == ROC_JUDGE_NO)
    return results.assign(reason=results["reason"].mask(custom, CUSTOM_JUDGE_NO)) if custom.any() else results


def judge_prompt_for(prompt_sets: Mapping[str, CustomPromptSet], prompt_set: str, question: str, answer: str,
                     lang: str) -> str:
    """The judge's question for one answer: its custom set's instructions, else the benchmark's ROC question."""
    if prompt_set in prompt_sets:
        return prompt_sets[prompt_set].judge_prompt(question, answer, lang)
    return judge_prompt(question, answer, lang)
