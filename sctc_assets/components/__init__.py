"""Dagster components: `sctc_assets.components.Audit` puts an audit in any Dagster 1.13 project from a `defs.yaml`
(docs/audits-in-your-dagster-project.md). The class lives in this module itself, so `dg` lists it under the name a
`defs.yaml` uses.

`type: sctc_assets.components.Audit`: an audit of registry models on chosen benchmarks in a team's own Dagster
project, from a `defs.yaml`.

It reuses the package's own asset and check definitions with their keys prefixed by `key_prefix`
(`dg.load_assets_from_modules(..., key_prefix=...)` rewrites the keys and the dependencies inside the set), so the
audit has the same partitions, checks, automation conditions, pools and code versions as the package's own
location. Its resources (the registry, the SC-TC-Bench upstream, the table store and the response cache) are
configured from the YAML and bound at the code location's level under the package's resource keys: one set of
resources per code location (see docs/audits-in-your-dagster-project.md for why, and what it means for two audits
in one location). Secrets never appear in the YAML: a registry entry names the environment variable of its API key,
and a PostgreSQL cache URL with a password stays in `$SCTC_DATABASE_URL` (a `cache` with one is refused).

The run options (`options`, and the shorthands `trials`, `prompt_variants`, `judge`) are parsed by `sctc run`'s own
parser and checked as `sctc run` checks them (`components/options.py`); they become the config defaults of the
audit's own asset definitions, since runs that automation launches carry no run config.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any, ClassVar, Optional

import dagster as dg
from pydantic import Field, field_validator, model_validator

from sctc_assets.components import options as run_options
from sctc_assets.components.scaffold import AuditScaffolder

DEFS_MODULE = "sctc_assets.assets"
# The last load of a code location (its component tree) and, by key_prefix, the location settings of its audits
# (`Audit._claim_location`); a reload is a new tree, so settings edited since do not clash with their old values.
_LOADED: dict = {"tree": None, "audits": {}, "resources": None}
# Modules of the package's defs folder whose definitions the audit does not take: the package's own resources and
# sensors (the audit brings its own), its un-prefixed named jobs, and the catalog/automation helpers.
_NOT_ASSETS = {f"{DEFS_MODULE}.shared", f"{DEFS_MODULE}.jobs"}


def _asset_modules() -> list:
    package = importlib.import_module(DEFS_MODULE)
    names = [module.name for module in pkgutil.walk_packages(package.__path__, prefix=f"{DEFS_MODULE}.")]
    return [importlib.import_module(name) for name in names if name not in _NOT_ASSETS]


def _plugin_modules() -> list:
    from sctc_assets.benchmarks import SPECS

    return [importlib.import_module(spec.assets_module) for spec in SPECS.values() if spec.assets_module]


@dg.scaffold_with(AuditScaffolder)
class Audit(dg.Component, dg.Resolvable, dg.Model):
    """An audit: `models` (registry keys) on `benchmarks`, its assets under `key_prefix`."""

    key_prefix: str = Field(description="Prefix of every asset key of this audit (e.g. `team_audit`), so that "
                                        "audits and the package's own location live side by side.")
    benchmarks: list[str] = Field(description="Benchmarks to run, as `sctc run --benchmarks` takes them: term, name, "
                                              "sovereignty, reviews, corpus, or `terms_<set>` of a registered item set.")
    models: list[str] = Field(description="Registry keys of the models under test (the `models` partitions this "
                                          "audit adds).")
    registry: Optional[str] = Field(default=None, description="The model registry YAML (a path, relative to the "
                                    "project root or absolute); default $SCTC_MODELS, else data/models.yaml.")
    upstream: Optional[str] = Field(default=None, description="The SC-TC-Bench data as `--upstream` takes it: a "
                                    "directory, an archive or a URL; default $SCTC_UPSTREAM, else the pinned archive.")
    item_sets: list[str] = Field(default_factory=list, description="Registered item sets (names in "
                                 "$SCTC_ITEM_SETS) whose term benchmark `terms_<set>` runs too.")
    storage: Optional[str] = Field(default=None, description="Where the tables go: a folder or an fsspec URL; "
                                   "default $SCTC_TABLE_STORE, else <data folder>/storage. The audit's tables are "
                                   "under <storage>/<key_prefix>/.")
    cache: Optional[str] = Field(default=None, description="The response cache: a SQLite file, or a postgresql:// "
                                 "URL without a password; default $SCTC_DATABASE_URL (where a URL with a password "
                                 "goes), else data/cache/responses.sqlite.")
    trials: Optional[int] = Field(default=None, ge=1, le=15, description="Trials per term prompt (`--trials`); "
                                  "default: registry, else 15.")
    prompt_variants: Optional[list[int]] = Field(default=None, description="The term prompt's variants "
                                                 "(`--prompt-variants`), from 1 2 3; default: registry, else all.")
    judge: Optional[str] = Field(default=None, description="Registry key of the term benchmark's judge (`--judge`).")
    options: dict[str, Any] = Field(default_factory=dict, description="Any other `sctc run` option that configures "
                                    "the assets, by its name (with or without `--`): e.g. `sovereignty-samples: 3`, "
                                    "`name-seed: 7`, `reviews-pair: [tw, cn]`, a flag as `true`. "
                                    "Parsed by `sctc run`'s own parser and checked as `sctc run` checks them.")
    max_calls: Optional[int] = Field(default=None, ge=0, description="Stop after this many new model calls per "
                                     "Dagster run (`--max-calls`).")
    max_cost_usd: Optional[float] = Field(default=None, ge=0, description="Stop once new calls in a run cost this "
                                          "much (`--max-cost`).")

    @field_validator("key_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not value or not value.replace("_", "a").isalnum() or value[0].isdigit():
            raise ValueError(f"key_prefix must be a Python-style name (letters, digits, _), got {value!r}")
        return value

    @field_validator("cache")
    @classmethod
    def _no_password(cls, value: Optional[str]) -> Optional[str]:
        if value and "://" in value and "@" in value.split("://", 1)[1].split("/", 1)[0] \
                and ":" in value.split("://", 1)[1].split("@", 1)[0]:
            raise ValueError("a URL with a password does not go in the YAML (Dagster shows resource settings in its "
                             "UI): leave cache out and set $SCTC_DATABASE_URL in the code location's environment")
        return value

    @field_validator("benchmarks")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        from sctc_assets.benchmarks import SPECS

        unknown = [name for name in value if name not in SPECS]
        if unknown or not value:
            raise ValueError(f"unknown benchmark(s) {', '.join(unknown) or '(none given)'}; known: "
                             f"{', '.join(SPECS)}")
        return value

    @field_validator("prompt_variants")
    @classmethod
    def _variants(cls, value: Optional[list[int]]) -> Optional[list[int]]:
        if value is not None and (not value or set(value) - {1, 2, 3}):
            raise ValueError(f"prompt_variants are from 1, 2, 3, got {value}")
        return value

    @field_validator("options")
    @classmethod
    def _options(cls, value: dict[str, Any]) -> dict[str, Any]:
        run_options.parse(value)  # an unknown or refused option, or a bad value: `options.<name>: …`
        return value

    @model_validator(mode="after")
    def _options_configure_the_audit(self) -> "Audit":
        """Every option configures a benchmark of this audit, once, and passes the checks `sctc run` makes."""
        from sctc_assets.benchmarks import SPECS

        given = {name: f"options.{name}" for name in self.options}
        for name in self.SHORTHANDS:
            if getattr(self, name) is not None:
                twice = [key for key in self.options if key.removeprefix("--") == name.replace("_", "-")]
                if twice:
                    raise ValueError(f"options.{twice[0]}: given twice (also as the attribute {name})")
        parsed = self.options_namespace()
        chosen = [SPECS[name] for name in self.benchmark_names() if name in SPECS]
        reads = set().union(*run_options.read_by(chosen, parsed).values())
        dests = {name: name.removeprefix("--").replace("-", "_") for name in self.options}
        for name, dest in dests.items():
            if dest not in reads:
                others = [spec for spec, read in run_options.read_by(SPECS.values(), parsed).items() if dest in read]
                raise ValueError(f"{given[name]}: configures {', '.join(others) or 'no benchmark'}, which this audit "
                                 f"does not run (benchmarks: {', '.join(self.benchmark_names())})")
        flags = {f"--{dest.replace('_', '-')}": given[name] for name, dest in dests.items()}
        flags.update({f"--{name.replace('_', '-')}": name for name in self.SHORTHANDS})
        problems = list(dict.fromkeys(problem for spec in chosen for problem in spec.option_problems(parsed)))
        if problems:
            named = [next((f"{where}: {problem.removeprefix(flag + ':').strip()}" for flag, where in flags.items()
                           if problem.startswith(flag + ":")), f"options: {problem}") for problem in problems]
            raise ValueError("; ".join(named))
        return self

    @field_validator("models")
    @classmethod
    def _models(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("name at least one registry key")
        return value

    # -- what the audit runs --------------------------------------------------------------------------------------

    # The run options that have an attribute of their own (they are in the docs since the first audit), merged into
    # the same namespace as `options`.
    SHORTHANDS: ClassVar[tuple[str, ...]] = ("trials", "prompt_variants", "judge")

    def benchmark_names(self) -> list[str]:
        return list(dict.fromkeys([*self.benchmarks, *(f"terms_{name}" for name in self.item_sets)]))

    def specs(self) -> list:
        from sctc_assets.benchmarks import SPECS

        names = self.benchmark_names()
        missing = [name for name in names if name not in SPECS]
        if missing:
            raise dg.DagsterInvalidDefinitionError(
                f"Audit {self.key_prefix}: item_sets names sets not registered in $SCTC_ITEM_SETS: "
                f"{', '.join(name.removeprefix('terms_') for name in missing)}")
        return [SPECS[name].for_run(self.options_namespace()) for name in names]

    def options_namespace(self) -> dict:
        """The options as `sctc run` parses them (every argparse destination, defaults included), for the specs'
        `config`: `options` and the shorthand attributes, through `sctc run`'s own parser."""
        shorthands = {name.replace("_", "-"): getattr(self, name) for name in self.SHORTHANDS
                      if getattr(self, name) is not None}
        return run_options.parse({**self.options, **shorthands})

    def prefixed(self, name: str) -> dg.AssetKey:
        return dg.AssetKey([self.key_prefix, name])

    def _resolve(self, path: Optional[str], context: dg.ComponentLoadContext) -> Optional[str]:
        """A relative path is the project root's; URLs stay as they are."""
        if path is None or "://" in path:
            return path
        candidate = Path(path).expanduser()
        root = Path(context.project_root) if context is not None else Path.cwd()
        return str(candidate if candidate.is_absolute() else (root / candidate).resolve())

    def resources(self, context: dg.ComponentLoadContext) -> dict:
        return _location_resources(self.location_settings(context))

    # The attributes that configure the location's shared resources (by `shared_resources`' parameter names): every
    # audit of one location must agree on them. Those of `LOCATION_PATHS` are paths or URLs (`_resolve`).
    LOCATION_SETTINGS: ClassVar[tuple[str, ...]] = ("registry", "upstream", "storage", "cache", "max_calls", "max_cost_usd")
    LOCATION_PATHS: ClassVar[tuple[str, ...]] = ("registry", "upstream", "storage", "cache")

    def location_settings(self, context: dg.ComponentLoadContext) -> dict:
        return {name: (self._resolve(getattr(self, name), context) if name in self.LOCATION_PATHS
                       else getattr(self, name))
                for name in self.LOCATION_SETTINGS}

    def _claim_location(self, context: dg.ComponentLoadContext) -> tuple[dict, bool]:
        """One set of resources per code location (docs/audits-in-your-dagster-project.md): a second audit of the
        same project that configures them otherwise, or takes the same prefix, is an error naming the attribute.
        Also whether this is the location's first audit (it brings the location's one `served_model` source asset
        and its observing sensor)."""
        settings = self.location_settings(context)
        tree = getattr(context, "component_tree", None)
        if tree is None:  # built outside a defs folder (a test, a script): nothing to share resources with
            return _location_resources(settings), True
        if _LOADED["tree"] is not tree:
            _LOADED.update(tree=tree, audits={}, resources=None)
        loaded = _LOADED["audits"]
        for prefix, other in loaded.items():
            if prefix == self.key_prefix:
                raise dg.DagsterInvalidDefinitionError(f"Audit {self.key_prefix}: key_prefix is taken by another "
                                                       "audit of this code location")
            differing = [name for name in self.LOCATION_SETTINGS if settings[name] != other[name]]
            if differing:
                raise dg.DagsterInvalidDefinitionError(
                    f"Audit {self.key_prefix}: {', '.join(differing)} differ from audit {prefix}'s in the same code "
                    "location; the audits of one location share its resources (registry, upstream, storage, cache, "
                    "budget), so give them the same values or put the audit in a code location of its own")
        first = not loaded
        loaded[self.key_prefix] = settings
        # the very objects: Dagster merges the audits' definitions only where they bind the same resource objects
        if _LOADED["resources"] is None:
            _LOADED["resources"] = _location_resources(settings)
        return _LOADED["resources"], first

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        resources, first = self._claim_location(context)
        specs = self.specs()
        wanted = {name for spec in specs for name in spec.tables}
        modules = _asset_modules() + _plugin_modules()
        loaded = _once(dg.load_assets_from_modules(modules, key_prefix=self.key_prefix))
        # The observed `served_model` source asset keeps its key (a fact about a model endpoint, read by every audit's
        # automation and by the epoch tag of the answers); the location's first audit defines it and its sensor.
        sources = [asset for asset in loaded if isinstance(asset, dg.SourceAsset)]
        loaded = [asset for asset in loaded if not isinstance(asset, dg.SourceAsset)]
        checks = _prefixed_checks(modules, self.key_prefix)
        by_key = {key: asset for asset in loaded for key in asset.keys}
        keys = {self.prefixed(name) for name in wanted} & set(by_key)
        # and everything upstream of them that the package defines (a benchmark's corpus or tokenizer inputs)
        pending = list(keys)
        while pending:
            asset = by_key[pending.pop()]
            for dep in asset.dependency_keys:
                if dep in by_key and dep not in keys:
                    keys.add(dep)
                    pending.append(dep)
        assets = list({id(by_key[key]): by_key[key] for key in keys}.values())
        assets = [asset if set(asset.keys) <= keys else asset.subset_for(keys & set(asset.keys), None)
                  for asset in assets]
        # The audit's options are its assets' config defaults: Dagster 1.13's automation condition sensors launch
        # runs with no run config (nor does `dg launch --partition` or the UI's Materialize add a job's), so every
        # run of an audit's asset, however started, asks with the audit's options.
        assets = self._with_option_defaults(specs, assets)
        chosen_checks = [check for check in checks if {spec.asset_key for spec in check.check_specs} <= keys]
        selection = dg.AssetSelection.assets(*keys)
        sensors = [self._models_sensor(), self._automation_sensor(selection)]
        if first:
            from sctc_assets.assets.served_models import served_models_sensor

            assets += sources
            sensors.append(served_models_sensor)
        return dg.Definitions(assets=assets, asset_checks=chosen_checks, jobs=self._jobs(specs), sensors=sensors,
                              resources=resources)

    def _jobs(self, specs: list) -> list:
        """Each benchmark's stage jobs under the prefix (`<key_prefix>_term_model_lang`, …), with the audit's run
        options as their config."""
        jobs, options = [], self.options_namespace()
        for spec in specs:
            config = {name: values for name, values in spec.config(options).items()
                      if name in spec.assets}
            for stage, (name, selection) in spec.job_selections().items():
                ops = {asset: {"config": _present(config[asset])}
                       for asset in selection if asset in config and _present(config[asset])}
                jobs.append(dg.define_asset_job(f"{self.key_prefix}_{name}",
                                                selection=dg.AssetSelection.assets(*map(self.prefixed, selection)),
                                                config={"ops": ops} if ops else None,
                                                tags={"sctc/audit": self.key_prefix, **spec.run_tags(stage)}))
        return jobs

    def _models_sensor(self) -> dg.SensorDefinition:
        """Adds the audit's models to the `models` partitions; never removes one (the package's registry sensor, or
        another audit's, may own it)."""
        models = list(self.models)

        @dg.sensor(name=f"{self.key_prefix}_models", minimum_interval_seconds=60,
                   default_status=dg.DefaultSensorStatus.RUNNING,
                   description=f"Adds the models of audit {self.key_prefix} to the `models` partitions.")
        def add_models(context: dg.SensorEvaluationContext):
            from sctc_assets.assets.partitions import MODELS_PARTITION_NAME

            known = set(context.instance.get_dynamic_partitions(MODELS_PARTITION_NAME))
            new = [model for model in models if model not in known]
            if not new:
                return dg.SkipReason("every model of the audit is a partition")
            return dg.SensorResult(dynamic_partitions_requests=[
                dg.DynamicPartitionsDefinition(name=MODELS_PARTITION_NAME).build_add_request(new)])

        return add_models

    def option_defaults(self, specs: list) -> dict[str, dict]:
        """By asset name, the config values the audit's options set where a run with no options sets none (or
        another): what `_with_option_defaults` makes the defaults of the audit's assets."""
        options, defaults = self.options_namespace(), run_options.defaults()
        found = {}
        for spec in specs:
            plain = spec.config(defaults)
            for name, values in spec.config(options).items():
                changed = {key: value for key, value in _present(values).items()
                           if _present(plain.get(name, {})).get(key, None) != value}
                if changed and name in spec.assets:
                    found[name] = changed
        return found

    def _with_option_defaults(self, specs: list, assets: list) -> list:
        defaults = {self.prefixed(name): values for name, values in self.option_defaults(specs).items()}
        changed = []
        for asset in assets:
            values = {}
            for key in set(asset.keys) & set(defaults):
                values.update(defaults[key])
            changed.append(_with_config_defaults(asset, values) if values else asset)
        return changed

    def _automation_sensor(self, selection: dg.AssetSelection) -> dg.AutomationConditionSensorDefinition:
        from sctc_assets.assets.automation import automation_enabled

        return dg.AutomationConditionSensorDefinition(
            f"{self.key_prefix}_automation", target=selection, minimum_interval_seconds=30,
            default_status=dg.DefaultSensorStatus.RUNNING if automation_enabled() else dg.DefaultSensorStatus.STOPPED,
            run_tags={"sctc/launched_by": "automation", "sctc/audit": self.key_prefix},
            description=f"The package's opt-in automation for audit {self.key_prefix}: a model's answers start its "
                        "labels and tables; it never asks the model under test.")


def _location_resources(settings: dict) -> dict:
    """The code location's resources from an audit's `location_settings` (paths already resolved)."""
    from sctc_assets.assets.shared import shared_resources

    return shared_resources(**settings)


def _prefixed_checks(modules: list, prefix: str) -> list:
    """The modules' asset checks under the prefix. Dagster 1.13's prefixing (`load_asset_checks_from_modules(...,
    asset_key_prefix=...)`) drops a check's `additional_ins` (the input of `review_pairs_aligned` that reads
    `review_varieties`), so the reviews jobs of an audit would not resolve; such checks are prefixed here, every key
    of them."""
    prefixed = [check for check in _once(dg.load_asset_checks_from_modules(modules, asset_key_prefix=prefix))
                if not any(spec.additional_deps for spec in check.check_specs)]
    more = [check for check in _once(dg.load_asset_checks_from_modules(modules))
            if any(spec.additional_deps for spec in check.check_specs)]
    return prefixed + [_with_prefix(check, prefix) for check in more]


def _with_prefix(check, prefix: str):
    from sctc_assets.running.dagster_internals import AssetChecksDefinition

    def key(asset_key: dg.AssetKey) -> dg.AssetKey:
        return asset_key.with_prefix(prefix)

    attributes = check.get_attributes_dict()
    attributes["keys_by_input_name"] = {name: key(asset) for name, asset in check.node_keys_by_input_name.items()}
    attributes["check_specs_by_output_name"] = {
        name: dg.AssetCheckSpec(spec.name, asset=key(spec.asset_key), description=spec.description,
                                additional_deps=[dg.AssetDep(key(dep.asset_key),
                                                             partition_mapping=dep.partition_mapping)
                                                 for dep in spec.additional_deps],
                                blocking=spec.blocking, metadata=spec.metadata,
                                automation_condition=spec.automation_condition, partitions_def=spec.partitions_def)
        for name, spec in check.node_check_specs_by_output_name.items()}
    attributes["selected_asset_check_keys"] = {check_key.replace_asset_key(key(check_key.asset_key))
                                               for check_key in check.check_keys}
    return AssetChecksDefinition.dagster_internal_init(**attributes)


def _with_config_defaults(asset: dg.AssetsDefinition, values: dict) -> dg.AssetsDefinition:
    """The asset with `values` as the defaults of its op's config fields (a run's own config still wins); the
    same op otherwise (name, code version, compute function), the same keys, specs and checks."""
    from sctc_assets.running.dagster_internals import Shape

    op = asset.node_def
    if not isinstance(op, dg.OpDefinition) or op.config_schema is None:
        raise dg.DagsterInvalidDefinitionError(f"{asset.key.to_user_string()}: the audit's options configure it, "
                                               "but it has no op config to take them")
    shape = op.config_schema.as_field().config_type
    fields = dict(shape.fields)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise dg.DagsterInvalidDefinitionError(f"{asset.key.to_user_string()}: no config field(s) {', '.join(unknown)}")
    for name, value in values.items():
        field = fields[name]
        fields[name] = dg.Field(field.config_type, default_value=_config_value(value), is_required=False,
                                description=field.description)
    schema = dg.Field(Shape(fields, field_aliases=shape.field_aliases), description=op.config_schema.description)
    node = op.with_replaced_properties(name=op.name, config_schema=schema)
    return dg.AssetsDefinition.dagster_internal_init(**{**asset.get_attributes_dict(), "node_def": node})


def _config_value(value: Any) -> Any:
    """A config value as Dagster's config takes it: lists for tuples, plain dicts."""
    if isinstance(value, (list, tuple)):
        return [_config_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _config_value(item) for key, item in value.items()}
    return value


def _present(values: dict) -> dict:
    return {key: value for key, value in values.items() if value is not None}


def _once(objects) -> list:
    return list({id(obj): obj for obj in objects}.values())
