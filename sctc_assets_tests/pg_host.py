"""One "host" of the PostgreSQL cache tests: a process with its own `$SCTC_DATA_DIR` that asks N prompts of an
OpenAI-compatible endpoint through the response cache `$SCTC_DATABASE_URL` names, and writes how each ended.

    python -m sctc_assets_tests.pg_host BASE_URL N CONCURRENCY OUT.json
"""

from __future__ import annotations

import json
import sys
from collections import Counter

from sctc_assets.backends.openai_backend import OpenAIBackend
from sctc_assets.lib.cache import open_cache
from sctc_assets.lib.generation import GenerationRequest

KEY_ENV = "SCTC_TEST_PG_KEY"


def prompts(count: int) -> list[GenerationRequest]:
    return [GenerationRequest.user(f"prompt {index}") for index in range(count)]


def main(base_url: str, count: int, concurrency: int, out: str) -> int:
    backend = OpenAIBackend(model="stub-model", base_url=base_url, api_key_env=KEY_ENV, concurrency=concurrency,
                            max_retries=0, timeout_s=30)
    status, outcomes, error = 0, {}, None
    try:
        results = backend.generate(prompts(count), cache=open_cache())
        outcomes = dict(Counter(result.outcome for result in results))
        messages = [result.message for result in results if result.outcome == "error"][:3]
    except Exception as exc:  # noqa: BLE001  (reported to the test)
        status, error, messages = 1, f"{type(exc).__name__}: {exc}", []
    with open(out, "w", encoding="utf-8") as handle:
        json.dump({"outcomes": outcomes, "error": error, "messages": messages}, handle)
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
