"""The model registry as a Dagster resource: it turns registry entries into backend resources."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

import functools
import os

import dagster as dg
import pydantic
from pydantic import Field, PrivateAttr

from sctc_assets.backends import ModelBackend, backend_class
from sctc_assets.backends.base import GenerationHalted
from sctc_assets.lib.batch_settings import batch_overrides
from sctc_assets.lib.budget import MAX_COST_ENV, MAX_CALLS_ENV, PROCESS_SCOPE, SCOPE_ENV, Budget, BudgetError, BudgetLimits
from sctc_assets.lib.cache import Cache, open_cache
from sctc_assets.lib.paths import default_registry_path
from sctc_assets.lib.model_registry import ModelEntry, RegistryError, load_registry
from sctc_assets.lib.upstream_source import UpstreamSource
from sctc_assets.resources.served_epoch import latest_epoch, tag_requests_with
from sctc_assets.resources.batch_wait import (RETRY_OF_TAG, launched_run, mark_retried, pending_batches,
                                              wait_for_batches)


class ModelRegistryResource(dg.ConfigurableResource):
    """Models by key (`data/models.yaml` or `$SCTC_MODELS`) and the shared response cache."""

    registry_path: Optional[str] = Field(default=None, description="Model registry YAML; default $SCTC_MODELS or data/models.yaml.")
    cache_path: Optional[str] = Field(default=None, description="The response cache: a SQLite file or a postgresql:// URL; default $SCTC_DATABASE_URL, else data/cache/responses.sqlite.")
    max_calls: Optional[int] = Field(default=None, ge=0, description=f"Stop asking after this many new model calls in "
                                     f"the budget scope (all models together); default ${MAX_CALLS_ENV}, else none.")
    max_cost_usd: Optional[float] = Field(default=None, ge=0, description=f"Stop asking once new calls in the budget "
                                          f"scope cost this much (registry prices); default ${MAX_COST_ENV}.")
    budget_scope: Optional[str] = Field(default=None, description=f"What shares one budget (`sctc run` sets one per "
                                        f"run); default ${SCOPE_ENV}, else the Dagster run.")
    _run_id: Optional[str] = PrivateAttr(default=None)
    _partition: Optional[str] = PrivateAttr(default=None)  # the run's partition, named on the batches it submits
    # The run a launched run's backends wait in for provider batches (`resources/batch_wait.py`), else None.
    _waiting_in: Optional[tuple[dg.DagsterInstance, dg.DagsterRun, Any]] = PrivateAttr(default=None)
    # The run's instance, where the served models' observations are (`resources/served_epoch.py`).
    _instance: Optional[dg.DagsterInstance] = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # Without a budget scope, a Dagster run's partitions share its budget (a UI backfill: one run each).
        self._run_id = context.run.run_id if context.run is not None else None
        run, instance = context.dagster_run, context.instance
        self._partition = run.tags.get("dagster/partition") if run is not None else None
        self._instance = instance
        if instance is not None and launched_run(run):
            self._waiting_in = (instance, run, context.log)
            if run.tags.get(RETRY_OF_TAG):  # the `sctc_batches` sensor started this run: the waiting one is done
                mark_retried(instance, run.tags[RETRY_OF_TAG], run.run_id)

    def budget_limits(self) -> BudgetLimits:
        """The run's limits: the fields, else the environment (what `sctc run --max-calls/--max-cost` sets)."""
        try:
            from_env = BudgetLimits.from_environment()
        except BudgetError as exc:
            raise RegistryError(str(exc)) from None
        return BudgetLimits(max_calls=self.max_calls if self.max_calls is not None else from_env.max_calls,
                            max_cost_usd=self.max_cost_usd if self.max_cost_usd is not None else from_env.max_cost_usd)

    def scope(self) -> str:
        explicit = self.budget_scope or os.environ.get(SCOPE_ENV)
        return explicit or (f"run:{self._run_id}" if self._run_id else PROCESS_SCOPE)

    def budget_for(self, entry: ModelEntry, pricing: tuple[float | None, float | None]) -> Budget | None:
        """The budget `entry`'s calls draw on; None when nothing limits or counts them."""
        run = self.budget_limits()
        if not (run.limited or entry.budget.limited or self.budget_scope or os.environ.get(SCOPE_ENV)):
            return None
        return Budget(self.cache(), scope=self.scope(), model=entry.key, run=run, own=entry.budget, pricing=pricing,
                      where=self._where(entry))

    def path(self) -> str:
        return str(self.registry_path or default_registry_path())

    def entries(self) -> dict[str, ModelEntry]:
        return load_registry(self.path())

    def enabled_entries(self) -> dict[str, ModelEntry]:
        """The entries that are `models` partitions: every entry but the examples (`enabled: false`)."""
        return {key: entry for key, entry in self.entries().items() if entry.enabled}

    def entry(self, key: str, *, allow_example: bool = False) -> ModelEntry:
        """The entry of `key`; an example (`enabled: false`) only with `allow_example` (to check its settings)."""
        entries = self.entries()
        if key not in entries:
            raise RegistryError(f"{self.path()}: no model {key!r} (known: {', '.join(sorted(entries))})")
        if not entries[key].enabled and not allow_example:
            raise RegistryError(f"{self._where(entries[key])} is an example (`enabled: false`): set `enabled: true`"
                                " there to run it")
        return entries[key]

    def backend(self, key: str, *, open_upstream: Callable[[], UpstreamSource] | None = None,
                overrides: Mapping[str, Any] | None = None, allow_example: bool = False,
                entry: ModelEntry | None = None) -> ModelBackend:
        """The backend resource for `key`, configured from its registry entry (replay backends get the upstream);
        `entry`: an entry not in the registry file (one a dry run would import).

        `overrides` replaces settings for one benchmark run (e.g. its temperature); a setting the backend does not
        have is left out, since it cannot change that backend's answers (a replay has no temperature). `sctc run
        --batch` adds `batch: true` to the entries it chose (`$SCTC_BATCH_MODELS`, lib/batch_settings.py).
        """
        entry = entry or self.entry(key, allow_example=allow_example)
        where = self._where(entry)
        cls = self.checked_backend_class(entry)
        settings = dict(entry.settings)
        overrides = {**(overrides or {}), **batch_overrides(entry.key)}
        settings.update({name: value for name, value in overrides.items() if name in cls.model_fields})
        if getattr(cls, "needs_upstream", False):
            if open_upstream is None:
                raise RegistryError(f"{where} replays published data but no upstream is configured")
            settings.setdefault("upstream_root", str(open_upstream().root))
        try:
            backend = cls(**settings)
        except pydantic.ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, error['loc']))}: {error['msg']}" for error in exc.errors())
            raise RegistryError(f"{where} ({entry.backend}): {problems}") from None
        backend.attach_budget(self.budget_for(entry, backend.pricing()))
        set_batch_context = getattr(backend, "set_batch_context", None)  # the core's batch path (issue 40)
        if set_batch_context is not None:  # what its batch records name: `sctc batches` and the sensor read them
            set_batch_context(registry_key=entry.key, partitions=[self._partition] if self._partition else [])
        if self._waiting_in is not None:
            _wait_for_batches_in_run(backend, *self._waiting_in)
        epoch = self.observed_epoch(entry)
        if epoch:  # an observed entry: its answers are tagged with the served version they were asked under
            tag_requests_with(backend, epoch)
        return backend

    def observed_epoch(self, entry: ModelEntry) -> Optional[str]:
        """The epoch tag of an entry with `observe:`: its latest observed served version's (None: not observed, or
        outside a Dagster run). Its answers are asked under it (`resources/served_epoch.py`)."""
        if entry.observe_hours is None or self._instance is None:
            return None
        return latest_epoch(self._instance, entry.key)

    def _where(self, entry: ModelEntry) -> str:
        return f"{entry.source or self.path()}: model {entry.key!r}"

    def checked_backend_class(self, entry: ModelEntry) -> type[ModelBackend]:
        """The backend class of `entry`, after checking that it exists and has every setting the entry gives."""
        where = self._where(entry)
        try:
            cls = backend_class(entry.backend)
        except (ImportError, ValueError) as exc:
            raise RegistryError(f"{where}: {exc}") from exc
        _check_settings(cls, entry, where)
        return cls

    def cache(self) -> Cache:
        """The response cache: `cache_path` when set, else PostgreSQL when `$SCTC_DATABASE_URL` is set, else the
        data folder's SQLite file."""
        return open_cache(self.cache_path)


def _wait_for_batches_in_run(backend: ModelBackend, instance: dg.DagsterInstance, run: dg.DagsterRun,
                             log: Any) -> None:
    """Make `backend.generate()` end a launched run as a waiting run when its batches are still running (one place
    for every asset's backend and judge): it tags the run and fails the step with a message naming the batches."""
    generate = backend.generate

    @functools.wraps(generate)
    def generate_or_wait(requests, *, cache: Cache | None = None, **options):
        try:
            return generate(requests, cache=cache, **options)
        except GenerationHalted as exc:
            if pending_batches(exc) is None or cache is None:
                raise
            raise wait_for_batches(instance, run, cache, exc, log) from exc

    # An attribute of this one object: the backend's class (and `isinstance` on it) stays as it is.
    object.__setattr__(backend, "generate", generate_or_wait)


def _check_settings(cls: type[ModelBackend], entry: ModelEntry, where: str) -> None:
    """Refuse settings the backend does not have: the resource would drop them, and a typo (`max_token`) would
    silently run with the default."""
    unknown = sorted(set(entry.settings) - set(cls.model_fields))
    if not unknown:
        return
    # Only the setting's name is shown: its value may be a secret.
    message = f"{where}: unknown setting(s) {', '.join(map(repr, unknown))} for the {entry.backend!r} backend"
    if "api_key" in unknown:
        message += (
            "; API keys do not belong in the registry: put the key in an environment variable and give its name"
            " as `api_key_env`"
        )
    raise RegistryError(f"{message} (settings: {', '.join(sorted(cls.model_fields))})")
