"""Shared fixtures. Tests that need the published SC-TC-Bench data read it from `$SCTC_UPSTREAM` (CI sets it to
`../shared/upstream/SC-TC-Bench-aaad554.tar.xz`) and skip without it, unless `$SCTC_REQUIRE_UPSTREAM` is set, in
which case its absence is a failure.

Downloads (the joined embedded model, tokenizer distributions, URL downloads) go to `$SCTC_DOWNLOAD_CACHE`; unless
it is set, the session uses a temporary one of its own, removed at its end, so no test writes into ~/.cache and
every test of the session shares one join of the embedded model; its `weights/` links to the checkout's
`data/cache/weights/`, so the embedded model is de-quantized once per checkout.

Each session (each xdist worker) runs on a data folder of its own, a temporary `$SCTC_DATA_DIR` set before any test
module imports the definitions, and without the variables that name a person's registries or instance: an item set
registered in the checkout's `data/item_sets.yaml`, or anything else there, is never read
(`test_session_data_folder.py`)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from sctc_assets.lib.embedded_model import ARTIFACTS, is_verified, sidecar_path
from sctc_assets.lib.interrupt import restore_interrupt_handler
from sctc_assets.lib.paths import DOWNLOAD_CACHE_ENV_VAR, default_upstream_cache_dir
from sctc_assets.lib.sctc_upstream import SCTC_ENV_VAR, SCTC_MARKERS
from sctc_assets.lib.upstream_source import UpstreamSource
from sctc_assets_tests.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[1]
SHARED_ARCHIVE = REPO.parent / "shared" / "upstream" / "SC-TC-Bench-aaad554.tar.xz"


# A worker may hold the embedded model and a paper-scale pipeline at once: about 6 GiB at its peak.
WORKER_MEMORY_GIB = 6


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker per usable core, but no more than the available memory holds (2 on a 2-core, 24 GB
    machine; a worker too many would push the suite into swap or the OOM killer)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            available_kib = next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return cores
    return max(1, min(cores, available_kib // (WORKER_MEMORY_GIB * 1024 * 1024)))


# What a person's environment points at, their data and registries: the session runs without them.
USER_STATE_VARIABLES = ("SCTC_ITEM_SETS", "SCTC_ITEM_SET_ENTRY", "SCTC_VARIETIES", "SCTC_MODELS", "SCTC_TOKENIZERS",
                        "SCTC_CORPORA", "SCTC_BENCHMARK_MODULES", "SCTC_REVIEWS", "SCTC_TSB_REVIEWS",
                        "SCTC_TSB_REVIEW_QUEUE", "SCTC_TSB_RED_FLAGS", "SCTC_DATABASE_URL", "SCTC_TABLE_STORE",
                        "SCTC_TERM_JUDGE", "SCTC_NAME_JUDGE", "SCTC_SOVEREIGNTY_JUDGE", "SCTC_AUTOMATION",
                        "SCTC_MAX_CALLS", "SCTC_MAX_COST_USD", "SCTC_BUDGET_SCOPE", "DAGSTER_HOME")
USER_STATE_VARIABLES += ("SCTC_TSB_PROMPT_FILES",)  # custom sovereignty prompt files (--sovereignty-prompt-file)
# Modules that read the data folder's registries when they are imported (the item sets, hence the benchmarks and
# the definitions): imported before the session's data folder is set, they would hold the user's.
READS_DATA_AT_IMPORT = ("sctc_assets.lib.term.item_sources", "sctc_assets.benchmarks", "sctc_assets.definitions")


def _own_data_folder(config: pytest.Config) -> None:
    """The session's (each xdist worker's) own data folder: `$SCTC_DATA_DIR` points at an empty temporary folder
    before any test module imports the definitions, so neither the checkout's `data/` (its `item_sets.yaml`,
    `models.d/`, caches and storage) nor a folder the user's environment names is read; the variables that point at
    a person's registries or instance are unset."""
    early = [name for name in READS_DATA_AT_IMPORT if name in sys.modules]
    if early:
        raise pytest.UsageError(f"{', '.join(early)} imported before the test session set its own data folder: "
                                "conftest.py must not import them at module level")
    for name in USER_STATE_VARIABLES:
        os.environ.pop(name, None)
    folder = Path(tempfile.mkdtemp(prefix="sctc-test-data-"))
    os.environ["SCTC_DATA_DIR"] = str(folder)
    config.stash[_SESSION_DATA] = folder


def pytest_configure(config: pytest.Config) -> None:
    # A suite started with `nohup … &` inherits SIGINT ignored; Dagster would then make its helpers ignore SIGTERM.
    restore_interrupt_handler()
    _own_data_folder(config)
    if not os.environ.get(DOWNLOAD_CACHE_ENV_VAR):
        folder = Path(tempfile.mkdtemp(prefix="sctc-test-downloads-"))
        os.environ[DOWNLOAD_CACHE_ENV_VAR] = str(folder)
        config.stash[_SESSION_DOWNLOADS] = folder
        _link_joined_models(folder / "models")
        # The checkout's converted weights (backends/gguf_cache.py): converted once per checkout, not per session.
        shipped_weights = REPO / "data" / "cache" / "weights"
        shipped_weights.mkdir(parents=True, exist_ok=True)
        (folder / "weights").symlink_to(shipped_weights)


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_SESSION_DOWNLOADS, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(DOWNLOAD_CACHE_ENV_VAR, None)
    data = config.stash.get(_SESSION_DATA, None)
    if data is not None:
        shutil.rmtree(data, ignore_errors=True)


_SESSION_DOWNLOADS = pytest.StashKey[Path]()
_SESSION_DATA = pytest.StashKey[Path]()


def _link_joined_models(models: Path) -> None:
    """Hard-link the embedded model a checkout's `data/models/` already holds (verified) into the session's
    download cache: a link shares the file's modification time, so its sidecar stays valid, and saves a 0.5 GB
    join. Without such a file (or across file systems) the first test that needs it joins it once."""
    for artifact in ARTIFACTS.values():
        joined = REPO / "data" / "models" / artifact.hub_filename
        if not is_verified(joined, artifact.sha256, artifact.size):
            continue
        models.mkdir(parents=True, exist_ok=True)
        try:
            os.link(joined, models / joined.name)
        except OSError:
            continue
        shutil.copy2(sidecar_path(joined), sidecar_path(models / joined.name))


@pytest.fixture(autouse=True)
def restored_environment(monkeypatch: pytest.MonkeyPatch):
    """The environment as it was before each test: `sctc` sets `$SCTC_MODELS`, `$SCTC_MAX_CALLS`, `$DAGSTER_HOME` …
    from its options for the Dagster runs it starts, and a later test must not inherit them."""
    before = dict(os.environ)
    yield
    # monkeypatch's own undo comes after this fixture's, and would put back what `sctc` had set before a
    # monkeypatch.setenv of the same variable (a test that runs `sctc --registry`, then sets $SCTC_MODELS itself)
    monkeypatch.undo()
    for key in set(os.environ) - set(before):
        del os.environ[key]
    for key, value in before.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def no_audit_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """`sctc run` builds the audit report at its end; only the report's own tests read it (they remove this)."""
    monkeypatch.setenv("SCTC_NO_REPORT", "1")


def upstream_location() -> str | None:
    configured = os.environ.get(SCTC_ENV_VAR)
    if configured:
        return configured
    return str(SHARED_ARCHIVE) if SHARED_ARCHIVE.exists() else None


@pytest.fixture(scope="session")
def sctc_location() -> str:
    location = upstream_location()
    if location is None:
        message = f"SC-TC-Bench upstream data not found: set ${SCTC_ENV_VAR}"
        if os.environ.get("SCTC_REQUIRE_UPSTREAM"):
            pytest.fail(message)
        pytest.skip(message)
    return location


@pytest.fixture(scope="session")
def sctc_source(sctc_location: str) -> UpstreamSource:
    return UpstreamSource.open(sctc_location, cache_dir=default_upstream_cache_dir(), markers=SCTC_MARKERS)


@pytest.fixture
def isolated_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh data folder (storage, cache, outputs, Dagster home) for one test."""
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("SCTC_DATA_DIR", str(data))
    # Set, then deleted, so that the DAGSTER_HOME `sctc` sets inside the test is undone afterwards too.
    monkeypatch.setenv("DAGSTER_HOME", "")
    monkeypatch.delenv("DAGSTER_HOME")
    return data


@pytest.fixture
def machine_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own download cache (`$SCTC_DOWNLOAD_CACHE`), empty: what it downloads or converts is not the
    session's."""
    folder = tmp_path / "machine-cache"
    monkeypatch.setenv(DOWNLOAD_CACHE_ENV_VAR, str(folder))
    return folder


@pytest.fixture
def extracted_upstream(sctc_source: UpstreamSource, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point `$SCTC_UPSTREAM` at the already extracted data folder, so no test extracts the archive twice."""
    monkeypatch.setenv(SCTC_ENV_VAR, str(sctc_source.root))
    return sctc_source.root


def _shared_data(env_var: str, shared_folder: str, what: str) -> str:
    """`$env_var`, else ../shared/upstream/<shared_folder> if it exists; the test is skipped without either (a
    failure under `$SCTC_REQUIRE_UPSTREAM`)."""
    shared = REPO.parent / "shared" / "upstream" / shared_folder
    location = os.environ.get(env_var) or (str(shared) if shared.is_dir() else None)
    if not location:
        message = f"{what} not found: set ${env_var}"
        if os.environ.get("SCTC_REQUIRE_UPSTREAM"):
            pytest.fail(message)
        pytest.skip(message)
    return location


@pytest.fixture(scope="session")
def tsb_location() -> str:
    """The Taiwan Sovereignty Benchmark data (`$SCTC_TSB_UPSTREAM`; CI: ../shared/upstream/taiwan-sovereignty)."""
    return _shared_data("SCTC_TSB_UPSTREAM", "taiwan-sovereignty", "Taiwan Sovereignty Benchmark data")


@pytest.fixture(scope="session")
def csld_location() -> Path:
    """The csld lists of g0v/moedict-data-csld (`$SCTC_CSLD_UPSTREAM`; CI:
    ../shared/upstream/moedict-data-csld-a1e9119). Their licence (CC BY-NC-ND) forbids derivatives: tests read them from there and nothing of them is stored here."""
    return Path(_shared_data("SCTC_CSLD_UPSTREAM", "moedict-data-csld-a1e9119",
                             "csld data (g0v/moedict-data-csld)"))


@pytest.fixture
def embedded_offline(isolated_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the shipped registry in use, offline. The embedded model file and its converted weights come from
    the session's download cache (joined once per session, converted once per checkout)."""
    registry = tmp_path / "shipped-registry" / "models.yaml"
    registry.parent.mkdir()
    registry.write_text((REPO / "data" / "models.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return registry


@pytest.fixture(params=["sqlite", "postgresql"])
def cache_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a response-cache contract test opens its cache: a SQLite file, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "cache.sqlite")
    return request.getfixturevalue("postgres_url")
