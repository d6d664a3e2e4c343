"""`sctc names rephrase`: draft the name task's two rephrased prompts per language with a registered model, for a
person to review (paper Appendix A.6, Tables 9–10).

Each language's prompt (Table 1(b)) is sent twice (two samples: trials 0 and 1, the first and the second
rephrasing) inside the A.6 instruction; the answers become the templates of prompt variants 2 and 3 in a variants
file (`lib/name/variants.py`), which `sctc run --benchmarks name --name-prompt-variants FILE` runs. Every call goes
through the model's backend, the shared response cache and the budget, as `sctc terms define`'s do; a rerun answers
from the cache, and the file is written before the cache closes, so a failure loses nothing computed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pydantic

from sctc_assets.backends.base import BackendUnavailable, GenerationHalted
from sctc_assets.cli.terms import OPTION_NAMES, _error, _problem, _stored
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.lib.model_registry import RegistryError
from sctc_assets.lib.name.prompts import TEMPLATES
from sctc_assets.lib.name.variants import (MODEL_SOURCE_PREFIX, REPHRASED_VARIANTS, parse_rephrasing,
                                           rephrase_request, write_variants)
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.validation import key_problem

DEFAULT_OUT = Path("name_prompt_variants.csv")
REQUEST_KIND = "rephrase"  # the requests' `ref`: what a log would see; not part of the cache key


def rephrase(args: argparse.Namespace) -> int:
    out: Path = args.out or DEFAULT_OUT
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
    try:
        backend = registry.backend(args.model)
    except RegistryError as exc:
        return _error(str(exc))

    slots = [(lang, variant) for lang in TEMPLATES for variant in REPHRASED_VARIANTS]
    # Two samples of the same instruction: the trial keeps them apart in the cache (and seeds them differently).
    requests = [GenerationRequest.user(rephrase_request(lang), trial=variant - REPHRASED_VARIANTS[0],
                                       benchmark=REQUEST_KIND, lang=lang, prompt_variant=variant)
                for lang, variant in slots]
    cache = registry.cache()
    halted: str | None = None
    failed: str | None = None
    try:  # the cache is closed last, once the file is written: a failure there loses nothing computed
        already = sum(result is not None for result in _stored(backend, requests, cache))
        try:
            results: list[GenerationResult | None] = list(backend.generate(requests, cache=cache))
            from_cache = sum(result.cached for result in results)
        except GenerationHalted as exc:
            halted = exc.reason
            results = _stored(backend, requests, cache)
            from_cache = already
        except BackendUnavailable as exc:
            return _error(f"model {args.model!r}: {exc}")
        except Exception as exc:  # noqa: BLE001 - the answers that arrived are stored: the file gets them too
            failed = f"{type(exc).__name__}: {exc}"
            results = _stored(backend, requests, cache)
            from_cache = already
        rows, refused = [], []
        for (lang, variant), result in zip(slots, results):
            template = None
            if result is None or result.outcome != "ok":
                why = _problem(result)[0]
            else:
                template, why = parse_rephrasing(result.text)
            if template is None:
                refused.append(f"{lang} prompt_variant {variant}: {why}")
            rows.append({"lang": lang, "prompt_variant": variant, "template": template,
                         "template_source": f"{MODEL_SOURCE_PREFIX}{args.model}" if template else ""})
        write_variants(rows, out)
    finally:
        cache.close()

    print(f"asked {args.model} for {len(REPHRASED_VARIANTS)} rephrasings of the name prompt in each of "
          f"{len(TEMPLATES)} languages (Appendix A.6's instruction)")
    print(f"drafted: {len(slots) - len(refused)} of {len(slots)}")
    for line in refused:
        print(f"  refused {line}")
    new_calls = len(slots) - from_cache - sum(result is None for result in results)
    print(f"answers from the response cache: {from_cache} (new model calls: {new_calls})")
    if halted:
        print(f"model calls halted: {halted}; rerun the same command to continue (raise or drop "
              "--max-calls/--max-cost first)")
    print(f"wrote {out}" + (f"; the {len(refused)} refused are left blank" if refused else ""))
    print(f"review every template (each keeps {{n}} and {{names}}) before `sctc run --benchmarks name "
          f"--name-prompt-variants {out}`: a model wrote them")
    if failed:
        print(f"error: the model failed before every prompt was asked ({failed}); the answers that arrived are "
              f"stored and in {out}: rerun the same command to ask the rest", file=sys.stderr)
        return 1
    return 1 if refused else 0


def main(args: argparse.Namespace) -> int:
    return {"rephrase": rephrase}[args.names_command](args)
