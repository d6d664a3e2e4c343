"""The test session runs on a data folder and registries of its own, whatever the person running it has: an item set
registered in the checkout's `data/item_sets.yaml` (what `sctc run --term-items … --item-set-name …` writes), or a
folder or registry their environment names, is not read by the tests (issue 38, point 7).

Proved in a fake checkout: a copy of the package and of the suite's conftest in a temporary folder, whose `data/`
holds a registered item set, with `$SCTC_DATA_DIR` and `$SCTC_ITEM_SETS` naming more; a pytest session started
there sees none of them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ITEMS = """concept_id,category,definition_zh_hans,definition_zh_hant,definition_source,term_cn,term_tw,term_hk
k1,交通,一种两人并排骑的车,,hand,双座车/并骑车,雙座車,孖座車
"""
SHIPPED_DATA = ("models.yaml", "model_presets.yaml", "tokenizers.yaml", "corpora.yaml", "reviews")
PROBE = '''
import os
from pathlib import Path


def test_the_session_sees_only_its_own_data_folder():
    from sctc_assets.benchmarks import SPECS
    from sctc_assets.benchmarks.item_sets import ITEM_SETS
    from sctc_assets.lib import paths

    assert ITEM_SETS == {}
    assert not [name for name in SPECS if name.startswith("terms_")]
    assert paths.REPO_DATA_DIR.is_dir()  # the fake checkout's data/
    assert paths.data_dir() not in (paths.REPO_DATA_DIR, Path(os.environ["USERS_OWN_DATA"]))
    assert "SCTC_ITEM_SETS" not in os.environ
'''


def _registry(folder: Path, name: str, items: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "item_sets.yaml").write_text(f"item_sets:\n  {name}:\n    source: {items}\n", encoding="utf-8")


@pytest.mark.parametrize("users_environment", [False, True], ids=["checkout-data", "users-environment"])
def test_a_session_reads_neither_the_checkouts_data_folder_nor_the_users_registries(tmp_path, users_environment):
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "sctc_assets", checkout / "sctc_assets", ignore=shutil.ignore_patterns("__pycache__"))
    tests = checkout / "sctc_assets_tests"
    tests.mkdir()
    for name in ("__init__.py", "conftest.py", "postgres.py", "servers.py"):
        shutil.copy2(REPO / "sctc_assets_tests" / name, tests / name)
    (tests / "test_probe.py").write_text(PROBE, encoding="utf-8")
    for name in SHIPPED_DATA:  # what the repository's data/ ships (models.yaml …), as a clone has it
        source = REPO / "data" / name
        if source.is_dir():
            shutil.copytree(source, checkout / "data" / name)
        elif source.exists():
            (checkout / "data").mkdir(exist_ok=True)
            shutil.copy2(source, checkout / "data" / name)
    items = tmp_path / "items.csv"
    items.write_text(ITEMS, encoding="utf-8")
    _registry(checkout / "data", "in_the_checkout", items)  # as `sctc run --term-items … --item-set-name` leaves it
    _registry(tmp_path / "users-data", "in_the_users_data_dir", items)
    _registry(tmp_path / "users-registry", "in_the_users_registry", items)

    env = {key: value for key, value in os.environ.items() if key not in ("SCTC_DATA_DIR", "SCTC_ITEM_SETS")}
    env.update(PYTHONPATH=str(checkout), USERS_OWN_DATA=str(tmp_path / "users-data"))
    if users_environment:  # else the checkout's data/ is the data folder (`paths.data_dir()`'s fallback)
        env.update(SCTC_DATA_DIR=str(tmp_path / "users-data"),
                   SCTC_ITEM_SETS=str(tmp_path / "users-registry" / "item_sets.yaml"))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                             "--rootdir", str(checkout), str(tests / "test_probe.py")],
                            cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "1 passed" in result.stdout
    # Nothing was written into the fake checkout's data folder either.
    assert sorted(path.name for path in (checkout / "data").iterdir()) == sorted([*SHIPPED_DATA, "item_sets.yaml"])
