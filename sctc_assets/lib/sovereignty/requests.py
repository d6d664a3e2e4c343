"""The model calls of one sovereignty partition, built in one place for `sovereignty_responses` and `sctc plan`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from sctc_assets.lib.generation import GenerationRequest


def sovereignty_requests(sovereignty_prompts: pd.DataFrame, model: str, lang: str, samples: int,
                         epoch: str | None = None) -> tuple[list[dict[str, Any]], list[GenerationRequest]]:
    """One item per (sample, prompt) of `lang`, sample-major, and its request; the sample index is the trial.
    `epoch` (a tag, `lib/sovereignty/drift.py`) makes the requests new samples in the cache; the items carry it."""
    prompts = sovereignty_prompts[sovereignty_prompts["lang"] == lang]
    items = [{**record, "model": model, "sample": sample, "epoch": epoch}
             for sample in range(samples) for record in prompts.to_dict("records")]
    requests = [GenerationRequest.user(item["prompt"], trial=item["sample"], benchmark="sovereignty", lang=lang,
                                       prompt_set=item["prompt_set"], prompt_id=item["prompt_id"]) for item in items]
    if epoch:
        requests = [replace(request, epoch=epoch) for request in requests]
    return items, requests
