"""The `sctc_assets` code location: everything Dagster finds in the defs folder `sctc_assets/assets/` (named by
`[tool.dg.project]` in pyproject.toml): each benchmark folder's assets, checks, jobs and sensors, the answer checks,
and from `assets/shared.py` the shared resources, the registry sensor and the (opt-in) automation sensor."""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from pathlib import Path

import dagster as dg

from sctc_assets.benchmarks import SPECS

# Tests, `sctc run` and the report asset take the resources from here.
from sctc_assets.assets.shared import shared_resources  # noqa: F401

DEFS_MODULE = "sctc_assets.assets"  # pyproject.toml's `[tool.dg.project] defs_module`, for an installed wheel
SOURCE_ROOT = Path(__file__).resolve().parent.parent


def _each_once(loaded: dg.Definitions) -> dg.Definitions:
    """The same definitions with each object listed once: the folder's modules import each other's objects (a
    benchmark's `__init__` its assets), and Dagster lists an object once per module that holds it."""

    def once(objects) -> list:
        return list({id(obj): obj for obj in objects or []}.values())

    return dg.Definitions(assets=once(loaded.assets), asset_checks=once(loaded.asset_checks), jobs=once(loaded.jobs),
                          schedules=once(loaded.schedules), sensors=once(loaded.sensors), resources=loaded.resources,
                          executor=loaded.executor, loggers=loaded.loggers, metadata=loaded.metadata,
                          component_tree=loaded.component_tree)


def _import_folder() -> None:
    """Imports every module of the defs folder. Dagster imports them itself, but inside `warnings.catch_warnings()`,
    which would undo the warning filters they set at import (`catalog`) for the runs too."""
    package = importlib.import_module(DEFS_MODULE)
    for module in pkgutil.walk_packages(package.__path__, prefix=f"{DEFS_MODULE}."):
        importlib.import_module(module.name)


def load_definitions(source_root: Path | None = SOURCE_ROOT) -> dg.Definitions:
    """The defs folder's definitions: found through pyproject.toml's `[tool.dg]` in a source checkout (an editable
    install); an installed wheel has no pyproject.toml, so there the folder is named directly. Not a search upward
    from the package: from a virtual environment inside another dg project it would load that project's folder."""
    _import_folder()
    if source_root is not None and (source_root / "pyproject.toml").is_file():
        loaded = dg.load_from_defs_folder(path_within_project=source_root)
    else:
        tree = dg.ComponentTree.from_module(defs_module=importlib.import_module(DEFS_MODULE),
                                            project_root=Path(__file__).resolve().parent)
        with warnings.catch_warnings():  # as `load_from_defs_folder` does: the loader's own preview functions
            warnings.simplefilter("ignore", category=dg.PreviewWarning)
            loaded = tree.build_defs()
    return _each_once(dg.Definitions.merge(loaded, *plugin_definitions()))


def every_asset(definitions: dg.Definitions) -> list:
    """Every materializable assets definition of `definitions` once (a multi-asset holds several keys), for
    `dg.materialize`. Not the observed source assets (`served_model`): nothing materializes them, and the location
    binds its resources into their definition, which `dg.materialize(..., resources=...)` refuses as a conflict."""
    graph = definitions.resolve_asset_graph()
    keys = [key for key in graph.get_all_asset_keys() if graph.get(key).is_materializable]
    return list({id(a): a for a in (definitions.get_assets_def(key) for key in keys)}.values())


def plugin_definitions() -> list[dg.Definitions]:
    """The assets and checks of the benchmarks from other packages (`sctc_assets.benchmarks.plugins`); their jobs
    come with every spec's from `assets/jobs.py`."""
    found = []
    for spec in SPECS.values():
        if spec.assets_module:
            module = importlib.import_module(spec.assets_module)
            found.append(dg.Definitions(assets=dg.load_assets_from_modules([module]),
                                        asset_checks=dg.load_asset_checks_from_modules([module])))
    return found


defs = load_definitions()
