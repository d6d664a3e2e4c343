"""Everything `sctc run` and `sctc plan` check before any stage runs, reported as one line per problem.

Option ranges, the registry entries of the chosen models and judges (the backend exists, every setting is one it
has and has a valid value, the API key variable is set, the per-benchmark settings are known and in range) and
the corpus keys. A problem found here would otherwise surface minutes later, in the middle of a run, as a failed
stage; found here, nothing has run yet.
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping, Sequence

from sctc_assets.benchmarks import SPECS
from sctc_assets.lib.model_registry import ModelEntry
from sctc_assets.lib.term.prompts import PAPER_TRIALS

# The keys each benchmark reads from a registry entry's `benchmarks:` block, from the specs (`last_names`: the name
# benchmark's log-probability experiment). Anything else is a typo the run would silently ignore.
BENCHMARK_SETTINGS: dict[str, frozenset[str]] = {
    **{spec.name: spec.settings_keys for spec in SPECS.values() if spec.settings_keys},
    **{block: keys for spec in SPECS.values() for block, keys in spec.extra_settings.items()},
}
MAX_TEMPERATURE = 2.0


def _range_problem(flag: str, value: Any, low: float, high: float | None = None, *, low_open: bool = False) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{flag}: must be a finite number, got {value}"
    too_low = value <= low if low_open else value < low
    if too_low or (high is not None and value > high):
        interval = f"{'(' if low_open else '['}{low:g}, {'∞)' if high is None else f'{high:g}]'}"
        return f"{flag}: must be in {interval}, got {value:g}"
    return None


def _concurrency_problems() -> list[str]:
    """The environment settings that spread a run over threads and processes, one line each."""
    from sctc_assets.running.concurrent import ConcurrencyError, stages_per_endpoint
    from sctc_assets.running.processes import worker_processes

    problems = []
    for setting in (stages_per_endpoint, worker_processes):
        try:
            setting()
        except ConcurrencyError as exc:
            problems.append(str(exc))
    return problems


def option_problems(options: Mapping[str, Any]) -> list[str]:
    """The `sctc run` options that are out of range, one line each (argparse has checked their types)."""
    from sctc_assets.lib.reviews.source import FIELDS
    from sctc_assets.lib.reviews.varieties import VARIETIES

    checks = [
        _range_problem("--trials", options.get("trials"), 1, PAPER_TRIALS),
        _range_problem("--name-lists", options.get("name_lists"), 1),
        _range_problem("--name-shuffles", options.get("name_shuffles"), 1),
        _range_problem("--sovereignty-samples", options.get("sovereignty_samples"), 1),
        _range_problem("--sovereignty-temperature", options.get("sovereignty_temperature"), 0, MAX_TEMPERATURE),
        _range_problem("--max-pairs", options.get("max_pairs"), 1),
        _range_problem("--corpus-majority", options.get("corpus_majority"), 0, 1, low_open=True),
        _range_problem("--max-calls", options.get("max_calls"), 0),
        _range_problem("--max-cost", options.get("max_cost"), 0),
    ]
    problems = [problem for problem in checks if problem]
    problems += _concurrency_problems()
    for field, _ in options.get("reviews_columns") or []:
        if field not in FIELDS:
            problems.append(f"--reviews-columns: unknown field {field!r} (fields: {', '.join(FIELDS)})")
    for region, variety in options.get("reviews_varieties") or []:
        if variety.lower() not in VARIETIES:
            problems.append(f"--reviews-varieties: {region}={variety}: the variety must be one of {', '.join(VARIETIES)}")
    return problems


def corpus_problems(options: Mapping[str, Any]) -> list[str]:
    chosen = options.get("corpora") or []
    if not chosen:
        return []
    from sctc_assets.lib.corpus.corpus_registry import CorpusRegistryError, load_corpora
    from sctc_assets.lib.paths import default_corpora_path

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
    import pydantic

    from sctc_assets.lib.model_registry import RegistryError
    from sctc_assets.resources.model_registry import ModelRegistryResource

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
    return _built_backend(entry)[1]


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
    from sctc_assets.lib.paths import default_registry_path

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
        judge = spec.chosen_judge(options)
        if not judge or spec.judge is None:
            continue
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
    judges = [SPECS[benchmark].chosen_judge(options) for benchmark in benchmarks]
    keys = [key for key in dict.fromkeys([*models, *judges]) if key and key in entries]
    return [problem for problem in (key_problem(entries[key]) for key in keys) if problem]
