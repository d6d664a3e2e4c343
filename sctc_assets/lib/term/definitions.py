"""Drafting the missing definitions of an item set with a model (pure Python, no Dagster).

The term task prompts each concept by its definition, so an item set whose concepts lack one (the csld lists have
none) cannot run. `sctc terms define` asks a registered model for them, the way the paper's authors had GPT-4 write
the 22 definitions their sources lacked ("Please explain {item} using a single sentence", Appendix A.7): one concise,
dictionary-style sentence about the concept named by all its regions' forms, which must not contain any of them.

- `definition_request(concept, script)`: the prompt, wholly in the script's Chinese;
- `parse_definition(text, concept)`: the definition in an answer, or why it was refused (empty, or it names one of
  the concept's forms in either script: it would give the answer away);
- `apply_definitions(item_set, drafts, model_key, script)`: the item set with the drafted definitions filled in,
  marked `definition_source: model:<key>`; the other script's definition is made by script-only conversion;
- `problem_kind(problem)`: the reason a refusal is counted under (`named the term`, `empty`);
- `missing_definitions(item_set)`: the concepts without a definition in either script.

Every drafted definition is for a person to review before the item set is run.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Literal, Mapping

from sctc_assets.lib.conversion import convert, convert_chars, to_simplified, to_traditional
from sctc_assets.lib.generation import strip_reasoning
from sctc_assets.lib.term.items import Concept, ItemSet, _fill_definitions

Script = Literal["simplified", "traditional"]
SCRIPTS: tuple[str, ...] = ("simplified", "traditional")
MODEL_SOURCE_PREFIX = "model:"  # definition_source of a drafted definition: model:<registry key>

# The instruction, in Simplified Chinese; the Traditional one is its script-only conversion (s2t).
_INSTRUCTION = (
    "下面这些词语是不同华语地区对同一事物的叫法：{forms}。\n"
    "请用一句话解释这个事物，写成简明的词典式定义。\n"
    "要求：定义中不能出现上面任何一个词语；只写出定义本身，不要加引号、标题或其他说明。"
)
# Labels a model may put before its definition ("定义：", "释义:", "答：" …), in either script.
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:定义|定義|释义|釋義|解释|解釋|答案|回答|答)\s*(?:\*\*)?\s*[:：]"
                    r"\s*(?:\*\*)?")
EMPTY_ANSWER = "the answer is empty"
NAMES_A_FORM = "the answer contains the form "
# The reasons an answer is refused, as the summary counts them ("0 of 12 drafted (12 named the term)").
NAMED_THE_TERM, EMPTY = "named the term", "empty"
_QUOTES = "\"'“”‘’「」『』《》〈〉«»`*"
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def _check_script(script: str) -> None:
    if script not in SCRIPTS:
        raise ValueError(f"unknown script {script!r}; expected one of {', '.join(SCRIPTS)}")


def _in_script(text: str, script: str) -> str:
    return to_simplified(text) if script == "simplified" else to_traditional(text)


def concept_forms(concept: Concept) -> list[str]:
    """Every form of the concept, in every region, each once, in region order."""
    return list(dict.fromkeys(form for forms in concept.forms.values() for form in forms))


def definition_request(concept: Concept, script: Script = "simplified") -> str:
    """The prompt asking for `concept`'s definition: every region's forms (put into `script` by script-only
    conversion, each once), and the instruction to explain the thing in one concise, dictionary-style sentence that
    contains none of them. Written wholly in `script`'s Chinese."""
    _check_script(script)
    forms = list(dict.fromkeys(_in_script(form, script) for form in concept_forms(concept)))
    listed = "、".join(f"「{form}」" for form in forms)
    instruction = _INSTRUCTION if script == "simplified" else to_traditional(_INSTRUCTION)
    return instruction.format(forms=listed)


def _match_key(text: str) -> str:
    """Text in one script for finding a form across scripts (script-only OpenCC, phrase-aware then character by
    character), without spaces."""
    return convert_chars(convert(re.sub(r"\s+", "", text), "t2s"), "t2s")


def form_in(text: str, concept: Concept) -> str | None:
    """The first of the concept's forms that `text` contains, as written or across scripts; None if none."""
    key = _match_key(text)
    for form in concept_forms(concept):
        if form and (form in text or _match_key(form) in key):
            return form
    return None


def _strip_quotes(text: str) -> str:
    previous = None
    while previous != text:
        previous = text
        text = text.strip().strip(_QUOTES).strip()
    return text


def parse_definition(text: str | None, concept: Concept) -> tuple[str | None, str | None]:
    """(definition, None) from a model's answer, or (None, problem) when it cannot be used.

    Reasoning blocks (`<think>…</think>`), labels such as `定义：`, surrounding quotes and markup go; the first
    paragraph is the definition (its lines joined). Refused: an empty answer, and one that contains any of the
    concept's forms in either script (a definition naming the term gives the answer away)."""
    answer = strip_reasoning(text)
    previous = None
    while previous != answer:  # labels and quotes, in whatever order the model nests them
        previous = answer
        answer = _strip_quotes(_LABEL.sub("", answer, count=1))
    paragraph = _PARAGRAPH_BREAK.split(answer, maxsplit=1)[0] if answer else ""
    definition = _strip_quotes("".join(line.strip() for line in paragraph.splitlines()))
    if not definition:
        return None, EMPTY_ANSWER
    form = form_in(definition, concept)
    if form is not None:
        return None, f"{NAMES_A_FORM}{form}"
    return definition, None


def problem_kind(problem: str) -> str:
    """The short reason `parse_definition`'s problem is counted under: `named the term` or `empty`."""
    if problem.startswith(NAMES_A_FORM):
        return NAMED_THE_TERM
    return EMPTY if problem == EMPTY_ANSWER else problem


def missing_definitions(item_set: ItemSet) -> list[Concept]:
    """The concepts without a definition in either script, in the set's order."""
    return [concept for concept in item_set.concepts
            if concept.definition_zh_hans is None and concept.definition_zh_hant is None]


def apply_definitions(item_set: ItemSet, drafts: Mapping[str, str], model_key: str,
                      script: Script = "simplified") -> ItemSet:
    """`item_set` with the drafted definitions (concept_id → definition in `script`) filled in: the draft (put into
    `script` by script-only conversion) goes into `definition_zh_hans` (or `_hant`), the other script's by
    script-only conversion, and `definition_source` becomes `model:<model_key>` on those concepts only. Concepts
    that already have a definition, and those without a draft, are left as they are."""
    _check_script(script)
    concepts = []
    for concept in item_set.concepts:
        draft = drafts.get(concept.concept_id)
        if draft is None or concept.definition_zh_hans is not None or concept.definition_zh_hant is not None:
            concepts.append(concept)
            continue
        draft = _in_script(draft, script)
        hans, hant = _fill_definitions(draft if script == "simplified" else None,
                                       draft if script == "traditional" else None)
        concepts.append(replace(concept, definition_zh_hans=hans, definition_zh_hant=hant,
                                definition_source=f"{MODEL_SOURCE_PREFIX}{model_key}"))
    return replace(item_set, concepts=tuple(concepts))

