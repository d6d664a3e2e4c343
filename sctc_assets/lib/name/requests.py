"""The model calls of one name partition, built in one place for `name_responses` and for `sctc plan`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.name.candidates import EXPERIMENTS, RunSettings
from sctc_assets.lib.name.prompts import shown_names
from sctc_assets.lib.name.variants import PAPER_VARIANT, REPHRASED_VARIANTS, render_variant
from sctc_assets.lib.sctc_upstream import name_candidate_file


def prompts_to_ask(name_prompts: pd.DataFrame, lang: str, settings: RunSettings, *,
                   replay: bool) -> tuple[pd.DataFrame, list[str]]:
    """The prompt rows one model answers, and notes. A replay answers the authors' rows even where the upstream
    copy lacks their lists (its prompt is then unknown)."""
    frames, notes = [], []

    def equal(column: str, value: str) -> np.ndarray:
        return (in_lang[column] == value).to_numpy(dtype=bool, na_value=False)

    # Rows are chosen on the key columns and the frame filtered once per experiment (each filter copies the
    # prompts, a take that costs most on the chunked columns of a table read from Parquet).
    in_lang = name_prompts[name_prompts["lang"] == lang]
    upstream = equal("list_source", "upstream")
    for name in settings.experiments:
        spec = EXPERIMENTS[name]
        in_experiment = equal("experiment", name)
        published = bool((in_experiment & upstream).any())
        source = "upstream" if replay else settings.list_source or ("upstream" if published else "generated")
        if replay and settings.list_source == "generated":
            notes.append(f"{name}: a replay only has answers to the authors' lists; list_source 'generated' ignored")
        chosen = in_lang[in_experiment & (upstream if source == "upstream" else equal("list_source", source))]
        if chosen.empty and source == "upstream":
            if not replay:
                raise ValueError(f"name_responses: no authors' lists for {name} "
                                 f"({name_candidate_file(spec.prompt_id)} is missing); use list_source 'generated'")
            notes.append(f"{name}: prompts unknown ({name_candidate_file(spec.prompt_id)} is missing)")
            lists, shuffles = settings.counts(name)
            grid = pd.MultiIndex.from_product([range(lists), range(shuffles)], names=["list_id", "shuffle"])
            chosen = grid.to_frame(index=False).assign(
                experiment=name, list_source="upstream", lang=lang, prompt=None,
                row=lambda frame: frame["list_id"] * spec.shuffles + frame["shuffle"])
        if not chosen["row"].is_monotonic_increasing:  # a stable sort of sorted rows changes nothing
            chosen = chosen.sort_values("row", kind="stable")
        # Rows that repeat a prompt are separate samples, as in the paper: the occurrence number over the full
        # design keeps them apart, and stays the same whatever --name-lists/--name-shuffles select.
        chosen = chosen.assign(occurrence=chosen.groupby("prompt", dropna=False).cumcount())
        if settings.lists is not None:
            chosen = chosen[chosen["list_id"] < settings.lists]
        if settings.shuffles is not None:
            chosen = chosen[chosen["shuffle"] < settings.shuffles]
        frames.append(chosen)
    selected = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=name_prompts.columns)
    return selected.reset_index(drop=True), notes


def variant_rows(selected: pd.DataFrame, templates: dict[tuple[str, int], str] | None, lang: str) -> pd.DataFrame:
    """The rows `prompts_to_ask` selected with their `prompt_variant`: variant 1 as they are and, with `templates`
    (a variants file's), once more for variants 2 and 3 with the same candidates in the same order."""
    frames = [selected.assign(prompt_variant=PAPER_VARIANT)]
    for variant in REPHRASED_VARIANTS if templates else ():
        prompts = [render_variant(templates, lang, variant, shown_names(prompt, where=f"{name} row {row}"),
                                  EXPERIMENTS[name].separator)
                   for prompt, name, row in zip(selected["prompt"], selected["experiment"], selected["row"])]
        frames.append(selected.assign(prompt_variant=variant, prompt=prompts))
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def requests_of(selected: pd.DataFrame, lang: str) -> list[GenerationRequest]:
    """The request of each row `prompts_to_ask` selected, in order: a repeated prompt's occurrence is its trial."""
    return [GenerationRequest.user(prompt if isinstance(prompt, str) else "", trial=int(repeat), benchmark="name",
                                   lang=lang, prompt_id=EXPERIMENTS[name].prompt_id, row=int(row))
            for prompt, repeat, name, row in zip(selected["prompt"].tolist(), selected["occurrence"].tolist(),
                                                 selected["experiment"].tolist(), selected["row"].tolist())]


def name_requests(name_prompts: pd.DataFrame, lang: str, settings: RunSettings, *,
                  replay: bool) -> tuple[pd.DataFrame, list[str], list[GenerationRequest]]:
    """`prompts_to_ask` and `requests_of` its rows."""
    selected, notes = prompts_to_ask(name_prompts, lang, settings, replay=replay)
    return selected, notes, requests_of(selected, lang)
