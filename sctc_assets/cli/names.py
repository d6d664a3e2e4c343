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

from sctc_assets.cli.terms import _error, _problem, ask_through_cache, open_registry
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.model_registry import RegistryError
from sctc_assets.lib.name.prompts import TEMPLATES
from sctc_assets.lib.name.variants import (MODEL_SOURCE_PREFIX, REPHRASED_VARIANTS, parse_rephrasing,
                                           rephrase_request, write_variants)

DEFAULT_OUT = Path("name_prompt_variants.csv")
REQUEST_KIND = "rephrase"  # the requests' `ref`: what a log would see; not part of the cache key


def rephrase(args: argparse.Namespace) -> int:
    out: Path = args.out or DEFAULT_OUT
    opened = open_registry(args)
    if isinstance(opened, int):
        return opened
    registry, entry = opened
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
    try:  # the cache is closed last, once the file is written: a failure there loses nothing computed
        asked = ask_through_cache(backend, requests, cache, args.model)
        if isinstance(asked, int):
            return asked
        results, from_cache, halted, failed = asked
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
