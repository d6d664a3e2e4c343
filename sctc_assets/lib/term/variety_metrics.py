"""Metric tables of the term task over any item set and any prompting varieties (pure Python, no Dagster).

Input: the label table L of an item set (every partition of one or more models): model, label_source (`rules`,
`judge`; missing: `rules`), variety (zh-HK …), region
(the prompted variety's), prompt_variant, concept_id, trial, outcome (`ok`/`refusal`), label
(`correct`/`misaligned`/`incorrect`; missing for a concept not asked in that variety: those rows are dropped),
regions_found (the regions whose forms the answer holds, joined by `,`; it may name the prompted region) and
definition_source (`""`/missing: written by the set's source, `model:<key>`: drafted by a model).

The tables:
- `by_concept`: label counts per model × variety × prompt variant × concept, and which other regions the misaligned
  answers gave (`misaligned_regions`, a JSON object region → answers);
- `variety_rates`: correct, misaligned, incorrect and `misaligned:<region>` shares with Wilson 95 % intervals, for
  all concepts and, when any definition was written by a model, for the source-written and the model-written ones
  apart (as the paper's Figure 5 leaves out its 22 GPT-written definitions);
- `variety_region_matrix`: prompted variety × answered region (every region of the set, and `none`);
- `variety_contrasts`: every pair of varieties with the concept as the unit (paired t, Wilcoxon), BH-adjusted
  across the pairs and models of each prompt variant and measure;
- `variety_power`: what those paired designs can detect, and how many concepts a 5 or 10 pp effect needs.

Every table keeps the label sources apart: `label_source` is one of its keys, and the contrasts' BH family is one
label source's.

Counting rules: `misaligned:<region>` and `misaligned_regions` count the answers labelled misaligned that hold a form
of that (other) region, an answer holding several regions' forms counting for each; so each is at most the
misaligned count, and their sum may exceed it. In the matrix an answer counts for every region whose form it holds
(`regions_found`) and for its prompted region also when it is labelled correct (a correct answer holds a prompted
region's form); `none` counts the answers holding no region's form, refusals included.
"""

from __future__ import annotations

import json
import math
from itertools import combinations
from typing import Sequence

import numpy as np
import pandas as pd

from sctc_assets.lib import power, robust, stats

LABELS = ("correct", "misaligned", "incorrect")
MEASURES = ("correct", "misaligned")  # the shares the contrasts and the power compare
MISALIGNED_PREFIX = "misaligned:"
NONE = "none"
ALL, SOURCE, MODEL = "all", "source", "model"
MODEL_SOURCE_PREFIX = "model:"
EFFECTS_PP = (5, 10)
CI_METHOD = "paired t over concepts (95 %)"

RULES = "rules"  # the label source of labels without a `label_source` column
CONCEPT_KEYS = ["model", "label_source", "variety", "prompt_variant", "concept_id"]
BY_CONCEPT_COLUMNS = [*CONCEPT_KEYS[:4], "region", "concept_id", "definition_source", "n_trials", "n_correct",
                      "n_misaligned", "n_incorrect", "n_refusal", "misaligned_regions"]
RATE_COLUMNS = ["model", "label_source", "variety", "region", "prompt_variant", "definitions", "measure", "n", "k",
                "pct", "ci_low", "ci_high"]
MATRIX_COLUMNS = ["model", "label_source", "prompt_variant", "variety", "region", "answered_region", "n_answers", "k",
                  "pct"]
CONTRAST_COLUMNS = ["model", "label_source", "prompt_variant", "measure", "variety_a", "variety_b", "region_a",
                    "region_b", "n_concepts", "pct_a", "pct_b", "diff_pct_points", "ci_low", "ci_high", "ci_method",
                    "sd_concept_diff", "paired_t", "paired_t_p", "wilcoxon", "wilcoxon_p", "paired_t_p_bh",
                    "wilcoxon_p_bh", "sig_paired_t_bh", "sig_wilcoxon_bh"]
POWER_COLUMNS = ["model", "label_source", "prompt_variant", "measure", "variety_a", "variety_b", "n_concepts",
                 "sd_concept_diff", "mde_pct_points", *(f"concepts_needed_{effect}pp" for effect in EFFECTS_PP), "note"]
_INT = {"prompt_variant", "n_trials", "n_correct", "n_misaligned", "n_incorrect", "n_refusal", "n", "k",
        "n_answers", "n_concepts"}
_FLOAT = {"pct", "ci_low", "ci_high", "pct_a", "pct_b", "diff_pct_points", "sd_concept_diff", "paired_t",
          "paired_t_p", "wilcoxon", "wilcoxon_p", "paired_t_p_bh", "wilcoxon_p_bh", "mde_pct_points",
          *(f"concepts_needed_{effect}pp" for effect in EFFECTS_PP)}


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype="int64" if column in _INT else "float64" if column in _FLOAT
                                           else object) for column in columns})


def _in_order(values: pd.Series) -> list:
    """The distinct values in the order they first appear."""
    return list(dict.fromkeys(values.tolist()))


def _source(values: pd.Series) -> pd.Series:
    """definition_source with missing as ""."""
    return values.where(values.notna(), "").astype(str) if len(values) else values.astype(object)


def is_model_written(definition_source: pd.Series) -> pd.Series:
    return _source(definition_source).str.startswith(MODEL_SOURCE_PREFIX)


def _asked(labels: pd.DataFrame) -> pd.DataFrame:
    """The answers that count: a label present (a concept not asked in a variety has none)."""
    asked = labels[labels["label"].notna()].reset_index(drop=True)
    asked["prompt_variant"] = asked["prompt_variant"].astype("int64")
    asked["concept_id"] = asked["concept_id"].astype(str)
    asked["definition_source"] = _source(asked["definition_source"]) if "definition_source" in asked.columns \
        else ""
    asked["regions_found"] = asked["regions_found"].where(asked["regions_found"].notna(), "").astype(str)
    asked["label_source"] = asked["label_source"].where(asked["label_source"].notna(), RULES).astype(str) \
        if "label_source" in asked.columns else RULES
    return asked


def _found_pairs(asked: pd.DataFrame) -> pd.DataFrame:
    """One row per (answer, region whose form it holds): the answer's position in `asked` and the `found` region.
    Each distinct `regions_found` text is split once."""
    codes, uniques = pd.factorize(asked["regions_found"])
    split = [(code, region.strip()) for code, text in enumerate(uniques) for region in str(text).split(",")
             if region.strip()]
    if not split:
        return pd.DataFrame({"answer": pd.Series(dtype="int64"), "found": pd.Series(dtype=object)})
    per_text = pd.DataFrame(split, columns=["code", "found"])
    answers = pd.DataFrame({"answer": np.arange(len(asked)), "code": codes})
    return answers.merge(per_text, on="code")[["answer", "found"]]


def _misaligned_to(asked: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """(answer position, other region) of every misaligned answer holding that other region's form."""
    if pairs.empty:
        return pairs
    answer = pairs["answer"].to_numpy()
    keep = (asked["label"].to_numpy()[answer] == "misaligned") & \
        (asked["region"].to_numpy()[answer] != pairs["found"].to_numpy())
    return pairs[keep].reset_index(drop=True)


def _regions_seen(asked: pd.DataFrame, pairs: pd.DataFrame) -> list[str]:
    """Every region the table names: the prompted ones, then those only found in answers."""
    return list(dict.fromkeys([*_in_order(asked["region"]), *_in_order(pairs["found"])]))


def by_concept(labels: pd.DataFrame) -> pd.DataFrame:
    """Per model × label source × variety × prompt variant × concept: region, definition_source ("" for the
    source's), n_trials, n_correct, n_misaligned, n_incorrect, n_refusal (of the incorrect) and `misaligned_regions`
    (JSON object: other region → misaligned answers holding its form)."""
    asked = _asked(labels)
    if asked.empty:
        return _empty(BY_CONCEPT_COLUMNS)
    indicators = pd.DataFrame({f"n_{label}": (asked["label"] == label).astype("int64") for label in LABELS})
    indicators["n_refusal"] = (asked["outcome"] == "refusal").astype("int64") if "outcome" in asked.columns else 0
    table = indicators.groupby([asked[key] for key in CONCEPT_KEYS]).sum()
    table["n_trials"] = table[[f"n_{label}" for label in LABELS]].sum(axis=1)
    first = asked.groupby(CONCEPT_KEYS)[["region", "definition_source"]].first()
    table = table.join(first)
    misaligned = _misaligned_to(asked, _found_pairs(asked))
    mapping: dict[tuple, str] = {}
    if not misaligned.empty:
        keyed = asked.loc[misaligned["answer"], CONCEPT_KEYS].reset_index(drop=True)
        keyed["found"] = misaligned["found"]
        per_region = keyed.groupby([*CONCEPT_KEYS, "found"], sort=False).size()
        grouped: dict[tuple, dict[str, int]] = {}
        for (*key, found), count in per_region.items():
            grouped.setdefault(tuple(key), {})[found] = int(count)
        mapping = {key: json.dumps(value, sort_keys=True, ensure_ascii=False) for key, value in grouped.items()}
    table["misaligned_regions"] = [mapping.get(key, "{}") for key in table.index]
    table = table.reset_index()
    for column in ("n_trials", "n_correct", "n_misaligned", "n_incorrect", "n_refusal", "prompt_variant"):
        table[column] = table[column].astype("int64")
    return _in_variety_order(table[BY_CONCEPT_COLUMNS], asked,
                             ["model", "label_source", "prompt_variant", "variety", "concept_id"])


def _in_variety_order(table: pd.DataFrame, asked: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Sorted by `keys`, the varieties and the label sources in the order they first appear in the labels (not
    alphabetically)."""
    orders = _orders(asked)
    return table.sort_values(keys, key=lambda column: column.map(orders[column.name]) if column.name in orders
                             else column, kind="stable").reset_index(drop=True)


def _orders(asked: pd.DataFrame) -> dict[str, dict]:
    """The varieties' and label sources' order of appearance (`rules` first), for sorting."""
    sources = _in_order(asked["label_source"])
    sources = [RULES] * (RULES in sources) + [source for source in sources if source != RULES]
    return {"variety": {variety: index for index, variety in enumerate(_in_order(asked["variety"]))},
            "label_source": {source: index for index, source in enumerate(sources)}}


def has_model_definitions(labels: pd.DataFrame) -> bool:
    return "definition_source" in labels.columns and bool(is_model_written(labels["definition_source"]).any())


def _wilson(k: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Wilson 95 % intervals (percent) of k/n, all rows in one call (statsmodels `proportion_confint`, as
    `stats.wilson_ci`); NaN where n is 0."""
    from statsmodels.stats.proportion import proportion_confint

    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    low, high = np.full(len(k), np.nan), np.full(len(k), np.nan)
    valid = n > 0
    if valid.any():
        low[valid], high[valid] = proportion_confint(k[valid], n[valid], alpha=0.05, method="wilson")
    return low * 100, high * 100


def variety_rates(labels: pd.DataFrame) -> pd.DataFrame:
    """Long table per model × label source × variety × prompt variant × definitions × measure: n answers, k with the
    measure, pct (0–100) and its Wilson 95 % interval (percent), and the variety's region.

    definitions: `all`, and `source` / `model` (the concepts whose definition the set's source / a model wrote) only
    when some definition was drafted by a model. Measures: correct, misaligned, incorrect and `misaligned:<region>`
    for every region the table names other than the variety's."""
    asked = _asked(labels)
    if asked.empty:
        return _empty(RATE_COLUMNS)
    pairs = _found_pairs(asked)
    regions = _regions_seen(asked, pairs)
    keys = ["model", "label_source", "variety", "prompt_variant"]
    indicators = pd.DataFrame({label: (asked["label"] == label).astype("int64") for label in LABELS},
                              index=asked.index)
    misaligned = _misaligned_to(asked, pairs)
    for code in regions:
        column = np.zeros(len(asked), dtype="int64")
        column[misaligned.loc[misaligned["found"] == code, "answer"].to_numpy()] = 1
        indicators[MISALIGNED_PREFIX + code] = column
    subsets = [(ALL, slice(None))]
    if has_model_definitions(asked):
        model_written = is_model_written(asked["definition_source"])
        subsets += [(SOURCE, ~model_written), (MODEL, model_written)]
    frames = []
    for name, chosen in subsets:
        part = asked.loc[chosen]
        if part.empty:
            continue
        grouped = indicators.loc[part.index].groupby([part[key] for key in keys], sort=False)
        sums = grouped.sum()
        sums["n"] = grouped.size()
        long = sums.reset_index().melt(id_vars=[*keys, "n"], var_name="measure", value_name="k")
        long["definitions"] = name
        frames.append(long)
    table = pd.concat(frames, ignore_index=True)
    region_of = asked.groupby("variety")["region"].first()
    table["region"] = table["variety"].map(region_of)
    own = table["measure"] == MISALIGNED_PREFIX + table["region"]
    table = table[~own].copy()
    table["n"], table["k"] = table["n"].astype("int64"), table["k"].astype("int64")
    table["pct"] = table["k"] / table["n"] * 100
    table["ci_low"], table["ci_high"] = _wilson(table["k"].to_numpy(), table["n"].to_numpy())
    measure_order = {measure: index for index, measure in
                     enumerate([*LABELS, *(MISALIGNED_PREFIX + code for code in regions)])}
    definitions_order = {ALL: 0, SOURCE: 1, MODEL: 2}
    orders = {"measure": measure_order, "definitions": definitions_order, **_orders(asked)}
    table = table.sort_values(["model", "label_source", "prompt_variant", "variety", "definitions", "measure"],
                              kind="stable",
                              key=lambda column: column.map(orders[column.name]) if column.name in orders
                              else column)
    return table[RATE_COLUMNS].reset_index(drop=True)


def variety_region_matrix(labels: pd.DataFrame, regions) -> pd.DataFrame:
    """Prompted variety × answered region: per model × label source × prompt variant × variety × answered region
    (each of `regions`, then `none`), the answers (`n_answers`, the denominator), those holding a form of that
    region (`k`) and their percentage. A form several regions share counts for each; `none`: no region's form
    (refusals too)."""
    regions = [str(code) for code in regions]
    asked = _asked(labels)
    if asked.empty:
        return _empty(MATRIX_COLUMNS)
    keys = ["model", "label_source", "prompt_variant", "variety"]
    pairs = _found_pairs(asked)
    correct = (asked["label"] == "correct").to_numpy()
    prompted = asked["region"].to_numpy()
    holds = pd.DataFrame(index=asked.index)
    for code in regions:
        column = (correct & (prompted == code)).astype("int64")
        column[pairs.loc[pairs["found"] == code, "answer"].to_numpy()] = 1
        holds[code] = column
    holds[NONE] = (holds[regions].sum(axis=1) == 0).astype("int64") if regions else 1
    grouped = holds.groupby([asked[key] for key in keys], sort=False)
    sums = grouped.sum()
    sums["n_answers"] = grouped.size()
    table = sums.reset_index().melt(id_vars=[*keys, "n_answers"], var_name="answered_region", value_name="k")
    table["region"] = table["variety"].map(asked.groupby("variety")["region"].first())
    table["n_answers"], table["k"] = table["n_answers"].astype("int64"), table["k"].astype("int64")
    table["pct"] = table["k"] / table["n_answers"] * 100
    answered_order = {code: index for index, code in enumerate([*regions, NONE])}
    orders = {"answered_region": answered_order, **_orders(asked)}
    table = table.sort_values(["model", "label_source", "prompt_variant", "variety", "answered_region"],
                              kind="stable",
                              key=lambda column: column.map(orders[column.name]) if column.name in orders
                              else column)
    return table[MATRIX_COLUMNS].reset_index(drop=True)


def _pairs(by_concept_table: pd.DataFrame, order: Sequence[str] = ()):
    """Per model × label source × prompt variant and each pair (A, B) of its varieties, A first in the table's
    order: the concepts asked in both, as (keys, a, b) with a and b indexed by concept_id in the same order."""
    table = by_concept_table.copy()
    table["concept_id"] = table["concept_id"].astype(str)
    if "label_source" not in table.columns:
        table["label_source"] = RULES
    sources = _orders(table)["label_source"]
    seen = _in_order(table["variety"])
    varieties = [variety for variety in order if variety in seen] + [v for v in seen if v not in order]
    groups = table.groupby(["model", "label_source", "prompt_variant"], sort=True)
    for (model, source, variant), frame in sorted(groups, key=lambda item: (item[0][0], sources[item[0][1]],
                                                                            item[0][2])):
        per_variety = {variety: block.set_index("concept_id") for variety, block in frame.groupby("variety")}
        present = [variety for variety in varieties if variety in per_variety]
        for first, second in combinations(present, 2):
            a, b = per_variety[first], per_variety[second]
            common = a.index.intersection(b.index).sort_values()
            yield (model, source, int(variant), first, second), a.loc[common], b.loc[common]


def _rates(block: pd.DataFrame, measure: str) -> np.ndarray:
    return (block[f"n_{measure}"] / block["n_trials"] * 100).to_numpy(dtype=float)


def variety_contrasts(by_concept_all_models: pd.DataFrame, order: Sequence[str] = ()) -> pd.DataFrame:
    """Every pair of varieties (A, B; A first as the table orders them) per model × label source × prompt variant ×
    measure (correct, misaligned), the concept as the unit: the concepts asked in both, the mean per-concept rates
    (pct_a, pct_b), A − B in percentage points with its 95 % paired-t interval, the paired t and Wilcoxon
    signed-rank tests over the concepts, and their p-values BH-adjusted across the family (every pair and model of
    one label source, prompt variant and measure) with significance stars. `order`: the varieties' order (the
    run's), which decides A and B; varieties it lacks follow in the table's order."""
    if by_concept_all_models.empty:
        return _empty(CONTRAST_COLUMNS)
    rows = []
    for (model, source, variant, first, second), a, b in _pairs(by_concept_all_models, order):
        region_a = a["region"].iloc[0] if len(a) else None
        region_b = b["region"].iloc[0] if len(b) else None
        for measure in MEASURES:
            paired = robust.paired_by_unit(_rates(a, measure), _rates(b, measure))
            rows.append({
                "model": model, "label_source": source, "prompt_variant": variant, "measure": measure,
                "variety_a": first, "variety_b": second, "region_a": region_a, "region_b": region_b,
                "n_concepts": paired["n_units"],
                "pct_a": paired["mean_first"], "pct_b": paired["mean_second"], "diff_pct_points": paired["diff"],
                "ci_low": paired["ci_low"], "ci_high": paired["ci_high"], "ci_method": CI_METHOD,
                "sd_concept_diff": paired["sd_diff"], "paired_t": paired["paired_t"],
                "paired_t_p": paired["paired_t_p"], "wilcoxon": paired["wilcoxon"],
                "wilcoxon_p": paired["wilcoxon_p"]})
    if not rows:
        return _empty(CONTRAST_COLUMNS)
    table = pd.DataFrame(rows)
    for test in ("paired_t", "wilcoxon"):
        table[f"{test}_p_bh"] = np.nan
        for _, index in table.groupby(["label_source", "prompt_variant", "measure"]).groups.items():
            table.loc[index, f"{test}_p_bh"] = stats.bh_adjust(table.loc[index, f"{test}_p"])
        table[f"sig_{test}_bh"] = [stats.sig_stars(p) for p in table[f"{test}_p_bh"]]
    # A pair without a concept in common has no region to name: the region columns are then missing.
    return table[CONTRAST_COLUMNS]


def variety_power(by_concept_all_models: pd.DataFrame, order: Sequence[str] = ()) -> pd.DataFrame:
    """Per model × label source × prompt variant × measure × pair of varieties: the paired design this run had (the
    concepts asked in both, the SD of the per-concept differences in percentage points), its minimum detectable
    difference (pp, 80 % power, α = .05 two-sided: `power.mde_paired`) and the concepts a 5 and a 10 pp difference
    need (`power.units_needed_paired`). Fewer than 2 concepts, or no variation in the differences (SD 0: the spread
    cannot be estimated from this run), give NaN and say so in `note`."""
    if by_concept_all_models.empty:
        return _empty(POWER_COLUMNS)
    rows = []
    for (model, source, variant, first, second), a, b in _pairs(by_concept_all_models, order):
        for measure in MEASURES:
            differences = _rates(a, measure) - _rates(b, measure)
            n = len(differences)
            sd = float(differences.std(ddof=1)) if n >= 2 else math.nan
            row = {"model": model, "label_source": source, "prompt_variant": variant, "measure": measure,
                   "variety_a": first, "variety_b": second, "n_concepts": n, "sd_concept_diff": sd,
                   "mde_pct_points": math.nan,
                   **{f"concepts_needed_{effect}pp": math.nan for effect in EFFECTS_PP}, "note": ""}
            if n < 2:
                row["note"] = f"{n} concept(s) asked in both varieties: at least 2 are needed"
            elif sd == 0:
                row["note"] = ("every concept differs by the same amount (SD 0): the spread of the differences "
                               "cannot be estimated from this run")
            else:
                row["mde_pct_points"] = power.mde_paired(n, sd)
                for effect in EFFECTS_PP:
                    row[f"concepts_needed_{effect}pp"] = power.units_needed_paired(float(effect), sd)
            rows.append(row)
    if not rows:
        return _empty(POWER_COLUMNS)
    return pd.DataFrame(rows)[POWER_COLUMNS]

