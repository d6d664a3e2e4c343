"""Which modules may import what, read from the source with `ast` (every import node, inside functions too)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sctc_assets"
DAGSTER_INTERNALS = "running/dagster_internals.py"
KNOWN_PRIVATE_DAGSTER = {
    "runner.py",  # moves into running/ with the runner
}


def _modules() -> dict[str, ast.Module]:
    return {path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for path in sorted(PACKAGE.rglob("*.py"))}


def _imported(relative: str, tree: ast.Module) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the module, relative imports resolved."""
    parts = ["sctc_assets", *relative.removesuffix(".py").split("/")]
    package = parts[:-1]  # __init__.py resolves against its own package, which is its folder
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
            module = ".".join(name for name in (base, node.module or "") if name)
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def _is_private_dagster(name: str) -> bool:
    return name.startswith("dagster._")


def test_only_dagster_internals_reaches_into_private_dagster_modules():
    offending = []
    for relative, tree in _modules().items():
        if relative == DAGSTER_INTERNALS or relative in KNOWN_PRIVATE_DAGSTER:
            continue
        lines = {line: name for line, name in reversed(_imported(relative, tree)) if _is_private_dagster(name)}
        offending += [f"{relative}:{line} imports {name}" for line, name in sorted(lines.items())]
        # Instance config names classes by module string, which no import shows.
        offending += [f"{relative}:{node.lineno} names {node.value}" for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and isinstance(node.value, str)
                      and _is_private_dagster(node.value)]
    assert not offending, "private Dagster names belong in running/dagster_internals.py:\n" + "\n".join(offending)


def test_known_exceptions_still_exist():
    # An exception that no longer imports private Dagster is removed from the list, so it cannot come back unseen.
    modules = _modules()
    for relative in KNOWN_PRIVATE_DAGSTER:
        assert relative in modules, relative
        assert any(_is_private_dagster(name) for _, name in _imported(relative, modules[relative])), relative
