"""The candidate lists of the name experiments, generated and the authors', as `name_candidate_lists` builds them
(and `sctc plan`, which needs the same prompts without running the asset)."""

from __future__ import annotations

from typing import Collection, Mapping, Sequence

import pandas as pd

from sctc_assets.lib.name.candidates import DEFAULT_SEED, EXPERIMENTS, generate_lists, upstream_lists
from sctc_assets.lib.name.names import NAME_COLUMNS, NAMES_FILE, parse_names
from sctc_assets.lib.name.prompts import build_prompts, shown_names
from sctc_assets.lib.sctc_upstream import NAME_CANDIDATE_COLUMNS, name_candidate_file, name_prompt_file
from sctc_assets.lib.upstream_source import UpstreamFileMissing, UpstreamSource
from sctc_assets.lib.varieties import SIMPLIFIED


def published_lists(source: UpstreamSource, name: str) -> pd.DataFrame:
    """The authors' lists of one experiment, in the order their Simplified prompt file shows them (when present)."""
    spec = EXPERIMENTS[name]
    relative = name_candidate_file(spec.prompt_id)
    raw = source.read_csv(relative, NAME_CANDIDATE_COLUMNS)
    prompt_file = name_prompt_file(SIMPLIFIED.code, spec.prompt_id)
    orders = None
    if source.exists(prompt_file):
        prompts = source.read_csv(prompt_file, ["prompt"])["prompt"].tolist()
        orders = [shown_names(prompt, where=f"{prompt_file} row {row}") for row, prompt in enumerate(prompts)]
    return upstream_lists(raw, name, source_name=relative, shown_orders=orders)


def candidate_lists(names: pd.DataFrame, source: UpstreamSource, *, seed: int = DEFAULT_SEED,
                    lists: Mapping[str, int] | None = None, shuffles: Mapping[str, int] | None = None,
                    experiments: Sequence[str] | None = None,
                    generated: Collection[str] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The generated lists of `experiments` (default: all), then the authors' where the upstream copy has them,
    and the upstream files found missing. Each experiment's lists depend on the seed and its own name only.
    `generated`: draw the generated lists only of these experiments and of those without the authors' lists
    (`sctc plan`, which needs only the lists a run asks; default: of every experiment, as the asset stores)."""
    chosen = list(experiments) if experiments is not None else list(EXPERIMENTS)
    lists, shuffles = dict(lists or {}), dict(shuffles or {})
    published, missing = [], []
    for name in chosen:
        try:
            published.append(published_lists(source, name))
        except UpstreamFileMissing as exc:
            missing.append(exc.relative_path)
            published.append(None)
    frames = [generate_lists(names, name, seed=seed, lists=lists.get(name), shuffles=shuffles.get(name))
              for name, authors in zip(chosen, published)
              if generated is None or name in generated or authors is None]
    return pd.concat(frames + [frame for frame in published if frame is not None], ignore_index=True), missing


def upstream_name_prompts(source: UpstreamSource, seed: int | None, experiments: Sequence[str],
                          generated: Collection[str] | None = None) -> pd.DataFrame:
    """The prompts of `experiments` only, as `name_candidate_lists` → `name_prompts` build them: each experiment's
    lists depend on the seed and its own name alone. The generated lists of the experiments outside `generated`
    (default: all are drawn) are drawn only where the upstream copy lacks the authors' lists, since only then does
    a run ask them."""
    names = parse_names(source.read_csv(NAMES_FILE, NAME_COLUMNS), source_name=NAMES_FILE)
    lists, _ = candidate_lists(names, source, seed=DEFAULT_SEED if seed is None else seed, experiments=experiments,
                               generated=generated)
    return build_prompts(lists)
