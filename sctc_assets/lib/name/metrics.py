"""Metric tables of the regional name task, computed from the long selection table.

Definitions follow the authors' scripts (see ../shared/reference/SCTC_SCRIPT_DEFINITIONS.md, Task 2): a valid
answer selects a listed name; Mainland rate = Mainland selections / valid answers (0 when none is valid).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from sctc_assets.lib import stats
from sctc_assets.lib.frames import empty_table
from sctc_assets.lib.name.candidates import LIST_KEYS
from sctc_assets.lib.name.extraction import EMPTY, INVALID, MULTIPLE, OUT_OF_LIST, REFUSAL
from sctc_assets.lib.varieties import MAINLAND, TAIWAN

RATE_KEYS = ["model", "lang", "experiment", "extraction_source", "candidate_scope"]
RATE_COLUMNS = ["model", "lang", "experiment", "extraction_source", "n", "n_valid", "valid_rate", "mainland_rate",
                "candidate_scope", "n_mainland", "n_taiwan", "valid_ci_low", "valid_ci_high", "mainland_ci_low",
                "mainland_ci_high", "z", "p_one_sided", "p_two_sided", "z_scripts", "p_one_sided_scripts", "n_multiple",
                "n_out_of_list", "n_other_script", "n_refusal", "n_empty", "n_invalid_unclassified", "n_judge_error"]
STATUS_COLUMNS = {MULTIPLE: "n_multiple", OUT_OF_LIST: "n_out_of_list", REFUSAL: "n_refusal", EMPTY: "n_empty",
                  INVALID: "n_invalid_unclassified"}


def share_tests(successes: int, n: int, value: float, alternative: str, *, null_se: bool = False) -> dict[str, float]:
    """z-test of successes/n against `value`: one-sided as the scripts (`alternative`) and two-sided; with the
    scripts' sample standard error unless `null_se` (see `stats.one_sample_proportion_ztest`)."""
    z, p_one = stats.one_sample_proportion_ztest(successes, n, value=value, alternative=alternative, null_se=null_se)
    _, p_two = stats.one_sample_proportion_ztest(successes, n, value=value, null_se=null_se)
    return {"z": z, "p_one_sided": p_one, "p_two_sided": p_two}


def choice_rates(selections: pd.DataFrame) -> pd.DataFrame:
    """Valid rate and Mainland rate per model, lang, experiment and extraction source, with Wilson 95 % CIs and
    the z-test of the Mainland share against 50 % (one-sided "smaller", as tab_24.py, and two-sided) with the
    standard error under the null, so that a handful of valid answers is not "significant"; `z_scripts` and
    `p_one_sided_scripts` are the scripts' form (sample standard error: p̂ = 0 or 1 gives p = 0 or 1)."""
    if selections.empty:
        return pd.DataFrame(columns=RATE_COLUMNS)
    records = []
    for keys, group in selections.groupby(RATE_KEYS, dropna=False, sort=True):
        n, n_mainland = len(group), int((group["region"] == "mainland").sum())
        n_taiwan = int((group["region"] == "taiwan").sum())
        n_valid = n_mainland + n_taiwan
        statuses = group["status"].value_counts()
        record = dict(zip(RATE_KEYS, keys))
        # Without a valid answer fig_3.py divides by 1e-5 instead, which gives a Mainland rate of 0.
        record.update(
            n=n, n_valid=n_valid, valid_rate=n_valid / n, mainland_rate=n_mainland / n_valid if n_valid else 0.0,
            n_mainland=n_mainland, n_taiwan=n_taiwan, n_other_script=int(group["script_variant_of"].notna().sum()),
            n_judge_error=int(group["rule"].astype(str).str.startswith("judge_error").sum()),
            **{column: int(statuses.get(status, 0)) for status, column in STATUS_COLUMNS.items()})
        record["valid_ci_low"], record["valid_ci_high"] = stats.wilson_ci(n_valid, n)
        record["mainland_ci_low"], record["mainland_ci_high"] = stats.wilson_ci(n_mainland, n_valid)
        record.update(share_tests(n_mainland, n_valid, 0.5, "smaller", null_se=True))
        scripts = share_tests(n_mainland, n_valid, 0.5, "smaller")
        record.update(z_scripts=scripts["z"], p_one_sided_scripts=scripts["p_one_sided"])
        records.append(record)
    return pd.DataFrame(records)[RATE_COLUMNS]


def choice_tests(rates: pd.DataFrame) -> pd.DataFrame:
    """`choice_rates` of every model with Benjamini–Hochberg adjusted p-values across models × languages, per
    experiment and extraction source; stars from the adjusted p-values."""
    if rates.empty:
        return rates.assign(p_one_sided_bh=[], p_two_sided_bh=[], sig_one_sided_bh=[], sig_two_sided_bh=[])
    frames = []
    for _, family in rates.groupby(["experiment", "extraction_source"], sort=True):
        family = family.copy()
        for side in ("one_sided", "two_sided"):
            family[f"p_{side}_bh"] = stats.bh_adjust(family[f"p_{side}"])
            family[f"sig_{side}_bh"] = [stats.sig_stars(p) for p in family[f"p_{side}_bh"]]
        frames.append(family)
    return pd.concat(frames, ignore_index=True).sort_values(["experiment", "extraction_source", "model", "lang"]) \
        .reset_index(drop=True)


def _asked_lists(group: pd.DataFrame, lists: pd.DataFrame) -> pd.DataFrame:
    """The list rows of the answers in a selection group: every row of the upstream file for a complete replay
    (as tab_2.py counts appearances over the whole candidate file), only the rows answered for a reduced or
    truncated run (answers that failed, and so have no selection, are not counted)."""
    asked = group[LIST_KEYS].drop_duplicates()
    return lists.merge(asked, on=LIST_KEYS, how="inner")


def _asked_rows(lists: pd.DataFrame):
    """`asked(group, experiment, list_source)`: which rows of `lists` `_asked_lists` keeps for a selection group of
    that (never missing) experiment and list source, as a mask over `lists` (no copy). Only the group's list rows
    need matching, among the rows of that pair (positions found once per table, not per group); a missing row
    number matches a missing one, as in the merge."""
    positions_of = lists.groupby(["experiment", "list_source"], sort=False).indices
    list_rows = lists["row"]

    def asked(group: pd.DataFrame, experiment: str, list_source: str) -> np.ndarray:
        mask = np.zeros(len(lists), dtype=bool)
        positions = positions_of.get((experiment, list_source))
        if positions is not None:
            mask[positions[list_rows.iloc[positions].isin(group["row"].unique()).to_numpy()]] = True
        return mask

    return asked


TOP_COLUMNS = ["model", "lang", "experiment", "extraction_source", "rank", "name", "region", "selections",
               "appearances", "normalized_frequency"]


def selection_frequencies(selections: pd.DataFrame, lists: pd.DataFrame) -> tuple[pd.DataFrame, list[tuple]]:
    """Every selected name with its normalised frequency (selections ÷ appearances in the lists asked) and rank,
    region M/T/NA as in tab_2.py (Tables 2/21), per lang, experiment and extraction source. Also returns the
    (experiment, list_source) groups skipped for lack of candidate lists."""
    frames, skipped = [], []
    if selections.empty:
        return pd.DataFrame(columns=TOP_COLUMNS), skipped
    keys = ["model", "lang", "experiment", "list_source", "extraction_source"]
    counted: dict[bytes, tuple[Counter, set, set]] = {}  # the extraction sources of one answer set ask the same lists
    columns = {name: lists[name].to_numpy(dtype=object) for name in ("candidates", "mainland_names", "taiwan_names")}
    asked_rows = _asked_rows(lists)
    for (model, lang, experiment, list_source, source), group in selections.groupby(keys, sort=True):
        asked = asked_rows(group, experiment, list_source)  # the rows `_asked_lists` keeps, as a mask over `lists`
        if not asked.any():
            skipped.append((experiment, list_source))
            continue
        key = asked.tobytes()
        if key not in counted:
            counted[key] = (Counter(name for names in columns["candidates"][asked] for name in names),
                            {name for names in columns["mainland_names"][asked] for name in names},
                            {name for names in columns["taiwan_names"][asked] for name in names})
        appearances, mainland, taiwan = counted[key]
        chosen = Counter(name for name in group["selected_name"].dropna() if name in appearances)
        frame = pd.DataFrame({"name": list(chosen), "selections": list(chosen.values())})
        if frame.empty:
            continue
        frame["appearances"] = frame["name"].map(appearances)
        frame["normalized_frequency"] = frame["selections"] / frame["appearances"]
        frame["region"] = [MAINLAND.tag if name in mainland else TAIWAN.tag if name in taiwan else "NA"
                           for name in frame["name"]]
        frame = frame.sort_values(["normalized_frequency", "name"], ascending=[False, True]).reset_index(drop=True)
        frame["rank"] = np.arange(1, len(frame) + 1)
        frames.append(frame.assign(model=model, lang=lang, experiment=experiment, extraction_source=source))
    table = pd.concat(frames, ignore_index=True)[TOP_COLUMNS] if frames else pd.DataFrame(columns=TOP_COLUMNS)
    return table, sorted(set(skipped))


GENDER_COLUMNS = ["model", "lang", "extraction_source", "table", "males_per_region", "side", "measure", "n",
                  "successes", "share", "null_value", "alternative", "z", "p_one_sided", "p_two_sided", "stars"]


def _gender_row(keys: dict, table: str, k: int | None, side: str, measure: str, successes: int, n: int,
                value: float, alternative: str, *, no_ns: bool = False) -> dict:
    tests = share_tests(successes, n, value, alternative) if n else {"z": np.nan, "p_one_sided": np.nan,
                                                                    "p_two_sided": np.nan}
    return {**keys, "table": table, "males_per_region": k, "side": side, "measure": measure, "n": n,
            "successes": successes, "share": successes / n if n else np.nan, "null_value": value,
            "alternative": alternative, **tests,
            "stars": stats.sig_stars(tests["p_one_sided"], no_ns=no_ns) if n else "-"}


def male_share_table(selections: pd.DataFrame, names: pd.DataFrame) -> pd.DataFrame:
    """Table 30: share of male names among valid selections of the gender-balanced lists, tested against 50 %
    (one-sided "larger", as tab_30.py)."""
    if selections.empty:
        return _gender_frame([])
    male = set(names.loc[names["gender"] == "male", "name"])
    chosen = selections[selections["experiment"] == "gender_balanced"]
    records = []
    for (model, lang, source), group in chosen.groupby(["model", "lang", "extraction_source"], sort=True):
        valid = group.loc[group["region"].notna(), "selected_name"]
        records.append(_gender_row({"model": model, "lang": lang, "extraction_source": source}, "30", None, "both",
                                   "male_share", int(valid.isin(male).sum()), len(valid), 0.5, "larger"))
    return _gender_frame(records)


def _gender_frame(records: list[dict]) -> pd.DataFrame:
    # Table 30's rows have no `males_per_region`: a nullable count.
    return pd.DataFrame(records, columns=GENDER_COLUMNS).astype({"males_per_region": "Int64", "n": "int64",
                                                                 "successes": "int64"})


def matched_gender_tables(selections: pd.DataFrame, lists: pd.DataFrame, names: pd.DataFrame,
                          males: Iterable[int] = (1, 2, 3)) -> pd.DataFrame:
    """Tables 24–29 (tab_24.py) on the popularity lists whose Mainland and Taiwanese halves hold k male names
    each: the Mainland share among valid selections against 50 % ("smaller"), and the male share among the
    Mainland and among the Taiwanese selections against k/10 ("larger", stars without NS)."""
    if selections.empty:
        return _gender_frame([])
    gender = dict(zip(names["name"], names["gender"]))
    chosen = selections[selections["experiment"] == "popularity"].merge(
        lists[LIST_KEYS + ["mainland_names", "taiwan_names"]], on=LIST_KEYS, how="inner")
    if chosen.empty:
        return _gender_frame([])
    chosen["males_mainland"] = [sum(gender.get(n) == "male" for n in names_) for names_ in chosen["mainland_names"]]
    chosen["males_taiwan"] = [sum(gender.get(n) == "male" for n in names_) for names_ in chosen["taiwan_names"]]
    records = []
    for (model, lang, source), group in chosen.groupby(["model", "lang", "extraction_source"], sort=True):
        keys = {"model": model, "lang": lang, "extraction_source": source}
        for k in males:
            subset = group[(group["males_mainland"] == k) & (group["males_taiwan"] == k)]
            n_mc, n_tw = int((subset["region"] == "mainland").sum()), int((subset["region"] == "taiwan").sum())
            records.append(_gender_row(keys, "24-26", k, "both", "mainland_share", n_mc, n_mc + n_tw, 0.5, "smaller"))
            for side in ("mainland", "taiwan"):
                picked = subset.loc[subset["region"] == side, "selected_name"].map(gender)
                records.append(_gender_row(keys, "27-29", k, side, "male_share", int((picked == "male").sum()),
                                           int(picked.isin(["male", "female"]).sum()), k / 10, "larger", no_ns=True))
    return _gender_frame(records)


STABILITY_COLUMNS = ["model", "lang", "source", "experiment", "shuffles", "n", "n_mainland", "n_taiwan",
                     "pct_mainland_of_all", "mainland_rate"]


def region_point(regions: pd.Series) -> dict:
    """Figure 6's value (Mainland selections ÷ all answers × 100, invalid ones included) and the Mainland rate."""
    n_mainland, n_taiwan = int((regions == "mainland").sum()), int((regions == "taiwan").sum())
    valid = n_mainland + n_taiwan
    return {"n": len(regions), "n_mainland": n_mainland, "n_taiwan": n_taiwan,
            "pct_mainland_of_all": n_mainland / len(regions) * 100 if len(regions) else np.nan,
            "mainland_rate": n_mainland / valid if valid else 0.0}


def shuffle_curve(selections: pd.DataFrame) -> pd.DataFrame:
    """For each selection group, the Figure 6 value using only the first k shuffles of every list, k = 1…S.

    Linear in the answers: counts per shuffle, then running sums over the shuffles (`region_point` of the answers
    with shuffle < k, for every k at once)."""
    if selections.empty:
        return pd.DataFrame(columns=STABILITY_COLUMNS)
    keys = ["model", "lang", "extraction_source", "experiment"]
    region = selections["region"]
    counted = pd.DataFrame({key: selections[key] for key in keys + ["shuffle"]}).assign(
        n=1, n_mainland=(region == "mainland").fillna(False).astype("int64").to_numpy(),
        n_taiwan=(region == "taiwan").fillna(False).astype("int64").to_numpy())
    per_shuffle = counted.groupby(keys + ["shuffle"], sort=True)[["n", "n_mainland", "n_taiwan"]].sum()
    frames = []
    for group_keys, group in per_shuffle.groupby(level=keys, sort=True):
        by_shuffle = group.droplevel(keys)
        last = int(by_shuffle.index.max())
        # Shuffles < 0 count from k = 1 on, as `group["shuffle"] < k` does.
        below = by_shuffle[by_shuffle.index < 0].sum()
        running = by_shuffle.reindex(range(0, last + 1), fill_value=0).cumsum() + below
        frame = pd.DataFrame(dict(zip(["model", "lang", "source", "experiment"], group_keys)),
                             index=range(len(running)))
        frame["shuffles"] = np.arange(1, last + 2)
        n, n_mainland, n_taiwan = (running[column].to_numpy(dtype="int64") for column in ("n", "n_mainland", "n_taiwan"))
        valid = n_mainland + n_taiwan
        with np.errstate(divide="ignore", invalid="ignore"):
            frame["n"], frame["n_mainland"], frame["n_taiwan"] = n, n_mainland, n_taiwan
            frame["pct_mainland_of_all"] = np.where(n > 0, n_mainland / np.where(n > 0, n, 1) * 100, np.nan)
            frame["mainland_rate"] = np.where(valid > 0, n_mainland / np.where(valid > 0, valid, 1), 0.0)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)[STABILITY_COLUMNS]


CORRELATION_COLUMNS = ["model", "lang", "experiment", "extraction_source", "n_names", "spearman_rho", "p",
                       "in_bh_family", "p_bh", "sig_bh", "count_source"]
TABLE22_CORPUS = "c4"


def table22_counts(corpus_name_counts: pd.DataFrame, upstream_counts: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The name counts Table 22 correlates with, and their source: the project's own c4 counts
    (`corpus_name_counts` rows with `count_source = project`) once every c4 shard is counted (`complete`), else
    the authors' c4 counts (`upstream_counts`)."""
    needed = {"count_source", "corpus", "complete", "name", "records_containing"}
    if not corpus_name_counts.empty and needed <= set(corpus_name_counts.columns):
        project = corpus_name_counts[(corpus_name_counts["count_source"] == "project")
                                     & (corpus_name_counts["corpus"] == TABLE22_CORPUS)]
        if not project.empty and project["complete"].fillna(False).astype(bool).all():
            return project[["name", "records_containing"]].reset_index(drop=True), "project"
    return upstream_counts, "upstream"


def popularity_correlation(frequencies: pd.DataFrame, corpus_counts: pd.DataFrame, names: pd.DataFrame,
                           exclude_from_bh: Iterable[str] = (), count_source: str = "upstream") -> pd.DataFrame:
    """Table 22 (tab_22.py): Spearman's ρ between the normalised selection frequency of the names selected at
    least once and their corpus counts (`name`, `records_containing`), BH-adjusted once across every model × lang
    of an experiment and extraction source (models in `exclude_from_bh` are reported but left out, as the paper
    leaves DeepSeek-R1 out). `count_source` says whose counts these are (`project`, `upstream`)."""
    if frequencies.empty:
        return empty_table(CORRELATION_COLUMNS, {"n_names": "int64", "spearman_rho": "float64", "p": "float64",
                                                 "in_bh_family": "boolean", "p_bh": "float64"})
    known = set(names["name"])
    count_of = dict(zip(corpus_counts["name"], corpus_counts["records_containing"])) if not corpus_counts.empty else {}
    records = []
    keys = ["model", "lang", "experiment", "extraction_source"]
    for group_keys, group in frequencies.groupby(keys, sort=True):
        group = group[group["name"].isin(known) & group["name"].isin(count_of)]
        x, y = group["normalized_frequency"].to_numpy(float), group["name"].map(count_of).to_numpy(float)
        rho, p = (np.nan, np.nan)
        if len(group) >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0:
            result = scipy_stats.spearmanr(x, y)
            rho, p = float(result.statistic), float(result.pvalue)
        records.append({**dict(zip(keys, group_keys)), "n_names": len(group), "spearman_rho": rho, "p": p})
    table = pd.DataFrame(records, columns=CORRELATION_COLUMNS[:7])
    table["in_bh_family"] = ~table["model"].isin(set(exclude_from_bh))
    table["p_bh"] = np.nan
    for _, family in table[table["in_bh_family"]].groupby(["experiment", "extraction_source"]):
        table.loc[family.index, "p_bh"] = stats.bh_adjust(family["p"])
    table["sig_bh"] = [stats.sig_stars(p) for p in table["p_bh"]]
    table["count_source"] = count_source
    return table[CORRELATION_COLUMNS]


PAIR_COLUMNS = ["model", "lang", "experiment", "extraction_source", "name", "selections", "appearances",
                "selection_rate", "n_answers", "pct_of_answers"]


def pair_selection_rates(selections: pd.DataFrame, lists: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Table 23 for any model and names: per lang, experiment and extraction source, each named candidate's
    selections, its appearances in the lists asked, `selection_rate` = selections ÷ appearances in percent (the
    paper's: 5 % is the chance rate of a name among 20), and its percentage of all answers. A name the lists
    asked never show has no rate (missing)."""
    rows = []
    if selections.empty or not names:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    candidates = lists["candidates"].to_numpy(dtype=object)
    asked_rows = _asked_rows(lists)
    keys = ["model", "lang", "experiment", "list_source", "extraction_source"]
    for (model, lang, experiment, list_source, source), group in selections.groupby(keys, sort=True):
        asked = asked_rows(group, experiment, list_source)
        shown = Counter(name for listed in candidates[asked] for name in listed if name in names)
        chosen = Counter(name for name in group["selected_name"].dropna() if name in names)
        for name in names:
            appearances = shown.get(name, 0)
            rows.append({"model": model, "lang": lang, "experiment": experiment, "extraction_source": source,
                         "name": name, "selections": chosen.get(name, 0), "appearances": appearances,
                         "selection_rate": 100 * chosen.get(name, 0) / appearances if appearances else np.nan,
                         "n_answers": len(group), "pct_of_answers": 100 * chosen.get(name, 0) / len(group)})
    table = pd.DataFrame(rows, columns=PAIR_COLUMNS)
    return table.astype({"selections": "int64", "appearances": "int64", "n_answers": "int64"})


VARIANT_RATE_COLUMNS = ["model", "lang", "experiment", "prompt_variant", "extraction_source", "n", "n_valid",
                        "valid_rate", "mainland_rate", "n_mainland", "n_taiwan"]
VARIANT_MEASURES = ("valid_rate", "mainland_rate")
VARIANT_CORRELATION_COLUMNS = ["experiment", "comparison", "measure", "n_points", "pearson_r", "p_value"]


def variant_rates(selections: pd.DataFrame) -> pd.DataFrame:
    """`choice_rates` per prompt variant (`selections` with a `prompt_variant` column): valid and Mainland rates
    per model, lang, experiment, variant and extraction source."""
    if selections.empty:
        return empty_table(VARIANT_RATE_COLUMNS, {"prompt_variant": "int64", "n": "int64", "n_valid": "int64",
                                                  "valid_rate": "float64", "mainland_rate": "float64",
                                                  "n_mainland": "int64", "n_taiwan": "int64"})
    frames = [choice_rates(frame).assign(prompt_variant=int(variant))
              for variant, frame in selections.groupby("prompt_variant", sort=True)]
    return pd.concat(frames, ignore_index=True)[VARIANT_RATE_COLUMNS]


def variant_correlations(rates: pd.DataFrame) -> pd.DataFrame:
    """Pearson correlations of the name rates between prompt variant 1 and each other variant, per experiment and
    extraction source, as the term benchmark's (paper Appendix B.1): one point per model × lang (the bars of Figure
    3), only those present on both sides."""
    rows = []
    if not rates.empty:
        for (experiment, source), frame in rates.groupby(["experiment", "extraction_source"], sort=True):
            base = frame[frame["prompt_variant"] == 1]
            for variant in sorted(set(frame["prompt_variant"]) - {1}):
                other = frame[frame["prompt_variant"] == variant]
                for row in stats.paired_correlations(base, other, ["model", "lang"], VARIANT_MEASURES):
                    rows.append({"experiment": experiment, "extraction_source": source,
                                 "comparison": f"variant_1_vs_{variant}", **row})
    columns = VARIANT_CORRELATION_COLUMNS[:1] + ["extraction_source"] + VARIANT_CORRELATION_COLUMNS[1:]
    return pd.DataFrame(rows, columns=columns).astype({"n_points": "int64"}) if rows else empty_table(
        columns, {"n_points": "int64", "pearson_r": "float64", "p_value": "float64"})
