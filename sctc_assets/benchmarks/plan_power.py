"""The power lines `sctc plan` / `sctc run --dry-run` print under the term and name benchmarks (issue #15).

Before a run nothing is known of the answers, so the lines bound the design from both sides: with independent
trials (ICC 0) and with answers that repeat within a term or candidate list (ICC 1, where only the number of terms
or lists counts). The `term_power` asset gives the figure for the ICC and spread a run actually observed.
"""

from __future__ import annotations

from typing import Any

from sctc_assets.lib.varieties import SIMPLIFIED

BASELINE = 0.5  # the hardest case for a proportion: its variance is largest at 50 %
_HEAD = "power (80 %, α = 0.05, two-sided, rates near 50 %)"


def _pp(value: float) -> str:
    return "n/a" if value != value else f"{100 * value:.1f} pp"


def _grouped(lines_by_model: dict[str, str]) -> list[str]:
    """One line per distinct design, naming the models that share it."""
    models_by_line: dict[str, list[str]] = {}
    for model, line in lines_by_model.items():
        models_by_line.setdefault(line, []).append(model)
    return [f"{_HEAD}: {', '.join(models)}: {line}" for line, models in models_by_line.items()]


def _first_partitions(design: Any) -> dict[str, Any]:
    """Each model's Simplified Chinese partition (every language of a model has the same design)."""
    first: dict[str, Any] = {}
    for partition in design.partitions:
        if partition.partition == SIMPLIFIED.code and not partition.selected.empty:
            first.setdefault(partition.model, partition.selected)
    return first


def term_power_lines(design: Any) -> list[str]:
    """The smallest S − T difference in the correct rate the design can detect, per model."""
    from sctc_assets.lib import power  # statsmodels: only when a plan is printed
    lines: dict[str, str] = {}
    for model, selected in _first_partitions(design).items():
        per_variant = selected.groupby("prompt_variant").agg(terms=("term_id", "nunique"), trials=("trial", "nunique"))
        terms, trials = int(per_variant["terms"].min()), int(per_variant["trials"].max())
        independent = power.mde_two_proportions(terms, trials, 0.0, BASELINE)
        repeated = power.mde_two_proportions(terms, trials, 1.0, BASELINE)
        lines[model] = (
            f"{terms} terms × {trials} trial(s) per script and prompt variant: S − T detectable from "
            f"{_pp(independent)} (independent trials) to {_pp(repeated)} (answers that repeat within a term; more "
            "trials cannot lower this, more terms can)")
    return _grouped(lines)


def name_power_lines(design: Any) -> list[str]:
    """The smallest departure of the Mainland share from 50 % the design can detect, per model and experiment."""
    from sctc_assets.lib import power
    lines: dict[str, str] = {}
    for model, selected in _first_partitions(design).items():
        parts = []
        for experiment, rows in selected.groupby("experiment", sort=False):
            lists = int(rows["list_id"].nunique())
            shuffles = len(rows) / max(lists, 1)
            parts.append(f"{experiment} {lists} lists × {shuffles:g} shuffles: "
                         f"{_pp(power.mde_share(lists, shuffles, 0.0))}–{_pp(power.mde_share(lists, shuffles, 1.0))}")
        lines[model] = ("Mainland share vs 50 % detectable per language (independent shuffles – answers "
                                  "that repeat within a list): " + "; ".join(parts))
    return _grouped(lines)
