"""Everything `sctc run` and `sctc plan` check before any stage runs, reported as one line per problem.

Option ranges, the response cache's database (`$SCTC_DATABASE_URL`: reachable, password, schema rights; for a
run, what the Dagster instance's storage there needs), the table store (`$SCTC_TABLE_STORE`: an fsspec URL's
filesystem package is installed), the registry entries of the chosen models and judges (the backend exists, every
setting is one it has and has a valid value, the API key variable is set, the per-benchmark settings are known and
in range) and the corpus keys. A problem found here would otherwise surface minutes later, in the middle of a run,
as a failed stage; found here, nothing has run yet.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Sequence

import pydantic

from sctc_assets.benchmarks import SPECS
from sctc_assets.benchmarks.spec import OptionRange
from sctc_assets.lib.cache import DATABASE_URL_ENV, CacheUnavailable, database_url, open_cache
from sctc_assets.lib.batch_settings import batch_setting_problems
from sctc_assets.lib.cache_postgres import is_database_url, redacted
from sctc_assets.lib.corpus.corpus_registry import CorpusRegistryError, load_corpora
from sctc_assets.lib.dagster_home import uses_database
from sctc_assets.lib.model_registry import ModelEntry, RegistryError
from sctc_assets.lib.paths import default_corpora_path, default_registry_path
from sctc_assets.lib.table_store import TABLE_STORE_ENV, store_problem
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.running.concurrent import ConcurrencyError, stages_per_endpoint
from sctc_assets.running.processes import worker_processes

# The keys each benchmark reads from a registry entry's `benchmarks:` block, from the specs (`last_names`: the name
# benchmark's log-probability experiment). Anything else is a typo the run would silently ignore.
BENCHMARK_SETTINGS: dict[str, frozenset[str]] = {
    **{spec.name: spec.settings_keys for spec in SPECS.values() if spec.settings_keys},
    **{block: keys for spec in SPECS.values() for block, keys in spec.extra_settings.items()},
}
# The run's own numeric options; each benchmark's are in its spec's `option_ranges`.
RUN_OPTION_RANGES = (OptionRange("max_calls", 0), OptionRange("max_cost", 0))


def _concurrency_problems() -> list[str]:
    """The environment settings that spread a run over threads and processes, one line each."""
    problems = []
    for setting in (stages_per_endpoint, worker_processes):
        try:
            setting()
        except ConcurrencyError as exc:
            problems.append(str(exc))
    return problems


def database_problems() -> list[str]:
    """`$SCTC_DATABASE_URL`, when set: the response cache's database answers, takes the password and lets its user
    create the cache's schema; one line naming the setting and host:port/db, never the password."""
    url = database_url()
    if url is None:
        return []
    if not is_database_url(url):
        return [f"${DATABASE_URL_ENV}: expected a postgresql:// URL (postgresql://user:password@host:port/db), "
                f"found {redacted(url)!r}"]
    try:
        open_cache(url).close()
    except CacheUnavailable as exc:
        return [str(exc)]
    except ImportError:
        return [f"${DATABASE_URL_ENV} is set but psycopg is not installed: pip install 'sctc-assets[postgres]'"]
    return []


def instance_problems() -> list[str]:
    """Where sctc's Dagster instance keeps its runs in `$SCTC_DATABASE_URL`'s database (lib/dagster_home.py): what
    that storage needs beyond what `database_problems` checks (the server, the password): dagster-postgres."""
    home = os.environ.get("DAGSTER_HOME")
    if not home or database_url() is None or not uses_database(home):
        return []
    try:
        import dagster_postgres  # noqa: F401
    except ImportError:
        return [f"${DATABASE_URL_ENV} is set but dagster-postgres (the Dagster instance's storage there) is not "
                "installed: pip install 'sctc-assets[postgres]'"]
    return []


def storage_problems() -> list[str]:
    """The response cache's database, then the instance's storage there, for the commands that open both."""
    return database_problems() or instance_problems()


def table_store_problems() -> list[str]:
    """`$SCTC_TABLE_STORE`, when a URL: its fsspec filesystem loads (`s3://` needs s3fs, `gs://` gcsfs, `az://`
    adlfs); one line naming the setting and the package, before anything is read or written there."""
    configured = os.environ.get(TABLE_STORE_ENV, "").strip()
    problem = store_problem(configured, f"${TABLE_STORE_ENV}") if configured else None
    return [problem] if problem else []


def option_problems(options: Mapping[str, Any]) -> list[str]:
    """The `sctc run` options that are out of range or otherwise wrong, one line each (argparse has checked their
    types): every benchmark's (its spec's checks), then the run's. An option several benchmarks share (`--trials`:
    the term benchmark's and every item set's) is named once."""
    problems = list(dict.fromkeys(problem for spec in SPECS.values() for problem in spec.option_problems(options)))
    problems += [problem for problem in (entry.problem(options) for entry in RUN_OPTION_RANGES) if problem]
    # A dry run (`sctc plan`) opens the response cache but not the Dagster instance.
    storage = database_problems() if options.get("dry_run") else storage_problems()
    return problems + _concurrency_problems() + storage + table_store_problems()


def corpus_problems(options: Mapping[str, Any]) -> list[str]:
    chosen = options.get("corpora") or []
    if not chosen:
        return []
    path = default_corpora_path()
    try:
        entries = load_corpora(path)
    except CorpusRegistryError as exc:
        return [str(exc)]
    unknown = [key for key in chosen if key not in entries]
    return [f"{path}: no corpus {', '.join(map(repr, unknown))} (known: {', '.join(sorted(entries))})"] if unknown else []


def _where(entry: ModelEntry) -> str:
    return f"{entry.source}: model {entry.key!r}"


def _benchmark_settings_problems(entry: ModelEntry, benchmarks: Sequence[str], options: Mapping[str, Any]) -> list[str]:
    """Unknown `benchmarks:` names and keys of the entry, and the run settings of each chosen benchmark."""
    where, problems = _where(entry), []
    for name, settings in entry.benchmarks.items():
        if name not in BENCHMARK_SETTINGS:
            problems.append(f"{where}: benchmarks.{name} is no benchmark with settings "
                            f"({', '.join(BENCHMARK_SETTINGS)})")
            continue
        unknown = sorted(set(settings) - BENCHMARK_SETTINGS[name])
        if unknown:
            problems.append(f"{where}: benchmarks.{name}: unknown setting(s) {', '.join(map(repr, unknown))} "
                            f"(settings: {', '.join(sorted(BENCHMARK_SETTINGS[name]))})")
    # The settings a run of this model would use: the options, else the entry's, else the paper's, resolved as
    # the benchmark's response asset resolves them.
    for name in benchmarks:
        if SPECS[name].run_settings is not None:
            try:
                SPECS[name].settings_for(options, entry)
            except (TypeError, ValueError) as exc:
                problems.append(f"{where}: benchmarks.{name} (or its options): {exc}")
    return problems


def _built_backend(entry: ModelEntry) -> tuple[Any, list[str]]:
    """The entry's backend resource, or the problems that stop it from building: the class exists, every setting
    is one it has, and every value is valid."""
    try:
        cls = ModelRegistryResource().checked_backend_class(entry)
    except RegistryError as exc:
        return None, [str(exc)]
    try:
        return cls(**dict(entry.settings)), []
    except pydantic.ValidationError as exc:
        details = "; ".join(f"{'.'.join(map(str, error['loc']))}: {error['msg']}" for error in exc.errors())
        return None, [f"{_where(entry)} ({entry.backend}): {details}"]


def backend_problems(entry: ModelEntry) -> list[str]:
    """The entry's batch settings (one line per wrong key, `lib/batch_settings.py`), then what stops its backend
    from building with the others (a wrong batch key is left out there, so it is named once)."""
    batch = batch_setting_problems(entry)
    if batch:
        entry = dataclasses.replace(entry, settings={name: value for name, value in entry.settings.items()
                                                     if name not in batch})
    return [*batch.values(), *_built_backend(entry)[1]]


def key_problem(entry: ModelEntry) -> str | None:
    """For a backend with an `api_key_env` setting (the `openai` one, and yours if it follows it): the variable is
    set. Only its name is shown, never its value."""
    backend, problems = _built_backend(entry)
    variable = getattr(backend, "api_key_env", None) if not problems else None
    if isinstance(variable, str) and variable and not os.environ.get(variable, "").strip():
        endpoint = getattr(backend, "base_url", "the endpoint")
        return (f"{_where(entry)}: environment variable {variable} is not set (the API key for {endpoint}; for a "
                f"server without authentication set `api_key_env: \"\"`)")
    return None


def model_problems(entries: Mapping[str, ModelEntry], models: Sequence[str], benchmarks: Sequence[str],
                   options: Mapping[str, Any], *, check_keys: bool = True) -> list[str]:
    """Every problem of the chosen models and judges, one line each; unknown keys name the registry."""
    problems = []
    unknown = [model for model in models if model not in entries]
    if unknown:
        problems.append(f"not in the registry {default_registry_path()}: {', '.join(unknown)} (see `sctc models`)")
    examples = [model for model in dict.fromkeys(models) if model in entries and not entries[model].enabled]
    if examples:
        problems.append(f"registry examples, not enabled: {', '.join(examples)} (set `enabled: true` in their entry "
                        "to run them)")
    for model in dict.fromkeys(models):
        if model in entries and entries[model].enabled:
            problems += backend_problems(entries[model])
            problems += _benchmark_settings_problems(entries[model], benchmarks, options)
    for benchmark in benchmarks:
        spec = SPECS[benchmark]
        if spec.judge is None:
            continue
        for judge in spec.chosen_judges(options):
            if judge not in entries:
                given = spec.judge.flag if options.get(spec.judge.option) else f"${spec.judge.env_var}"
                problems.append(f"{given}: {judge!r} is not in the registry (see `sctc models`)")
            elif judge not in models:
                problems += backend_problems(entries[judge])
    if check_keys:
        problems += key_problems(entries, models, benchmarks, options)
    return list(dict.fromkeys(problems))


def key_problems(entries: Mapping[str, ModelEntry], models: Sequence[str], benchmarks: Sequence[str],
                 options: Mapping[str, Any]) -> list[str]:
    """The missing API keys of the chosen models and judges: they block a run, not a plan (`sctc plan` prices a
    model before its key is set)."""
    judges = [judge for benchmark in benchmarks for judge in SPECS[benchmark].chosen_judges(options)]
    keys = [key for key in dict.fromkeys([*models, *judges]) if key and key in entries]
    return [problem for problem in (key_problem(entries[key]) for key in keys) if problem]
