"""The model calls of one sovereignty partition, built in one place for `sovereignty_responses` and `sctc plan`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import pandas as pd

from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.sovereignty.conditions import BASELINE, Condition


def sovereignty_requests(sovereignty_prompts: pd.DataFrame, model: str, lang: str, samples: int,
                         conditions: Sequence[Condition] = (BASELINE,), epoch: str | None = None
                         ) -> tuple[list[dict[str, Any]], list[GenerationRequest]]:
    """One item per (condition, sample, prompt) of `lang`, condition-major then sample-major, and its request; the
    sample index is the trial. A condition's system prompt goes into the request (so each condition has its own
    cache entries); the baseline `none` sends none, so its requests are the paper's design, key for key. `epoch` (a
    tag, `lib/sovereignty/drift.py`) makes the requests new samples in the cache; the items carry it."""
    prompts = sovereignty_prompts[sovereignty_prompts["lang"] == lang]
    items = [{**record, "model": model, "sample": sample, "condition": condition.name, "epoch": epoch}
             for condition in conditions for sample in range(samples) for record in prompts.to_dict("records")]
    systems = {condition.name: condition.system_prompt(lang) for condition in conditions}
    requests = [GenerationRequest.user(item["prompt"], trial=item["sample"], system=systems[item["condition"]],
                                       benchmark="sovereignty", lang=lang, prompt_set=item["prompt_set"],
                                       prompt_id=item["prompt_id"], condition=item["condition"]) for item in items]
    if epoch:
        requests = [replace(request, epoch=epoch) for request in requests]
    return items, requests
