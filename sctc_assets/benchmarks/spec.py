"""What a benchmark is, stated once: `BenchmarkSpec`.

A spec holds everything the platform's shared machinery needs to know about one benchmark: its paper, its partition
design, its assets with each one's stage (the catalog entries), its `sctc run` options and how they become asset
config, how those config values and a registry entry resolve to the run settings (one function serving the asset,
the estimate and the validator), its judge, what the estimate prints, and its end-of-run summary. The CLI, the
validator, the estimate, the catalog, the named jobs and the runner loop over the specs in
`sctc_assets.benchmarks.SPECS`; adding a benchmark means its spec, its `lib/<benchmark>/`, its assets folder and its
table schemas (named in its spec).

No Dagster here (nor torch or transformers), so `sctc --help`, `sctc models` and `sctc plan` load specs cheaply.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

import pandas as pd

from sctc_assets.lib.cost_estimate import ExpectedAnswer

# The stages of a `sctc run`, each one partitioning: model-independent inputs, model × lang partitions, per-model
# tables, and the tables across models. The runner's stage lists and the named jobs are derived from these.
INPUTS, MODEL_LANG, PER_MODEL, CROSS_MODEL = "inputs", "model_lang", "per_model", "cross_model"
STAGES = (INPUTS, MODEL_LANG, PER_MODEL, CROSS_MODEL)

# What an asset spends: GENERATION asks the model under test; JUDGE asks a judge model about stored answers.
GENERATION, JUDGE = "generation", "judge"


@dataclass(frozen=True)
class AssetEntry:
    """One asset's catalog entry. `code_version`: bump it whenever a change to the asset's body or to the library
    code it calls can change what it writes. `sharded`: an input partitioned by corpus shard, materialized by the
    spec's `partitioned_inputs` rather than with the other inputs. `table`: a DataFrame with a column schema in
    its spec's `schemas` (False: a file, a report). `benchmark` is filled in by the spec that lists it."""

    stage: str
    headline: str
    code_version: str = "1"
    calls: str | None = None  # GENERATION, JUDGE or None
    table: bool = True
    sharded: bool = False
    benchmark: str = ""
    # The `sctc run` option (argparse destination) without which this stage's table is empty by design (no judge,
    # no pair named, no variants file): `sctc run` leaves the stage out unless the option (or, for the spec's judge
    # option, its environment variable) is set (`BenchmarkSpec.for_run`). The UI's jobs keep it: an empty table.
    opt_in: str | None = None

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"stage {self.stage!r} is none of {', '.join(STAGES)}")

    @property
    def calls_models(self) -> bool:
        return self.calls is not None


@dataclass(frozen=True)
class JudgeSetting:
    """A benchmark's judge model: the `sctc run` option that names it and the environment variable its asset reads
    when the option is not given."""

    option: str  # the option's argparse destination, e.g. "name_judge"
    env_var: str
    # The argparse destination of further judges named after the first (a list), where the benchmark takes several.
    more: str | None = None

    @property
    def flag(self) -> str:
        return f"--{self.option.replace('_', '-')}"


@dataclass(frozen=True)
class ReportPart:
    """A benchmark's part of the audit report: the module (by name, imported only when a report is built) with its
    `section(inputs)`, `HEADLINE_COLUMNS` and `headline(inputs, model)`; the prefix of its tables (tables of that
    prefix with 95 % intervals are found by their schema); and its group label in the scorecard. A `factory` of the
    module, called with `arguments`, makes the part where one module serves several benchmarks."""

    module: str
    table_prefix: str
    scorecard_label: str
    # A module serving several benchmarks (one per item set) makes each one's part: `module.<factory>(*arguments)`.
    factory: str | None = None
    arguments: tuple[Any, ...] = ()


@dataclass(frozen=True)
class ReportSection:
    """A benchmark's report part with its module imported: what `lib.report` iterates over."""

    benchmark: str
    module: Any
    table_prefix: str
    scorecard_label: str


def _as_typed(value: float) -> str:
    """A number as a person typed it: 1000000000 (not 1e+09), 3 for 3.0, 0.25."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


@dataclass(frozen=True)
class OptionRange:
    """The interval a numeric `sctc run` option must lie in, checked before anything runs (argparse has checked
    its type). `option` is its argparse destination; `high` None means no upper bound."""

    option: str
    low: float
    high: float | None = None
    low_open: bool = False

    @property
    def flag(self) -> str:
        return f"--{self.option.replace('_', '-')}"

    def problem(self, options: Mapping[str, Any]) -> str | None:
        value = options.get(self.option)
        if value is None:
            return None
        if isinstance(value, float) and not math.isfinite(value):
            return f"{self.flag}: must be a finite number, got {value}"
        too_low = value <= self.low if self.low_open else value < self.low
        if too_low or (self.high is not None and value > self.high):
            interval = f"{'(' if self.low_open else '['}{self.low:g}, {'∞)' if self.high is None else f'{self.high:g}]'}"
            return f"{self.flag}: must be in {interval}, got {_as_typed(value)}"
        return None


def _no_arguments(parser: Any) -> None:
    return None


def _no_config(options: Mapping[str, Any]) -> dict:
    return {}


def _serves_all(entry: Any) -> bool:
    return True


def _no_option_problems(options: Mapping[str, Any]) -> list[str]:
    return []


def _nothing_to_prepare(options: Mapping[str, Any]) -> list[str]:
    return []


def _no_summary(tables: Mapping[str, pd.DataFrame], models: list[str]) -> str:
    return ""


def _no_partitioned_inputs(options: Mapping[str, Any]) -> list[tuple[tuple[str, ...], list[str]]]:
    return []


def _no_downloads(options: Mapping[str, Any]) -> list[Any]:
    return []


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark, stated once.

    `langs` are the keys of the benchmark's second partition dimension (named `dimension`, "lang" by default).
    `assets` maps each asset the benchmark owns to its catalog entry; its stage lists (`inputs`, `per_model_lang`,
    `per_model`, `cross_model`) are derived from them, in their order, with `reads` (other benchmarks' input assets
    its inputs stage materializes too) first. `add_arguments` adds the benchmark's `sctc run` options,
    `option_ranges` the intervals of its numeric ones and `check_options(options)` its other checks (one line per
    problem), both run before anything else;
    `config(options)` turns the parsed options into `{asset name: op config}`; `run_settings(values, entry)` turns
    the response asset's config values and a registry entry into the settings a model runs with (raising
    ValueError/TypeError naming what is wrong), for the asset, the estimate and the validator alike;
    `settings_keys` are the keys of a registry entry's `benchmarks: {<name>: …}` block it reads (and
    `extra_settings` other blocks, e.g. the name benchmark's `last_names`). `serves(entry)` says whether a registry
    entry can answer the benchmark at all; `prepare(options)` runs before the registry is read and returns model keys
    to run besides the default ones (on a dry run, `options["dry_run"]`, it writes nothing: a mapping of those keys
    to the registry entries it would have written instead); `default_models`: whether `sctc run` without `--models` runs the registry's
    defaults (when false it materializes only the model-independent inputs). `design(models, options)` lists each
    model's `lib.cost_estimate.PartitionDesign`s for the estimate: its prompt rows and requests per partition, read from
    the upstream data without Dagster (None: the benchmark calls no model); `estimate_lines` add lines under its
    table there; `expected_answer` is how long its answers are expected to be (`lib.cost_estimate.ExpectedAnswer`, e.g.
    one word), the plan's expected output before any answer is cached (None: the max-tokens ceiling).
    `partitioned_inputs(options)` lists model-independent but partitioned work, as `(asset names, partition keys)`
    pairs (corpus shards). `downloads(options)` lists the `lib.fetching.Download`s
    a run with these options makes besides the models' (upstream URLs, tokenizer distributions): `sctc fetch`
    fetches them ahead of the run. `jobs`: a stage's named Dagster job where it is not
    `<name>_inputs`, `<name>_model_lang`, `<name>_per_model` or `<name>_cross_model`. `skip_unchanged`: whether
    `sctc run` leaves unchanged model partitions as they are (only for benchmarks whose model stages read nothing
    outside Dagster's lineage and the settings digest). `response_asset`: the asset whose config `run_settings` reads
    (and whose answers the report's provenance counts); `report_tables`: the tables its part of the audit report reads;
    `report_part`: that part. `schemas`: the `TableSchemaSpec` of each of its tables (declared in
    `sctc_assets/lib/schemas/`, or by the package of a benchmark from elsewhere), the one list the catalog, the
    table reference and the tests read.
    A benchmark outside this package (`sctc_assets.benchmarks.plugins`) also names `assets_module`, the module of its
    Dagster assets and checks.
    """

    name: str
    paper: str
    langs: tuple[str, ...]
    assets: Mapping[str, AssetEntry] = field(default_factory=dict)
    dimension: str = "lang"
    reads: tuple[str, ...] = ()
    add_arguments: Callable[[Any], None] = _no_arguments
    option_ranges: tuple[OptionRange, ...] = ()
    check_options: Callable[[Mapping[str, Any]], list[str]] = _no_option_problems
    config: Callable[[Mapping[str, Any]], dict] = _no_config
    response_asset: str | None = None
    run_settings: Callable[[Mapping[str, Any], Any], Any] | None = None
    settings_keys: frozenset[str] = frozenset()
    extra_settings: Mapping[str, frozenset[str]] = field(default_factory=dict)
    judge: JudgeSetting | None = None
    serves: Callable[[Any], bool] = _serves_all
    prepare: Callable[[Mapping[str, Any]], list[str] | Mapping[str, Any]] = _nothing_to_prepare
    default_models: bool = True
    design: Callable[[Any, Mapping[str, Any]], list] | None = None
    estimate_lines: tuple[Callable[[Any], list[str]], ...] = ()
    expected_answer: ExpectedAnswer | None = None
    summary: Callable[[Mapping[str, pd.DataFrame], list[str]], str] = _no_summary
    partitioned_inputs: Callable[[Mapping[str, Any]], list[tuple[tuple[str, ...], list[str]]]] = \
        _no_partitioned_inputs
    downloads: Callable[[Mapping[str, Any]], list[Any]] = _no_downloads
    jobs: Mapping[str, str] = field(default_factory=dict)
    skip_unchanged: bool = False
    report_tables: tuple[str, ...] = ()
    report_part: ReportPart | None = None
    schemas: tuple[Any, ...] = ()
    assets_module: str | None = None

    def __post_init__(self) -> None:
        # The spec names its entries' benchmark, so an entry is written without it.
        object.__setattr__(self, "assets", {name: entry if entry.benchmark else _owned(entry, self.name)
                                            for name, entry in self.assets.items()})

    @classmethod
    def of_stages(cls, name: str, langs: tuple[str, ...], *, inputs: tuple[str, ...] = (),
                  per_model_lang: tuple[str, ...] = (), per_model: tuple[str, ...] = (),
                  cross_model: tuple[str, ...] = (), paper: str = "", **fields: Any) -> "BenchmarkSpec":
        """A spec from stage lists, with a plain entry per asset (small benchmarks built in tests and benches)."""
        assets = {asset: AssetEntry(stage, f"{asset}.")
                  for stage, names in ((INPUTS, inputs), (MODEL_LANG, per_model_lang), (PER_MODEL, per_model),
                                       (CROSS_MODEL, cross_model)) for asset in names}
        return cls(name=name, paper=paper or name, langs=langs, assets=assets, **fields)

    def with_stages(self, **stages: tuple[str, ...]) -> "BenchmarkSpec":
        """The spec with some stage lists (`inputs`, `per_model_lang`, `per_model`, `cross_model`) replaced, each
        asset keeping its entry: tests and benches that run part of a benchmark."""
        lists = {"inputs": self.inputs, "per_model_lang": self.per_model_lang, "per_model": self.per_model,
                 "cross_model": self.cross_model}
        unknown = sorted(set(stages) - set(lists))
        if unknown:
            raise TypeError(f"no stage list {', '.join(unknown)} (stage lists: {', '.join(lists)})")
        lists.update(stages)
        assets = {name: replace(self.assets[name], stage=stage) if name in self.assets
                  else AssetEntry(stage, f"{name}.", benchmark=self.name)
                  for field, stage in (("inputs", INPUTS), ("per_model_lang", MODEL_LANG), ("per_model", PER_MODEL),
                                       ("cross_model", CROSS_MODEL)) for name in lists[field]}
        sharded = {name: entry for name, entry in self.assets.items() if entry.sharded}
        return replace(self, assets={**assets, **sharded}, reads=())

    def opted_in(self, option: str, options: Mapping[str, Any]) -> bool:
        """Whether `sctc run`'s options turn on the stages that need `option` (`AssetEntry.opt_in`)."""
        if options.get(option):
            return True
        return self.judge is not None and option == self.judge.option and bool(os.environ.get(self.judge.env_var))

    def for_run(self, options: Mapping[str, Any]) -> "BenchmarkSpec":
        """The spec `sctc run` runs with these options: without the stages whose option is not set (their tables
        would be empty), so a run that names no judge, pair or variants file pays nothing for them."""
        left_out = {name for name, entry in self.assets.items()
                    if entry.opt_in is not None and not self.opted_in(entry.opt_in, options)}
        if not left_out:
            return self
        return replace(self, assets={name: entry for name, entry in self.assets.items() if name not in left_out})

    def stage_assets(self, stage: str) -> tuple[str, ...]:
        return tuple(name for name, entry in self.assets.items() if entry.stage == stage and not entry.sharded)

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.reads + self.stage_assets(INPUTS)

    @property
    def per_model_lang(self) -> tuple[str, ...]:
        return self.stage_assets(MODEL_LANG)

    @property
    def per_model(self) -> tuple[str, ...]:
        return self.stage_assets(PER_MODEL)

    @property
    def cross_model(self) -> tuple[str, ...]:
        return self.stage_assets(CROSS_MODEL)

    @property
    def tables(self) -> tuple[str, ...]:
        return self.inputs + self.per_model_lang + self.per_model + self.cross_model

    def run_tags(self, stage: str, *, model: str | None = None, key: str | None = None) -> dict[str, str]:
        """The `sctc/*` tags of a run of `stage` (the stages `job_name` takes), for one model and one key of the
        second dimension where the run has them: what the Runs page filters by."""
        tags = {"sctc/benchmark": self.name, "sctc/stage": stage}
        if model is not None:
            tags["sctc/model"] = model
        if key is not None:
            tags[f"sctc/{self.dimension}"] = key
        return tags

    def run_stage(self, asset: str) -> str:
        """The stage (as `job_name` and `run_tags` take it) that materializes `asset`."""
        entry = self.assets[asset]
        if entry.sharded:
            return "partitioned_inputs"
        return "per_model_lang" if entry.stage == MODEL_LANG else entry.stage

    def job_name(self, stage: str) -> str:
        """`stage` is inputs, partitioned_inputs, per_model_lang, per_model or cross_model."""
        return self.jobs.get(stage, f"{self.name}_{'model_lang' if stage == 'per_model_lang' else stage}")

    def job_selections(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Each stage's named Dagster job and the assets it selects: the cross-model job with the unpartitioned
        inputs it reads (a Dagster job holds one partitioning), the sharded inputs in a job of their own; stages
        without assets have no job."""
        sharded = tuple(name for name, entry in self.assets.items() if entry.sharded)
        selections = {INPUTS: self.inputs, "partitioned_inputs": sharded, "per_model_lang": self.per_model_lang,
                      PER_MODEL: self.per_model,
                      CROSS_MODEL: self.inputs + self.cross_model if self.cross_model else ()}
        return {stage: (self.job_name(stage), selection) for stage, selection in selections.items() if selection}

    def chosen_judge(self, options: Mapping[str, Any]) -> str | None:
        """The judge a run would ask: the option, else the environment variable the asset reads."""
        if self.judge is None:
            return None
        return options.get(self.judge.option) or os.environ.get(self.judge.env_var) or None

    def chosen_judges(self, options: Mapping[str, Any]) -> list[str]:
        """Every judge a run would ask: the first (`chosen_judge`) and, where the benchmark takes several, the
        others named after it."""
        first = self.chosen_judge(options)
        if first is None:
            return []
        more = list(options.get(self.judge.more) or []) if self.judge is not None and self.judge.more else []
        return list(dict.fromkeys([first, *more]))

    def option_problems(self, options: Mapping[str, Any]) -> list[str]:
        """The benchmark's options that are out of range or otherwise wrong, one line each."""
        ranges = [problem for problem in (entry.problem(options) for entry in self.option_ranges) if problem]
        return ranges + self.check_options(options)

    def settings_for(self, options: Mapping[str, Any], entry: Any) -> Any:
        """The run settings of `entry` under the parsed `sctc run` options (what its response asset will resolve)."""
        if self.run_settings is None or self.response_asset is None:
            return None
        return self.run_settings(self.config(options).get(self.response_asset, {}), entry)


def _owned(entry: AssetEntry, benchmark: str) -> AssetEntry:
    return replace(entry, benchmark=benchmark)


def present(values: Mapping[str, Any]) -> dict:
    """The values that were given (options left out are None)."""
    return {key: value for key, value in values.items() if value is not None}
