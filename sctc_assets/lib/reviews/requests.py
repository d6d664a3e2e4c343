"""The model calls of one review partition (model × format), built in one place for `review_predictions` and for
`sctc plan`: the run settings (asset config, else the registry's `benchmarks.reviews`) and the requests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import pandas as pd

from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.reviews import pairing, prompts, source, varieties
from sctc_assets.lib.reviews.declared import declared_varieties
from sctc_assets.lib.reviews.prompts import selected_prompts


@dataclass(frozen=True)
class ReviewRunSettings:
    max_pairs: int | None
    translation_control: bool
    system_role: bool


def run_settings(max_pairs: int | None, translation_control: bool | None,
                 registry: Mapping[str, Any] | None) -> ReviewRunSettings:
    """Explicit values, else the model's registry `benchmarks.reviews` settings, else every pair, with the
    converted versions, with a system message."""
    registry = dict(registry or {})
    pairs = max_pairs if max_pairs is not None else registry.get("max_pairs")
    if pairs is not None and (isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1):
        raise ValueError(f"max_pairs must be a whole number of at least 1, got {pairs!r}")
    control = translation_control if translation_control is not None else bool(registry.get("translation_control", True))
    return ReviewRunSettings(pairs, control, bool(registry.get("system_role", True)))


def review_requests(review_prompts: pd.DataFrame, fmt: str,
                    settings: ReviewRunSettings) -> tuple[pd.DataFrame, list[GenerationRequest]]:
    """The prompt rows of one format that a model answers, and their requests in the same order (models without a
    system role get the user message alone)."""
    selected = selected_prompts(review_prompts, fmt, max_pairs=settings.max_pairs,
                                translation_control=settings.translation_control)
    requests = [GenerationRequest.user(record["prompt"], system=record["system"] if settings.system_role else None,
                                       benchmark="reviews", format=fmt, review_id=record["review_id"],
                                       version=record["version"])
                for record in selected.to_dict("records")]
    return selected, requests


def review_prompt_table(config: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Every review prompt, as `raw_reviews` → `review_varieties` → `review_pairs` → `review_prompts` build them
    under `config` (their op config by asset name, as the spec's `config` makes it)."""
    raw = config.get("raw_reviews", {})
    if raw.get("hf_dataset"):
        frame, origin = source.read_hf_dataset(raw["hf_dataset"], split=raw.get("hf_split", "train"),
                                               config_name=raw.get("hf_config"))
    else:
        frame, origin = source.read_file(raw.get("location") or source.default_location())
    reviews = source.canonical_reviews(frame, origin, raw.get("columns") or {})
    chosen = config.get("review_varieties", {})
    declared = declared_varieties(chosen.get("varieties_file"))
    table = varieties.review_varieties(reviews, chosen.get("varieties"), chosen.get("pair"), declared)
    pairs = pairing.pair_reviews(table, seed=config.get("review_pairs", {}).get("seed", 0),
                                 pair=varieties.variety_pair(config.get("review_pairs", {}).get("pair"), declared))
    return prompts.review_prompts(pairs, table, seed=config.get("review_prompts", {}).get("seed", 0),
                                  declared=declared)
