"""Which modules may import what, read from the source with `ast` (every import node, inside functions too)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sctc_assets"
DAGSTER_INTERNALS = "running/dagster_internals.py"
KNOWN_PRIVATE_DAGSTER: set[str] = set()


@cache  # parsed once for all the tests
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


# The layers, bottom first: a module imports its own layer and those below it, never one above (imports inside
# functions count too). `running/` drives the definitions; the command line sits above it, and the audit Component
# (`components/`, which dg imports by name and nothing of the package imports) on top: it reads `sctc run`'s parser.
# A layer names top-level modules or packages of sctc_assets, or one module inside a package (`assets.partitions`: the partition definitions,
# which the IO manager reads the model dimension's name from, sit below the rest of the Dagster layer).
LAYERS = (("lib",), ("benchmarks",), ("backends", "resources", "assets.partitions"), ("assets",),
          ("definitions",), ("running",), ("cli", "__init__", "__main__"), ("components",))


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "sctc_assets":
        return None
    top = parts[1] if len(parts) > 1 else "__init__"
    inner = ".".join(parts[1:3])  # a module named by itself in LAYERS goes before its package
    return next((index for index, names in enumerate(LAYERS) if inner in names),
                next((index for index, names in enumerate(LAYERS) if top in names), None))


def test_the_package_root_shows_the_layers():
    """The root holds the layers' packages and the code location's entry point, no loose module of one layer (a
    command-line helper belongs in `cli/`, a Dagster object beside the assets in `assets/`)."""
    loose = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert loose == ["__init__.py", "definitions.py"]


def test_every_import_points_down():
    offending = []
    for relative, tree in _modules().items():
        own = _layer("sctc_assets." + relative.removesuffix(".py").replace("/", "."))
        assert own is not None, f"{relative}: in no layer of LAYERS"
        for line, name in _imported(relative, tree):
            target = _layer(name)
            if target is not None and target > own and name != "sctc_assets":
                offending.append(f"{relative}:{line} imports {name} (layer {LAYERS[target]} above {LAYERS[own]})")
    assert not offending, "imports that point up:\n" + "\n".join(offending)


def test_known_exceptions_still_exist():
    # An exception that no longer imports private Dagster is removed from the list, so it cannot come back unseen.
    modules = _modules()
    for relative in KNOWN_PRIVATE_DAGSTER:
        assert relative in modules, relative
        assert any(_is_private_dagster(name) for _, name in _imported(relative, modules[relative])), relative


# The command line imports at module top: `sctc_assets.cli.main` loads the chosen command's module (importlib), and
# that is its one lazy load. An import inside a function there is one that is genuinely conditional, listed here.
CLI_CONDITIONAL_IMPORTS = {("cli/models.py", "sctc_assets.resources.model_registry"),  # a backend of your own
                           ("cli/validation.py", "dagster_postgres")}  # whether the optional package is installed


def test_the_command_line_imports_at_module_top():
    found = set()
    for relative, tree in _modules().items():
        if not relative.startswith("cli/"):
            continue
        for function in ast.walk(tree):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found |= {(relative, node.module if isinstance(node, ast.ImportFrom) else node.names[0].name)
                          for node in ast.walk(function) if isinstance(node, (ast.Import, ast.ImportFrom))}
    assert found == CLI_CONDITIONAL_IMPORTS


def _upper_layer(name: str) -> bool:
    """Dagster, or a part of sctc_assets other than lib (backends, assets, resources, running, definitions …)."""
    if name == "dagster" or name.startswith(("dagster.", "dagster_")):
        return True
    return name.startswith("sctc_assets.") and not (name == "sctc_assets.lib" or name.startswith("sctc_assets.lib."))


def test_lib_imports_neither_dagster_nor_the_layers_above_it():
    # lib/ promises code usable without Dagster (a notebook, a worker); one import upward breaks that for every
    # module importing it.
    offending = [f"{relative}:{line} imports {name}" for relative, tree in _modules().items()
                 if relative.startswith("lib/") for line, name in _imported(relative, tree) if _upper_layer(name)]
    assert not offending, "\n".join(offending)


def test_importing_all_of_lib_loads_no_dagster():
    # The source check above cannot see a third-party package that imports Dagster; importing shows it.
    code = ("import importlib, pkgutil, sys, sctc_assets.lib as lib\n"
            "for module in pkgutil.walk_packages(lib.__path__, 'sctc_assets.lib.'):\n"
            "    if not module.name.endswith('.__main__'):\n"
            "        importlib.import_module(module.name)\n"
            "print(sorted(name for name in sys.modules if name.split('.')[0] == 'dagster'"
            " or name.startswith('sctc_assets.') and not name.startswith('sctc_assets.lib')))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE.parent),
                                                                      os.environ.get("PYTHONPATH")]))}
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert output.stdout.strip() == "[]"


def test_the_replay_backends_are_those_that_bypass_the_cache():
    """`uses_response_cache` answers without importing a backend (Dagster); it must agree with the classes."""
    from sctc_assets.backends import backend_class
    from sctc_assets.lib.backend_catalog import BUILTIN_BACKENDS, uses_response_cache

    for name in BUILTIN_BACKENDS:
        assert uses_response_cache(name) == backend_class(name).uses_cache, name
    assert uses_response_cache("sctc_assets_tests.fakes:ScriptedBackend")
    assert uses_response_cache("no_such_module:Backend")


def test_the_catalog_reads_each_backend_s_traits_from_its_class():
    """The traits the catalog reads from a built-in backend's source (no import) are its class's, and a backend of
    one's own (`module:Class`) has those its class states."""
    from sctc_assets.backends import backend_class
    from sctc_assets.lib.backend_catalog import BUILTIN_BACKENDS, TRAIT_NAMES, BackendTraits, traits

    for name in BUILTIN_BACKENDS:
        cls = backend_class(name)
        assert traits(name) == BackendTraits(**{trait: getattr(cls, trait) for trait in TRAIT_NAMES}), name
    replay, pro = traits("replay"), traits("tsb_replay")
    assert (replay.replays, pro.replays) == ("SC-TC-Bench", "Pro study")
    assert replay.answers("term") and replay.answers("name") and not replay.answers("sovereignty")
    assert pro.answers("sovereignty") and not pro.answers("term") and not pro.answers("reviews")
    assert traits("openai").answers("sovereignty") and not traits("openai").replays_benchmark("term")
    assert traits("sctc_assets_tests.fakes:ForkableFake").forkable
    assert traits("sctc_assets_tests.fakes:EndpointFake") == traits(None) == BackendTraits()
    assert traits("no_such_module:Backend") == traits("no-such-backend") == BackendTraits()


def _mentions_backend(node: ast.AST) -> bool:
    return any(isinstance(part, ast.Name) and "backend" in part.id.lower()
               or isinstance(part, ast.Attribute) and "backend" in part.attr.lower() for part in ast.walk(node))


def test_no_backend_name_is_compared_outside_the_catalog():
    """Backends are told apart by their traits (`lib/backend_catalog.traits`, the classes' methods), never by name:
    no comparison of a backend with a built-in backend's name, and no list of backend names, outside the catalog."""
    from sctc_assets.lib.backend_catalog import BUILTIN_BACKENDS

    offending = []
    for relative, tree in _modules().items():
        if relative == "lib/backend_catalog.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and _mentions_backend(node):
                names = [part.value for part in ast.walk(node)
                         if isinstance(part, ast.Constant) and part.value in BUILTIN_BACKENDS]
                if names:
                    offending.append(f"{relative}:{node.lineno}: compares a backend with {names}")
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(target, ast.Name) and target.id.endswith("_BACKENDS") for target in targets):
                    offending.append(f"{relative}:{node.lineno}: a list of backends by name")
    assert not offending, "\n".join(offending)
