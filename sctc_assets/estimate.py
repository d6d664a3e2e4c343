"""The estimate `sctc plan` and `sctc run --dry-run` print: the model calls a run would make, per model × benchmark ×
partition, with cached answers, tokens and cost.

The prompt tables are built from the same upstream data and library functions as the input assets, and each
partition's requests by the builder its response asset calls (`lib/<benchmark>/requests.py`), so the plan and the
run cannot drift apart (`test_estimate` runs both and compares). Nothing is materialized and no model is called; the
asset definitions are not loaded (only the backends, for their cache identity).

A benchmark's estimate can carry extra lines (e.g. the power of the design): its spec's `estimate_lines`, each
receiving the `BenchmarkDesign` (every partition's selected prompt rows and requests, and each model's run
settings) and returning lines printed under the benchmark's table. Each model's run settings come from its spec's
`settings_for`, the resolver its response asset uses.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

import pandas as pd

from sctc_assets.benchmarks import REVIEWS, SPECS
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.estimate import (SCRIPT_RULE, BenchmarkDesign, Estimate, PartitionDesign, RequestSet,
                                      TokenCounter, estimate_partition)
from sctc_assets.lib.model_registry import ModelEntry

class _Shared:
    """Builds each (settings, partition) once: models with the same settings ask the same requests."""

    def __init__(self, build: Callable[..., tuple[pd.DataFrame, list[GenerationRequest]]]):
        self._build = build
        self._built: dict[Any, tuple[pd.DataFrame, RequestSet]] = {}

    def __call__(self, key: Any, *args: Any) -> tuple[pd.DataFrame, RequestSet]:
        if key not in self._built:
            selected, requests = self._build(*args)
            self._built[key] = (selected, RequestSet(requests))
        return self._built[key]


# --- the prompt tables, built as the input assets build them ---------------------------------------------------------

def term_prompts() -> pd.DataFrame:
    from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
    from sctc_assets.lib.term.prompts import PAPER_TRIALS, PROMPT_VARIANTS, build_prompts
    from sctc_assets.lib.term.terms import LANGS, parse_terms
    from sctc_assets.resources.upstream import SCTCUpstreamResource

    source = SCTCUpstreamResource().open()
    terms = parse_terms(source.read_csv(TERMS_FILE, TERM_COLUMNS), source_name=TERMS_FILE)
    return build_prompts(terms, langs=LANGS, variants=PROMPT_VARIANTS, trials=PAPER_TRIALS)


def name_prompts(options: Mapping[str, Any], experiments: Sequence[str],
                 generated: Collection[str] | None = None) -> pd.DataFrame:
    """The prompts of `experiments` only: each experiment's lists depend on the seed and its own name alone. The
    generated lists of the experiments outside `generated` (default: all are drawn) are drawn only where the
    upstream copy lacks the authors' lists, since only then does a run ask them."""
    from sctc_assets.lib.name.candidates import DEFAULT_SEED
    from sctc_assets.lib.name.lists import candidate_lists
    from sctc_assets.lib.name.names import NAME_COLUMNS, NAMES_FILE, parse_names
    from sctc_assets.lib.name.prompts import build_prompts
    from sctc_assets.resources.upstream import SCTCUpstreamResource

    source = SCTCUpstreamResource().open()
    names = parse_names(source.read_csv(NAMES_FILE, NAME_COLUMNS), source_name=NAMES_FILE)
    seed = options.get("name_seed")
    lists, _ = candidate_lists(names, source, seed=DEFAULT_SEED if seed is None else seed, experiments=experiments,
                               generated=generated)
    return build_prompts(lists)


def sovereignty_prompts(options: Mapping[str, Any]) -> pd.DataFrame:
    from sctc_assets.lib.sovereignty.prompts import prompt_table
    from sctc_assets.lib.sovereignty.upstream import MAIN_PROMPT_SET, prompt_items
    from sctc_assets.resources.tsb_upstream import TSBUpstreamResource

    roots = TSBUpstreamResource().roots()
    chosen = list(dict.fromkeys([MAIN_PROMPT_SET, *(options.get("sovereignty_prompt_sets") or [])]))
    return prompt_table({name: prompt_items(roots, name) for name in chosen})


def review_prompts(options: Mapping[str, Any]) -> pd.DataFrame:
    from sctc_assets.lib.paths import default_upstream_cache_dir
    from sctc_assets.lib.reviews import pairing, prompts, source, varieties

    config = REVIEWS.config(options)
    raw = config["raw_reviews"]
    if raw.get("hf_dataset"):
        frame, origin = source.read_hf_dataset(raw["hf_dataset"], split=raw.get("hf_split", "train"),
                                               config_name=raw.get("hf_config"))
    else:
        frame, origin = source.read_file(raw.get("location") or source.default_location(), default_upstream_cache_dir())
    reviews = source.canonical_reviews(frame, origin, raw.get("columns") or {})
    table = varieties.review_varieties(reviews, config["review_varieties"].get("varieties")
                                       or dict(varieties.DEFAULT_VARIETY_MAP))
    pairs = pairing.pair_reviews(table, seed=config["review_pairs"].get("seed", 0))
    return prompts.review_prompts(pairs, table, seed=config["review_prompts"].get("seed", 0))


# --- the partitions of each benchmark --------------------------------------------------------------------------------

def _term_design(models: Sequence[ModelEntry], options: Mapping[str, Any]) -> list[PartitionDesign]:
    from sctc_assets.lib.term.prompts import generation_overrides
    from sctc_assets.lib.term.requests import term_requests

    table = term_prompts()
    shared, designs = _Shared(lambda lang, trials, variants: term_requests(table, lang, trials, variants)), []
    for entry in models:
        trials, variants = SPECS["term"].settings_for(options, entry)
        overrides = generation_overrides(entry.benchmark_settings("term"))
        for lang in SPECS["term"].langs:
            selected, requests = shared((lang, trials, tuple(variants)), lang, trials, variants)
            designs.append(PartitionDesign(entry.key, lang, selected, requests, (trials, variants), overrides))
    return designs


def _name_design(models: Sequence[ModelEntry], options: Mapping[str, Any]) -> list[PartitionDesign]:
    from sctc_assets.lib.name.requests import name_requests

    settings = {entry.key: SPECS["name"].settings_for(options, entry) for entry in models}
    experiments = list(dict.fromkeys(name for chosen in settings.values() for name in chosen.experiments))
    # The generated lists are drawn only where a model asks for them (the authors' lists are the default).
    generated = {name for entry in models for name in settings[entry.key].experiments
                 if settings[entry.key].list_source == "generated" and entry.backend != "replay"}
    table = name_prompts(options, experiments, generated) if experiments else pd.DataFrame()

    def build(lang: str, chosen: Any, replay: bool) -> tuple[pd.DataFrame, list[GenerationRequest]]:
        selected, _, requests = name_requests(table, lang, chosen, replay=replay)
        return selected, requests

    shared, designs = _Shared(build), []
    for entry in models:
        replay = entry.backend == "replay"
        for lang in SPECS["name"].langs:
            selected, requests = shared((lang, settings[entry.key], replay), lang, settings[entry.key], replay)
            designs.append(PartitionDesign(entry.key, lang, selected, requests, settings[entry.key]))
    return designs


def _sovereignty_design(models: Sequence[ModelEntry], options: Mapping[str, Any]) -> list[PartitionDesign]:
    from sctc_assets.lib.sovereignty.requests import sovereignty_requests

    table = sovereignty_prompts(options)
    designs = []
    for entry in models:
        samples, overrides = SPECS["sovereignty"].settings_for(options, entry)
        for lang in SPECS["sovereignty"].langs:
            items, requests = sovereignty_requests(table, entry.key, lang, samples)
            designs.append(PartitionDesign(entry.key, lang, pd.DataFrame(items), RequestSet(requests),
                                           (samples, overrides), overrides))
    return designs


def _reviews_design(models: Sequence[ModelEntry], options: Mapping[str, Any]) -> list[PartitionDesign]:
    from sctc_assets.lib.reviews.requests import review_requests

    table = review_prompts(options) if models else pd.DataFrame()
    shared, designs = _Shared(lambda fmt, settings: review_requests(table, fmt, settings)), []
    for entry in models:
        settings = REVIEWS.settings_for(options, entry)
        for fmt in REVIEWS.langs:
            selected, requests = shared((fmt, settings), fmt, settings)
            designs.append(PartitionDesign(entry.key, fmt, selected, requests, settings))
    return designs


# The request designs of the built-in benchmarks, which open the upstream data through the resources (so they live
# here, above the specs); a benchmark of another package gives its spec a `design`.
DESIGNS: dict[str, Callable[[Sequence[ModelEntry], Mapping[str, Any]], list[PartitionDesign]]] = {
    "term": _term_design, "name": _name_design, "sovereignty": _sovereignty_design, "reviews": _reviews_design,
}


# --- backends, tokenizers and the cache ------------------------------------------------------------------------------

_ENCODERS: dict[str, TokenCounter] = {}


def token_counter(backend: Any) -> TokenCounter:
    """The model's tokenizer when it is known offline (an OpenAI model through the `openai` backend, also behind
    an `openai/…` router prefix, whose encoding the tokenizer registry holds a copy of), else the script rule."""
    model = str(getattr(backend, "model", "") or "")
    if getattr(backend, "backend_name", "") != "openai" or not model:
        return SCRIPT_RULE
    try:
        from tiktoken.model import encoding_name_for_model

        encoding = encoding_name_for_model(model.removeprefix("openai/"))
    except (ImportError, KeyError):
        return SCRIPT_RULE
    if encoding not in _ENCODERS:
        _ENCODERS[encoding] = _tiktoken_counter(encoding)
    return _ENCODERS[encoding]


def _tiktoken_counter(encoding: str) -> TokenCounter:
    from sctc_assets.lib.name.tokenization import (
        TokenizerIntegrityError, TokenizerRegistryError, TokenizerUnavailable, default_files_dir, load_registry,
        load_tokenizer,
    )
    from sctc_assets.lib.paths import default_tokenizers_path

    try:
        entries = load_registry(default_tokenizers_path())
    except (OSError, TokenizerRegistryError):
        return SCRIPT_RULE
    for entry in entries.values():
        # Only a copy already on this machine: a plan never downloads.
        if entry.kind == "tiktoken" and entry.settings.get("encoding") == encoding and "offline_copy" in entry.settings \
                and "package" in entry.settings["offline_copy"]:
            try:
                return TokenCounter(f"tiktoken {encoding}", load_tokenizer(entry, default_files_dir()))
            except (TokenizerUnavailable, TokenizerIntegrityError, OSError, ValueError):
                return SCRIPT_RULE
    return SCRIPT_RULE


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


def _cache():
    from sctc_assets.lib.cache import ResponseCache
    from sctc_assets.lib.paths import default_cache_path

    path = Path(default_cache_path())
    return ResponseCache(path) if path.exists() else None  # no cache yet: nothing is cached, and none is created


# --- the estimate -----------------------------------------------------------------------------------------------------

def build_estimate(models_by_benchmark: Mapping[str, Sequence[str]], entries: Mapping[str, ModelEntry],
               options: Mapping[str, Any]) -> Estimate:
    """The estimate of every chosen benchmark (model keys already validated and filtered to those it serves)."""
    from sctc_assets.resources.model_registry import ModelRegistryResource

    registry = ModelRegistryResource()
    cache = _cache()
    estimate = Estimate()
    stored: dict[str, int] = {}  # the cache's answers per model name
    asked: dict[str, set] = {}  # per backend identity, the requests earlier partitions ask
    for benchmark, keys in models_by_benchmark.items():
        designer = SPECS[benchmark].design or DESIGNS.get(benchmark)
        if designer is None:
            estimate.add_note(benchmark, "no model calls (counting only)" if SPECS[benchmark].response_asset is None
                              else "its calls are not estimated (its spec has no `design`)")
            continue
        design = BenchmarkDesign(benchmark, options, designer([entries[key] for key in keys], options))
        for partition in design.partitions:
            backend = registry.backend(partition.model, open_upstream=_upstream_opener(), overrides=partition.overrides)
            identity = backend.identity() if backend.uses_cache else None
            if identity is not None and cache is not None:
                model_key = str(identity.get("model", ""))
                if model_key not in stored:
                    stored[model_key] = cache.count(model=model_key)
            estimate.rows.append(estimate_partition(
                benchmark, partition.model, partition.partition, partition.request_set, identity=identity, cache=cache,
                counter=token_counter(backend) if identity is not None else SCRIPT_RULE,
                max_output_tokens=_output_ceiling(backend), pricing=backend.pricing(),
                stored_count=stored.get(str((identity or {}).get("model", "")), 0),
                asked_before=asked.setdefault(json.dumps(identity, sort_keys=True, default=str), set())
                if identity is not None else None, keyed=keyed_request(backend)))
        judge = SPECS[benchmark].chosen_judge(options)
        if judge:
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


def _upstream_opener() -> Callable[[], Any]:
    from sctc_assets.resources.upstream import SCTCUpstreamResource

    return SCTCUpstreamResource().open
