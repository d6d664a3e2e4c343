"""Prompt variants of the regional name task (paper Appendix A.6, Tables 9–10; pure Python, no Dagster).

The authors rephrased each prompt with GPT-4o-mini and the instruction "Please rephrase the following prompt while
maintaining its meaning: {original prompt}" (Appendix A.6), and ran the term task over its three wordings (Appendix
B.1). Their name-task rephrasings (Tables 9–10) are not in the upstream data, so `sctc names rephrase` asks a
registered model for them and writes a variants file for a person to review; `sctc run --name-prompt-variants FILE`
then runs the name benchmark over variant 1 (the paper's wording, `prompts.TEMPLATES`) and variants 2 and 3 (the
file's).

- `rephrase_request(lang)`: the A.6 instruction around the language's template, its `{n}` and `{names}` kept as
  placeholders for the model to keep;
- `parse_rephrasing(text)`: the template in an answer, or why it cannot be used;
- `write_variants(rows, path)` / `read_variants(path)`: the file (`lang, prompt_variant, template, template_source`),
  read back with a one-line error naming the file and line of a bad row;
- `render_variant(templates, lang, variant, candidates, separator)`: one prompt of a variant;
- `templates_digest(templates)`: what `sctc run` puts in the run config, so an edited file runs again.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from pathlib import Path
from typing import Mapping, Sequence

from sctc_assets.lib.atomic_files import write_text
from sctc_assets.lib.generation import strip_reasoning
from sctc_assets.lib.name.prompts import TEMPLATES
from sctc_assets.lib.text_files import read_utf8

# Appendix A.6, word for word; `{prompt}` is the original prompt.
REPHRASE_INSTRUCTION = "Please rephrase the following prompt while maintaining its meaning: {prompt}"
PAPER_VARIANT = 1  # the paper's wording (Table 1(b))
REPHRASED_VARIANTS = (2, 3)  # Tables 9 and 10: the first and second rephrasing
PROMPT_VARIANTS = (PAPER_VARIANT, *REPHRASED_VARIANTS)
PLACEHOLDERS = ("{n}", "{names}")
FILE_COLUMNS = ["lang", "prompt_variant", "template", "template_source"]
MODEL_SOURCE_PREFIX = "model:"
_QUOTES = "\"'“”‘’「」『』`*"
_FIELD = re.compile(r"\{([^{}]*)\}")


class VariantsFileError(ValueError):
    """A variants file that cannot be used; the message names the file and line."""


def rephrase_request(lang: str) -> str:
    """The A.6 instruction with the paper's `lang` prompt, its `{n}` and `{names}` placeholders left in."""
    if lang not in TEMPLATES:
        raise ValueError(f"no name prompt template for lang {lang!r}; expected one of {list(TEMPLATES)}")
    return REPHRASE_INSTRUCTION.format(prompt=TEMPLATES[lang])


def template_problem(template: str) -> str | None:
    """Why `template` cannot render a prompt (each placeholder exactly once, no other `{…}` field), else None."""
    if not template.strip():
        return "the template is empty"
    for placeholder in PLACEHOLDERS:
        count = template.count(placeholder)
        if count != 1:
            return f"the template has {placeholder} {count} times (it needs it exactly once)"
    others = sorted({field for field in _FIELD.findall(template) if f"{{{field}}}" not in PLACEHOLDERS})
    if others:
        return "the template has unknown fields " + ", ".join(f"{{{field}}}" for field in others)
    return None


def parse_rephrasing(text: str | None) -> tuple[str | None, str | None]:
    """(template, None) from a model's answer, or (None, problem). Reasoning blocks, surrounding quotes and blank
    lines go; the template must keep `{n}` and `{names}` once each."""
    answer = strip_reasoning(text).strip()
    previous = None
    while previous != answer:
        previous = answer
        answer = answer.strip().strip(_QUOTES).strip()
    template = " ".join(line.strip() for line in answer.splitlines() if line.strip())
    problem = template_problem(template)
    return (None, problem) if problem else (template, None)


def write_variants(rows: Sequence[Mapping[str, object]], path: str | Path) -> Path:
    """The variants file: one row per (lang, prompt_variant) with its template (blank where none was drafted) and
    `template_source` (`model:<key>`)."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FILE_COLUMNS)
    for row in rows:
        writer.writerow([row["lang"], int(row["prompt_variant"]), row.get("template") or "",
                         row.get("template_source") or ""])
    return write_text(Path(path), buffer.getvalue())


def read_variants(path: str | Path) -> dict[tuple[str, int], str]:
    """(lang, prompt_variant) → template of a reviewed variants file. Every language and both rephrased variants
    must be there, once, with a usable template; a bad row raises `VariantsFileError` naming `path:line`."""
    path = Path(path)
    try:
        text = read_utf8(path, error=VariantsFileError)
    except OSError as exc:
        raise VariantsFileError(f"{path}: {exc.strerror or exc}") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [column for column in FILE_COLUMNS[:3] if column not in (reader.fieldnames or [])]
    if missing:
        raise VariantsFileError(f"{path}:1: missing column(s) {', '.join(missing)}; expected {', '.join(FILE_COLUMNS)}")
    templates: dict[tuple[str, int], str] = {}
    for record in reader:
        where = f"{path}:{reader.line_num}"
        lang = (record.get("lang") or "").strip()
        if lang not in TEMPLATES:
            raise VariantsFileError(f"{where}: unknown lang {lang!r}; expected one of {', '.join(TEMPLATES)}")
        raw = (record.get("prompt_variant") or "").strip()
        if raw not in {str(variant) for variant in REPHRASED_VARIANTS}:
            raise VariantsFileError(f"{where}: prompt_variant {raw!r}; expected "
                                    f"{' or '.join(map(str, REPHRASED_VARIANTS))} (1 is the paper's wording)")
        key = (lang, int(raw))
        if key in templates:
            raise VariantsFileError(f"{where}: a second row for {lang} prompt_variant {raw}")
        template = (record.get("template") or "").strip()
        problem = template_problem(template)
        if problem:
            raise VariantsFileError(f"{where}: {lang} prompt_variant {raw}: {problem}")
        templates[key] = template
    absent = [f"{lang} {variant}" for lang in TEMPLATES for variant in REPHRASED_VARIANTS
              if (lang, variant) not in templates]
    if absent:
        raise VariantsFileError(f"{path}: no template for {', '.join(absent)}")
    return templates


def render_variant(templates: Mapping[tuple[str, int], str], lang: str, variant: int, candidates: Sequence[str],
                   separator: str) -> str:
    """The prompt of `variant` (1: the paper's wording; 2, 3: `templates`) for one candidate list."""
    template = TEMPLATES[lang] if variant == PAPER_VARIANT else templates[(lang, variant)]
    return template.replace("{n}", str(len(candidates))).replace("{names}", separator.join(candidates))


def templates_digest(templates: Mapping[tuple[str, int], str]) -> str:
    """A digest of a variants file's templates (not its other columns): equal templates, equal digest. `sctc run`
    puts it in `name_responses`' config, so a file edited after a run is asked again, not left unchanged."""
    payload = json.dumps(sorted([lang, variant, template] for (lang, variant), template in templates.items()),
                         ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]
