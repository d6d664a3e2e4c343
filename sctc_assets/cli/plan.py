"""`sctc plan` (alias `sctc estimate`, and `sctc run --dry-run`): what the run would ask, and its cost.

The estimate it prints: the model calls a run would make, per model × benchmark × partition, with cached answers,
tokens and cost.

Each benchmark's spec lists its partitions' requests (its `design`): the prompt tables are built from the same
upstream data and library functions as the input assets, and each partition's requests by the builder its response
asset calls (`lib/<benchmark>/requests.py`), so the plan and the run cannot drift apart (`test_estimate` runs both
and compares). This module adds what the backends say (cache identity, tokenizer, prices) and the response cache's
counts. A model that goes by batch (`batch: true`, `sctc run --batch`) is priced at its batch price
(`batch_price_factor` × the registry's prices). Nothing is materialized and no model is called; the asset definitions
are not loaded (only the backends).

A benchmark's estimate can carry extra lines (e.g. the power of the design): its spec's `estimate_lines`, each
receiving the `BenchmarkDesign` (every partition's selected prompt rows and requests, and each model's run
settings) and returning lines printed under the benchmark's table. Each model's run settings come from its spec's
`settings_for`, the resolver its response asset uses.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any, Callable, Mapping, Sequence

from sctc_assets.benchmarks import SPECS
from sctc_assets.cli.selection import batch_environment, models_per_benchmark, print_problems, select_for_run, specs_of
from sctc_assets.cli.validation import key_problems
from sctc_assets.lib.batch_settings import batch_pricing
from sctc_assets.lib.cache import Cache, cache_exists, open_cache
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.cost_estimate import (SCRIPT_RULE, BenchmarkDesign, Estimate, TokenCounter, estimate_partition,
                                      render)
from sctc_assets.lib.model_registry import ModelEntry
from sctc_assets.lib.sctc_upstream import open_sctc_upstream
from sctc_assets.lib.upstream_source import UpstreamError
from sctc_assets.resources.model_registry import ModelRegistryResource

# --- the command ------------------------------------------------------------------------------------------------------

def main(args: argparse.Namespace) -> int:
    with batch_environment():  # --batch and --no-wait last as long as the command
        return _plan(args)


def _plan(args: argparse.Namespace) -> int:
    selection = select_for_run(args, check_keys=False)
    if isinstance(selection, int):
        return selection
    try:
        estimate = build_estimate(models_per_benchmark(args, selection), selection.entries, vars(args))
    except (UpstreamError, ValueError, OSError) as exc:
        return print_problems([str(exc)])
    estimate.warnings += [f"{problem}: `sctc run` would stop here"
                          for problem in key_problems(selection.entries, selection.running(specs_of(args.benchmarks)),
                                                      args.benchmarks, vars(args))]
    print(render(estimate))
    return 0


# --- backends, tokenizers and the cache ------------------------------------------------------------------------------

def token_counter(backend: Any) -> TokenCounter:
    """The model's tokenizer when its backend knows it offline (`ModelBackend.token_counter`: the `openai` backend's
    OpenAI models, whose encoding the tokenizer registry holds a copy of), else the script rule."""
    counter = getattr(backend, "token_counter", None)
    return (counter() if callable(counter) else None) or SCRIPT_RULE


def keyed_request(backend: Any) -> Callable[[GenerationRequest], GenerationRequest] | None:
    """How `generate` turns a request into the one it keys and sends: with the per-trial seed of a backend that
    has `request_seed` (the seed is part of the cache key); None when requests are sent as built."""
    seed_for = getattr(backend, "request_seed", None)
    if seed_for is None:
        return None

    def keyed(request: GenerationRequest) -> GenerationRequest:
        if getattr(request, "seed", None) is not None:
            return request
        return dataclasses.replace(request, seed=seed_for(request))

    return keyed


def _output_ceiling(backend: Any) -> int | None:
    for name in ("max_tokens", "max_new_tokens"):
        value = getattr(backend, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _cache() -> Cache | None:
    # no cache yet: nothing is cached, and none is created (a database's schema is created if missing)
    return open_cache() if cache_exists() else None


# --- the estimate -----------------------------------------------------------------------------------------------------

def build_estimate(models_by_benchmark: Mapping[str, Sequence[str]], entries: Mapping[str, ModelEntry],
               options: Mapping[str, Any]) -> Estimate:
    """The estimate of every chosen benchmark (model keys already validated and filtered to those it serves)."""
    registry = ModelRegistryResource()
    cache = _cache()
    estimate = Estimate()
    stored: dict[str, int] = {}  # the cache's answers per model name
    asked: dict[str, set] = {}  # per backend identity, the requests earlier partitions ask
    for benchmark, keys in models_by_benchmark.items():
        designer = SPECS[benchmark].design
        if designer is None:
            estimate.add_note(benchmark, "no model calls (counting only)" if SPECS[benchmark].response_asset is None
                              else "its calls are not estimated (its spec has no `design`)")
            continue
        design = BenchmarkDesign(benchmark, options, designer([entries[key] for key in keys], options))
        for partition in design.partitions:
            backend = registry.backend(partition.model, open_upstream=open_sctc_upstream, overrides=partition.overrides,
                                       entry=entries[partition.model])
            identity = backend.identity() if backend.uses_cache else None
            if identity is not None and cache is not None:
                model_key = str(identity.get("model", ""))
                if model_key not in stored:
                    stored[model_key] = cache.count(model=model_key)
            pricing, batch_factor = batch_pricing(backend, backend.pricing())
            estimate.rows.append(estimate_partition(
                benchmark, partition.model, partition.partition, partition.request_set, identity=identity, cache=cache,
                counter=token_counter(backend) if identity is not None else SCRIPT_RULE,
                max_output_tokens=_output_ceiling(backend), pricing=pricing, batch_factor=batch_factor,
                stored_count=stored.get(str((identity or {}).get("model", "")), 0),
                asked_before=asked.setdefault(json.dumps(identity, sort_keys=True, default=str), set())
                if identity is not None else None, keyed=keyed_request(backend),
                expected=SPECS[benchmark].expected_answer))
        if SPECS[benchmark].expected_answer is not None:
            estimate.expected_answers[benchmark] = SPECS[benchmark].expected_answer
        for judge in SPECS[benchmark].chosen_judges(options):
            answers = sum(len(partition.requests) for partition in design.partitions)
            estimate.add_note(benchmark, f"judge {judge}: up to {answers:,} more calls, one per answer, asked after "
                                         "the answers (not in the table)")
        if not keys:
            estimate.add_note(benchmark, "no model: only the model-independent assets run")
        for extra in SPECS[benchmark].estimate_lines:
            for line in extra(design):
                estimate.add_note(benchmark, line)
    if cache is not None:
        cache.close()
    return estimate

