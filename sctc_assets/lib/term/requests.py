"""The model calls of one term partition, built in one place for `term_responses` and for `sctc plan`."""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from sctc_assets.lib.generation import GenerationRequest


def term_requests(term_prompts: pd.DataFrame, lang: str, trials: int,
                  variants: Sequence[int]) -> tuple[pd.DataFrame, list[GenerationRequest]]:
    """The prompt rows one model answers in `lang` (the first `trials` trials of the chosen variants) and their
    requests, in the same order; `trial` keeps repeated samples of one prompt apart in the cache."""
    selected = term_prompts[(term_prompts["lang"] == lang) & term_prompts["prompt_variant"].isin(list(variants))
                            & (term_prompts["trial"] < trials)].reset_index(drop=True)
    requests = [
        GenerationRequest.user(prompt, trial=trial, benchmark="term", lang=lang, prompt_variant=variant, row=row)
        for prompt, trial, variant, row in zip(selected["prompt"].tolist(), selected["trial"].tolist(),
                                               selected["prompt_variant"].tolist(), selected["row"].tolist())
    ]
    return selected, requests


def variety_requests(prompts: pd.DataFrame, variety: str, trials: int, variants: Sequence[int], *,
                     benchmark: str) -> tuple[pd.DataFrame, list[GenerationRequest]]:
    """An item set's prompt rows one model answers in one prompting `variety` (`variety_prompts` layout) and their
    requests, as `term_requests` selects the default set's."""
    selected = prompts[(prompts["variety"] == variety) & prompts["prompt_variant"].isin(list(variants))
                       & (prompts["trial"] < trials)].reset_index(drop=True)
    requests = [
        GenerationRequest.user(prompt, trial=trial, benchmark=benchmark, lang=variety, prompt_variant=variant, row=row)
        for prompt, trial, variant, row in zip(selected["prompt"].tolist(), selected["trial"].tolist(),
                                               selected["prompt_variant"].tolist(), selected["row"].tolist())
    ]
    return selected, requests
