"""Which models a run covers, per benchmark: one object, built once before a run (`sctc run`, `sctc plan`, `sctc
fetch`: `cli/selection.select`) and passed down to whatever asks (the runner, the estimate, the halt report, the
unchanged-run record), so the rule below is written once.

The rule: `--models` (`explicit`) chooses the models of every benchmark. Without it, a benchmark runs the registry's
default models (entries marked `default: true`) when its spec says `default_models`, plus the models its preparation
added (e.g. imported published results); a benchmark whose spec has `default_models` false (reviews, corpus) runs
only what its preparation added. A chosen model is *served* when its registry entry can answer the benchmark (the
spec's `serves`); a key the registry lacks is never served. Each model is listed once, in the order first chosen.

A spec here is anything with `name`, `default_models` and `serves(entry)` (`benchmarks.spec.BenchmarkSpec`, or a
test's own), so this module needs neither the benchmarks nor Dagster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol, Sequence


class ServingSpec(Protocol):
    name: str
    default_models: bool

    def serves(self, entry: Any) -> bool: ...


def _once(keys: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(keys))


@dataclass(frozen=True)
class ModelSelection:
    """The registry's entries, its default models, the models each benchmark's preparation added (by benchmark
    name), and `--models` when given."""

    entries: Mapping[str, Any]
    default_models: tuple[str, ...] = ()
    added: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    explicit: tuple[str, ...] | None = None

    @classmethod
    def of(cls, entries: Mapping[str, Any], added: Mapping[str, Sequence[str]] | None = None,
           explicit: Sequence[str] | None = None) -> "ModelSelection":
        """The selection over a registry: its defaults are the entries marked `default` (in registry order)."""
        return cls(dict(entries), _once(key for key, entry in entries.items() if getattr(entry, "default", False)),
                   {name: _once(keys) for name, keys in (added or {}).items()},
                   _once(explicit) if explicit else None)

    def chosen(self, spec: ServingSpec) -> list[str]:
        """The models the benchmark is asked to run (served or not)."""
        if self.explicit:
            return list(self.explicit)
        defaults = self.default_models if spec.default_models else ()
        return list(_once([*defaults, *self.added.get(spec.name, ())]))

    def served(self, spec: ServingSpec) -> list[str]:
        """Those of `chosen(spec)` whose registry entry can answer the benchmark: the models it runs."""
        return [model for model in self.chosen(spec) if model in self.entries and spec.serves(self.entries[model])]

    def skipped(self, spec: ServingSpec) -> list[str]:
        """Those of `chosen(spec)` it does not run (no answers for this benchmark)."""
        served = set(self.served(spec))
        return [model for model in self.chosen(spec) if model not in served]

    def running(self, specs: Iterable[ServingSpec]) -> list[str]:
        """Every model chosen for any of `specs`, once (a benchmark that needs --models for any, such as reviews
        and corpus, adds none without it)."""
        return list(_once(model for spec in specs for model in self.chosen(spec)))

    def served_by(self, specs: Iterable[ServingSpec]) -> dict[str, list[str]]:
        """The models each benchmark runs, by its name."""
        return {spec.name: self.served(spec) for spec in specs}
