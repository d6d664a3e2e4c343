"""Conditions: the system prompts or personas the sovereignty prompts are asked under, a named design axis.

A conditions file (YAML) maps each name to its system prompt, either one text for every prompting language or one
per language, with an optional description:

    conditions:
      none:
        description: No system prompt (the paper's design).
      taiwan-user:
        description: The user says they live in Taiwan.
        system_prompt:
          zh_hant: 使用者住在台灣……
          en: The user lives in Taiwan …
      plain-facts: Answer factually and name who claims what.   # one text for every language

`none` is the baseline every other condition is compared with, prompt by prompt; it must be there and sends no
system prompt, so its requests (and their cache keys) are exactly the paper's. Where a condition gives Traditional
Chinese but not Simplified, the Simplified prompt is the Traditional one converted with OpenCC, as the prompts
are. Any other language left out is an error, as is a language the benchmark does not ask in, an empty prompt and
an unknown field. The package's default file (`default_conditions.yaml`) holds `none` and `taiwan-user`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from sctc_assets.lib.conversion import convert
from sctc_assets.lib.sovereignty.prompts import BASELINE_CONDITION, LANGS, SIMPLIFIED_CONFIG
from sctc_assets.lib.varieties import SIMPLIFIED, TRADITIONAL

DEFAULT_CONDITIONS_FILE = Path(__file__).with_name("default_conditions.yaml")
FIELDS = ("description", "system_prompt")


class ConditionsError(ValueError):
    """A conditions file or a chosen condition name that cannot be used; the message is one line naming the file,
    the line and key, and the field."""


@dataclass(frozen=True)
class Condition:
    """One condition: its name, its system prompt per prompting language (none for the baseline)."""

    name: str
    prompts: Mapping[str, str] = field(default_factory=dict)
    description: str = ""

    def system_prompt(self, lang: str) -> str | None:
        return self.prompts.get(lang) or None


BASELINE = Condition(BASELINE_CONDITION, {}, "No system prompt (the paper's design).")


def _key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line (1-based) of every mapping key, by its path from the top, for error messages."""
    lines: dict[tuple[str, ...], int] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                child = (*path, str(key.value))
                lines[child] = key.start_mark.line + 1
                walk(value, child)

    try:
        walk(yaml.compose(text, Loader=yaml.SafeLoader), ())
    except yaml.YAMLError:
        pass
    return lines


def read_conditions(path: str | Path) -> dict[str, Condition]:
    """Every condition of a conditions file, checked; `ConditionsError` names the file, line, key and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        document = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConditionsError(f"{path}: unreadable conditions file ({exc})") from exc
    except yaml.YAMLError as exc:
        raise ConditionsError(f"{path}: not YAML ({' '.join(str(exc).split())})") from exc
    lines = _key_lines(text)

    def where(*keys: str) -> str:
        line = lines.get(("conditions", *keys))
        return f"{path}: line {line}, " if line else f"{path}: "

    if not isinstance(document, dict) or not isinstance(document.get("conditions"), dict) or not document["conditions"]:
        raise ConditionsError(f"{path}: expected a mapping `conditions:` of condition names")
    conditions: dict[str, Condition] = {}
    for name, spec in document["conditions"].items():
        name = str(name)
        if isinstance(spec, str) or spec is None:
            spec = {"system_prompt": spec}
        if not isinstance(spec, dict):
            raise ConditionsError(f"{where(name)}condition {name!r}: expected a system prompt or a mapping with "
                                  f"{' and '.join(FIELDS)}")
        unknown = sorted(str(key) for key in spec if key not in FIELDS)
        if unknown:
            raise ConditionsError(f"{where(name, unknown[0])}condition {name!r}, field {unknown[0]}: unknown field "
                                  f"(known: {', '.join(FIELDS)})")
        prompt = spec.get("system_prompt")
        if name == BASELINE_CONDITION:
            if prompt not in (None, "", {}):
                raise ConditionsError(f"{where(name, 'system_prompt')}condition {name!r}, field system_prompt: the "
                                      "baseline sends no system prompt (give the prompt another name)")
            conditions[name] = Condition(name, {}, str(spec.get("description") or BASELINE.description))
            continue
        conditions[name] = Condition(name, _prompts(prompt, name, where), str(spec.get("description") or ""))
    if BASELINE_CONDITION not in conditions:
        raise ConditionsError(f"{path}: line 1, key conditions: no `{BASELINE_CONDITION}` condition, the baseline "
                              "every other condition is compared with (add `none: {}`)")
    return conditions


def _prompts(prompt: Any, name: str, where) -> dict[str, str]:
    """One system prompt per prompting language from one text or a mapping by language."""
    if isinstance(prompt, dict):
        by_lang = {str(lang): text for lang, text in prompt.items()}
        for lang, text in by_lang.items():
            if lang not in LANGS:
                raise ConditionsError(f"{where(name, 'system_prompt', lang)}condition {name!r}, field system_prompt."
                                      f"{lang}: language {lang!r} is not one of the benchmark's "
                                      f"({', '.join(LANGS)})")
            if not isinstance(text, str) or not text.strip():
                raise ConditionsError(f"{where(name, 'system_prompt', lang)}condition {name!r}, field system_prompt."
                                      f"{lang}: empty system prompt")
        if TRADITIONAL.code in by_lang and SIMPLIFIED.code not in by_lang:
            by_lang[SIMPLIFIED.code] = convert(by_lang[TRADITIONAL.code], SIMPLIFIED_CONFIG)
        lacking = [lang for lang in LANGS if lang not in by_lang]
        if lacking:
            raise ConditionsError(f"{where(name, 'system_prompt')}condition {name!r}, field system_prompt: no "
                                  f"prompt for {', '.join(lacking)} (give one per language, or one text for all)")
        return {lang: by_lang[lang] for lang in LANGS}
    if not isinstance(prompt, str) or not prompt.strip():
        raise ConditionsError(f"{where(name, 'system_prompt') if prompt is not None else where(name)}condition "
                              f"{name!r}, field system_prompt: empty system prompt")
    return {lang: prompt for lang in LANGS}


def choose_conditions(names: Sequence[str] | None, file: str | Path | None = None) -> list[Condition]:
    """The conditions a run asks under, the baseline first: `names` from `file` (default: the package's file);
    no names: the baseline alone (the paper's design)."""
    chosen = list(dict.fromkeys(names or [BASELINE_CONDITION]))
    if chosen == [BASELINE_CONDITION] and not file:
        return [BASELINE]
    source = Path(file) if file else DEFAULT_CONDITIONS_FILE
    known = read_conditions(source)
    for name in chosen:
        if name not in known:
            raise ConditionsError(f"{source}: no condition {name!r} (conditions: {', '.join(known)})")
    if BASELINE_CONDITION not in chosen:
        chosen.insert(0, BASELINE_CONDITION)  # every condition is measured against the baseline
    return [known[BASELINE_CONDITION]] + [known[name] for name in chosen if name != BASELINE_CONDITION]
