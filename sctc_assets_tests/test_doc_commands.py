"""Every shell command the README and the documentation site show still works as shown, or says why it cannot be
run here: each `sctc …` line parses with the parser `sctc` runs (a renamed or removed option fails), a `bench/` or
`scripts/` line names only options its script defines, the set-up and test lines are those `.ci/run` runs, the
commands that regenerate pages are run by the tests named below, and anything else carries a
`<!-- needs: network|key|gpu -->` comment on the line before its block. The command-line reference page is the
parser's own help."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from sctc_assets.cli import _parser
from sctc_assets.cli.reference import markdown as cli_reference

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")
FENCE = re.compile(r"^\s*```(bash|sh|shell|console)\s*$")
NEEDS = re.compile(r"^<!--\s*needs:\s*([a-z, |]+?)\s*-->$")
REASONS = {"network", "key", "gpu"}
OPERATORS = {"&&", "||", ";", "|", "&"}
# Commands a test runs as shown (the generated pages) or runs in effect (the site build), with that test.
RUN_BY_TESTS = {
    "python -m sctc_assets.benchmarks.tables > docs/tables.md":
        "test_schemas.py::test_docs_tables_md_is_generated_from_the_schemas",
    "python -m sctc_assets.cli.reference > docs/cli.md":
        "test_doc_commands.py::test_the_cli_reference_is_generated_from_the_parser",
    "mkdocs build --strict": "test_docs_site.py::test_sctc_docs_builds_the_site_strictly_and_only_when_needed",
    **{command: "test_audit_component.py::test_audit_in_a_fresh_dagster_project" for command in (
        "dg scaffold defs sctc_assets.components.Audit team_audit", "dg check defs", "dg list defs",
        "dg launch --job team_audit_term_inputs",
        'dg launch --job team_audit_term_model_lang --partition "zh_hans|paper-qwen"',
        "dg launch --job team_audit_term_per_model --partition paper-qwen")},
}
# Shell built-ins that run nothing a test could check (a variable for the commands after them).
BUILTINS = {"export"}


@dataclass(frozen=True)
class Shown:
    page: str
    line: int
    text: str  # the logical command line (continuations joined, comments dropped)
    needs: frozenset[str]


def documentation_pages() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def shown_commands(path: Path) -> list[Shown]:
    """The command lines of the page's shell blocks, with what the comment before each block says it needs."""
    lines = path.read_text(encoding="utf-8").splitlines()
    name = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
    found, index = [], 0
    while index < len(lines):
        if not FENCE.match(lines[index]):
            index += 1
            continue
        before = next((line.strip() for line in reversed(lines[:index]) if line.strip()), "")
        marked = NEEDS.match(before)
        needs = frozenset(re.split(r"[ ,|]+", marked.group(1))) if marked else frozenset()
        console = FENCE.match(lines[index]).group(1) == "console"
        index += 1
        pending, start = "", index
        while index < len(lines) and not lines[index].strip().startswith("```"):
            line = lines[index]
            if console:
                if not line.startswith("$ "):  # console blocks: output lines carry no prompt
                    index += 1
                    continue
                line = line[2:]
            if not pending:
                start = index + 1
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
            else:
                text = (pending + line).strip()
                pending = ""
                if text and not text.startswith("#"):
                    found.append(Shown(name, start, text, needs))
            index += 1
        index += 1
    return found


def segments(text: str) -> list[list[str]]:
    """The simple commands of a command line (split at &&, ||, ;, |), comments and redirections dropped."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands, current = [], []
    for token in lexer:
        if token in OPERATORS:
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    cleaned = []
    for words in commands:
        if any(word in (">", ">>", "<") for word in words):
            words = words[:min(words.index(word) for word in (">", ">>", "<") if word in words)]
        if words:
            cleaned.append(words)
    return cleaned


def _ci_lines() -> set[str]:
    """`.ci/run`'s commands as simple commands, `--quiet` left out (the pages show them without it)."""
    found = set()
    for line in CI.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            try:
                commands = segments(line)
            except ValueError:  # shell syntax shlex does not read ($(…) with nested quotes): not a shown command
                continue
            for words in commands:
                found.add(" ".join(word for word in words if word != "--quiet"))
    return found


CI_LINES = _ci_lines()


def _parse_sctc(arguments: list[str]) -> str | None:
    """None if the real parser accepts the arguments, else what it printed."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            _parser().parse_args(arguments)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return errors.getvalue().strip().splitlines()[-1]
    return None


def _script_problem(words: list[str]) -> str | None:
    script = REPO / words[1]
    if not script.is_file():
        return f"{words[1]} does not exist"
    source = script.read_text(encoding="utf-8")
    unknown = [word.split("=")[0] for word in words[2:] if word.startswith("--")
               and f'"{word.split("=")[0]}"' not in source]
    return f"{words[1]} defines no option {', '.join(unknown)}" if unknown else None


def problem(shown: Shown) -> str | None:
    """Why the command is neither run by a test, nor checked, nor marked; None when it is fine."""
    if shown.needs - REASONS:
        return f"unknown reason in <!-- needs: … -->: {sorted(shown.needs - REASONS)} (use {sorted(REASONS)})"
    whole = " ".join(shown.text.split())
    if whole in RUN_BY_TESTS:
        return None
    for words in segments(shown.text):
        command = " ".join(words)
        if words[0] == "sctc":  # checked even in a marked block: the options must exist
            failure = _parse_sctc(words[1:])
            if failure:
                return f"`{command}`: the parser refuses it: {failure}"
        elif words[0] in ("python", "python3") and len(words) > 1 and re.match(r"(bench|scripts)/\w+\.py$", words[1]):
            failure = _script_problem(words)
            if failure:
                return f"`{command}`: {failure}"
        elif words[0] in BUILTINS:
            continue
        elif command in CI_LINES:
            continue  # what CI runs, as CI runs it
        elif words[1:3] == ["-m", "pytest"] and words[0] in ("python", "python3") and "python -m pytest -q" in CI_LINES:
            continue  # a subset of the suite CI runs (`-m "not slow"`, a file)
        elif not shown.needs:
            return (f"`{command}` is not run by a test, not checked and not marked: run it in a test, or add "
                    f"`<!-- needs: network|key|gpu -->` on the line before its block")
    return None


ALL_SHOWN = [shown for page in documentation_pages() for shown in shown_commands(page)]


def test_the_pages_show_commands_and_the_readme_shows_the_set_up_and_the_tests():
    assert len(ALL_SHOWN) >= 30
    readme = [shown.text for shown in ALL_SHOWN if shown.page == "README.md"]
    assert readme[:3] == ['python3 -m venv .venv && . .venv/bin/activate',
                          'python -m pip install "torch==2.13.0" && python -m pip install -e ".[dev]"', "sctc run"]
    assert ". .venv/bin/activate && python -m pytest -q" in readme
    # the install lines are CI's, word for word (less --quiet), and CI runs the README's test command
    for line in readme[:2]:
        assert all(" ".join(words) in CI_LINES for words in segments(line)), line
    assert "python -m pytest -q" in CI_LINES


@pytest.mark.parametrize("shown", ALL_SHOWN, ids=lambda shown: f"{shown.page}:{shown.line}")
def test_every_shown_command_is_run_checked_or_marked(shown):
    assert problem(shown) is None, f"{shown.page}:{shown.line}: {problem(shown)}"


def test_the_tests_named_for_commands_exist():
    for test in RUN_BY_TESTS.values():
        module, name = test.split("::")
        assert f"def {name}(" in (REPO / "sctc_assets_tests" / module).read_text(encoding="utf-8"), test


def test_a_renamed_option_an_unknown_script_option_or_an_unmarked_command_is_caught():
    good = Shown("x.md", 1, "sctc run --models my-gpt --max-cost 5 && sctc plan --benchmarks all", frozenset())
    assert problem(good) is None
    assert "--max-costs" in problem(Shown("x.md", 1, "sctc run --max-costs 5", frozenset()))
    assert "invalid choice" in problem(Shown("x.md", 1, "sctc plan --benchmarks everything", frozenset()))
    assert "defines no option --no-such" in problem(Shown("x.md", 1, "python bench/cli_speed.py --no-such",
                                                          frozenset()))
    assert "not marked" in problem(Shown("x.md", 1, "curl -O https://example.org/x", frozenset()))
    assert problem(Shown("x.md", 1, "curl -O https://example.org/x", frozenset({"network"}))) is None
    assert "unknown reason" in problem(Shown("x.md", 1, "curl x", frozenset({"coffee"})))
    # a marked block still has its sctc lines parsed
    assert "--max-costs" in problem(Shown("x.md", 1, "export K=1 && sctc run --max-costs 5", frozenset({"key"})))
    # an install line that is not CI's needs a mark
    assert "not marked" in problem(Shown("x.md", 1, "python -m pip install -e .", frozenset()))


def test_blocks_are_read_with_continuations_prompts_and_marks(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- needs: key -->\n```bash\n# a comment\nsctc run \\\n    --models a b\n```\n\n"
                    "```console\n$ sctc models\noutput line\n```\n\n```python\nprint(1)\n```\n", encoding="utf-8")
    found = shown_commands(page)
    assert [(item.text, item.needs, item.line) for item in found] == [
        ("sctc run      --models a b", frozenset({"key"}), 6), ("sctc models", frozenset(), 11)]


def test_the_cli_reference_is_generated_from_the_parser():
    """Regenerate with `python -m sctc_assets.cli.reference > docs/cli.md`."""
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert page == cli_reference()
    for command in ("run", "plan", "models", "report", "ui", "docs", "terms define", "cache export"):
        assert f"## `sctc {command}`" in page
    assert "--build-only" in page and "--max-cost" in page


def test_the_readme_stays_one_screen():
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


def _known_model_keys() -> set[str]:
    import yaml

    registry = yaml.safe_load((REPO / "data" / "models.yaml").read_text(encoding="utf-8"))["models"]
    presets = yaml.safe_load((REPO / "data" / "model_presets.yaml").read_text(encoding="utf-8"))["presets"]
    return set(registry) | {preset["key"] for preset in presets.values()}


def test_the_model_keys_the_pages_run_are_registry_or_preset_keys():
    """A preset or registry key renamed leaves no page running a model nobody has; `my-…` keys are the reader's own
    entries and `tsb-…` the Pro study's imported files."""
    known, unknown = _known_model_keys(), []
    for shown in ALL_SHOWN:
        for words in segments(shown.text):
            if words[0] == "sctc" and "--models" in words:
                for key in words[words.index("--models") + 1:]:
                    if key.startswith("-"):
                        break
                    if key not in known and not key.startswith(("my-", "tsb-")):
                        unknown.append(f"{shown.page}:{shown.line}: {key}")
    assert not unknown, unknown


def test_the_presets_set_up_commands_are_the_ones_the_pages_show():
    import yaml

    presets = yaml.safe_load((REPO / "data" / "model_presets.yaml").read_text(encoding="utf-8"))["presets"]
    shown = {" ".join(words) for item in ALL_SHOWN if item.page == "docs/auditing-a-model.md"
             for words in segments(item.text)}
    for name, preset in presets.items():
        for words in segments(preset["setup"]):
            assert " ".join(words) in shown or words[0] == "export", (name, " ".join(words))
