"""`sctc terms define`: draft the missing definitions of an item set with a registered model, for a person to review.

The set is named as `sctc run --term-items` names it (`lib/term/item_sources.resolve_items`: a file, a URL, csld /
csld-straits, a registered set), and `--term-limit`/`--concepts` choose a part of it as they do there.

Every call goes through the model's backend, the shared response cache and the budget (`--max-calls`/`--max-cost`,
`$SCTC_MAX_CALLS`/`$SCTC_MAX_COST_USD`, the entry's own `budget:`), exactly as `sctc run`'s assets call it; a rerun
answers from the cache. The prompts and the rules that accept or refuse an answer are in `lib/term/definitions.py`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

import pydantic

from sctc_assets.backends.base import BackendUnavailable, GenerationHalted, ModelBackend
from sctc_assets.lib.cache import Cache, cache_key
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.lib.model_registry import RegistryError
from sctc_assets.lib.term.definitions import (EMPTY, EMPTY_ANSWER, NAMED_THE_TERM, apply_definitions,
                                              definition_request, missing_definitions, parse_definition, problem_kind)
from sctc_assets.lib.term.item_sources import load_entry, registered_sets, resolve_items, source_file
from sctc_assets.lib.term.items import Concept, ItemSet, ItemSetError, write_item_csv
from sctc_assets.lib.upstream_source import UpstreamError
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.cli.validation import key_problem

DEFINED_SUFFIX = ".defined.csv"
OPTION_NAMES = {"max_calls": "--max-calls", "max_cost_usd": "--max-cost"}
REQUEST_KIND = "define"  # the requests' `ref`: what a log or a replay would see; not part of the cache key


def default_out(items: str, set_name: str) -> Path:
    """`<stem>.defined.csv` next to an item file; for a named set, a URL or a csld name, `<set name>.defined.csv` in
    the current folder (never beside the upstream data)."""
    path = Path(items).expanduser()
    if not items.startswith(("http://", "https://")) and path.is_file():
        return path.with_name(path.stem + DEFINED_SUFFIX)
    return Path(set_name + DEFINED_SUFFIX)


def open_registry(args: argparse.Namespace) -> tuple[ModelRegistryResource, object] | int:
    """The model registry with the command's call and cost limits, and the entry of `args.model`; the exit status
    after saying what is wrong (a bad limit, an unknown model, a missing API key: its variable, never its value)."""
    try:
        registry = ModelRegistryResource(max_calls=args.max_calls, max_cost_usd=args.max_cost)
    except pydantic.ValidationError as exc:
        return _error("; ".join(f"{OPTION_NAMES.get(str(error['loc'][0]), error['loc'][0])}: {error['msg']}"
                                for error in exc.errors()))
    try:
        entry = registry.entry(args.model)
    except (RegistryError, OSError) as exc:
        return _error(str(exc))
    problem = key_problem(entry)  # names the variable, never its value
    if problem:
        return _error(problem)
    return registry, entry


def ask_through_cache(backend: ModelBackend, requests: Sequence[GenerationRequest], cache: Cache,
                      model: str) -> tuple[list[GenerationResult | None], int, str | None, str | None] | int:
    """`requests` asked through the response cache: (the results, how many came from the cache, why the backend
    halted, why it failed), where a halt (Ctrl-C, budget) or a failure reads back the answers that arrived (they are
    stored: the file gets them too); the exit status after saying so where the backend cannot be used."""
    already = sum(result is not None for result in _stored(backend, requests, cache))
    try:
        results: list[GenerationResult | None] = list(backend.generate(requests, cache=cache))
        return results, sum(result.cached for result in results), None, None
    except GenerationHalted as exc:
        return _stored(backend, requests, cache), already, exc.reason, None
    except BackendUnavailable as exc:
        return _error(f"model {model!r}: {exc}")
    except Exception as exc:  # noqa: BLE001 - the answers that arrived are stored: the file gets them too
        return _stored(backend, requests, cache), already, None, f"{type(exc).__name__}: {exc}"


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _same_file(a: Path, b: Path) -> bool:
    """Whether `a` names the file `b` (the same path, or a link to it)."""
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def _stored(backend: ModelBackend, requests: Sequence[GenerationRequest],
            cache: Cache) -> list[GenerationResult | None]:
    """The answers the cache holds for `requests` (under the keys `generate` uses), None where it holds none."""
    identity = backend.identity()
    keys = [cache_key(identity, request if request.seed is not None else
                      dataclasses.replace(request, seed=backend.request_seed(request))) for request in requests]
    hits = cache.get_many(list(dict.fromkeys(keys)))
    return [hits.get(key) for key in keys]


def _problem(result: GenerationResult | None) -> tuple[str, str]:
    """Why a call gave no text to read a definition from, and the reason it is counted under."""
    if result is None:
        return "not asked", "not asked"
    if result.outcome == "refusal":
        return f"the model refused ({result.message or 'no reason given'})", "refused by the model"
    if result.outcome == "error":
        return f"the call failed ({result.message or 'no message'}); a rerun asks again", "call failed"
    return f"no answer ({result.message or result.outcome})", "no answer"


def define(args: argparse.Namespace) -> int:
    items: str = args.items
    try:  # the set as `sctc run --term-items` reads it: a file, a URL, a named source or a registered set
        item_entry = resolve_items(items, registered_sets(), limit=args.term_limit, concepts=args.concepts)
        item_set = load_entry(item_entry, require_definitions=False).item_set
    except (ItemSetError, UpstreamError) as exc:
        return _error(str(exc))
    except KeyError as exc:
        return _error(str(exc.args[0]))
    except OSError as exc:
        return _error(f"{items}: {exc.strerror or exc}")
    out: Path = args.out or default_out(items, item_entry.name)
    read_from = source_file(item_entry.source)
    if read_from is not None and _same_file(out, read_from):
        return _error(f"{out}: is the item file itself; choose another --out (the input is never overwritten)")

    opened = open_registry(args)
    if isinstance(opened, int):
        return opened
    registry, entry = opened

    missing = missing_definitions(item_set)
    if not missing:
        write_item_csv(item_set, out)
        print(f"{items}: every one of the {len(item_set)} concepts has a definition; nothing to draft")
        print(f"wrote {out} (unchanged)")
        return 0

    try:
        backend = registry.backend(args.model)
    except RegistryError as exc:
        return _error(str(exc))
    requests = [GenerationRequest.user(definition_request(concept, args.script), benchmark=REQUEST_KIND,
                                       concept_id=concept.concept_id) for concept in missing]
    cache = registry.cache()
    try:  # the cache is closed last, once the file is written: a failure there loses nothing computed
        asked = ask_through_cache(backend, requests, cache, args.model)
        if isinstance(asked, int):
            return asked
        results, from_cache, halted, failed = asked
        status = _write_drafts(args, item_set, missing, results, from_cache, halted, out)
        if failed:
            print(f"error: the model failed before every concept was asked ({failed}); the answers that arrived are "
                  f"stored and in {out}: rerun the same command to ask the rest", file=sys.stderr)
            return 1
        return status
    finally:
        cache.close()


def _write_drafts(args: argparse.Namespace, item_set: ItemSet, missing: Sequence[Concept],
                  results: Sequence[GenerationResult | None], from_cache: int, halted: str | None, out: Path) -> int:
    """The new item file with the definitions read from `results`, and what happened, printed."""
    items = args.items
    drafts: dict[str, str] = {}
    refused: list[tuple[str, str]] = []
    reasons: Counter[str] = Counter()
    for concept, result in zip(missing, results):
        if result is None or result.outcome != "ok":
            why, kind = _problem(result)
        else:
            definition, why = parse_definition(result.text, concept)
            if definition is not None:
                drafts[concept.concept_id] = definition
                continue
            why = why or EMPTY_ANSWER
            kind = problem_kind(why)
        refused.append((concept.concept_id, why))
        reasons[kind] += 1
    write_item_csv(apply_definitions(item_set, drafts, args.model, args.script), out)

    print(f"{items}: {len(missing)} of {len(item_set)} concepts had no definition; asked {args.model} "
          f"({args.script})")
    counted = ", ".join(f"{count} {kind}" for kind, count in reasons.most_common())
    print(f"drafted: {len(drafts)} of {len(missing)}" + (f" ({counted})" if counted else ""))
    print(f"refused: {len(refused)}")
    for concept_id, why in refused:
        print(f"  {concept_id}: {why}")
    unusable = reasons[NAMED_THE_TERM] + reasons[EMPTY]
    if unusable:
        print(f"{unusable} of {args.model}'s answers named the term or were empty, against the instruction: a "
              "stronger model follows it better; try another --model (`sctc models` lists the registry)")
    new_calls = len(missing) - from_cache - sum(result is None for result in results)
    print(f"answers from the response cache: {from_cache} (new model calls: {new_calls})")
    if halted:
        print(f"model calls halted: {halted}; rerun the same command to continue (raise or drop "
              "--max-calls/--max-cost first)")
    print(f"wrote {out}: the drafted definitions are marked definition_source=model:{args.model}"
          + (f"; the {len(refused)} refused are left blank" if refused else ""))
    print("review every drafted definition before running this item set: a model wrote them")
    return 1 if refused else 0


def main(args: argparse.Namespace) -> int:
    return {"define": define}[args.terms_command](args)
