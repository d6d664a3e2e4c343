"""Preferences for specific characters (SC-TC-Bench Section 4.5, Appendix C.8, Tables 34–36).

Names that share a given name and a popularity decile within one region but differ in their last name are paired
(Table 34, grouped as the authors' `tab_34.py` does). For each pair a model is asked, in Simplified Chinese,
Traditional Chinese and English, to choose one of the two names, and the prompt ends with the fragment
`{'firstname': <given name>, 'lastname': ` so that the log-probability of each last name can be read off by teacher
forcing (the *conditioned* probability); the same fragment alone gives the *raw* probability. Table 35 is the share
of pairs whose raw and conditioned probabilities order the two last names the same way; Table 36 compares the raw
log-probabilities of Mainland and Taiwanese last names.

The authors' text calls these "names sharing a last name"; their script and data pair names sharing a *given*
name (秀英: 王秀英, 李秀英, …) and score the last names, which is what is done here.

The published prompt files write the given name of the first pair (秀英) into the fragment of every row, while the
published log-probabilities name each pair's own given name; `published_prompt` reproduces the files, `prompt`
(the default for scoring) uses the pair's given name as the paper describes.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np
import pandas as pd

from sctc_assets.lib import stats
from sctc_assets.lib.name.prompts import render
from sctc_assets.lib.sctc_upstream import name_prompt_file, name_response_file
from sctc_assets.lib.varieties import ENGLISH, SIMPLIFIED, TRADITIONAL, VARIETIES

LANGS = tuple(row.code for row in VARIETIES)
PROMPT_ID = 4
DEFAULT_SEED = 2025  # tab_34.py's default (it draws nothing; reduced runs here do)
GROUP_KEYS = ["given_name", "decile", "region"]
NAME_SEPARATOR = "，"
SENTENCE_END = {SIMPLIFIED.code: "。", TRADITIONAL.code: "。", ENGLISH.code: "."}

PAIR_COLUMNS = ["lang", "row", "pair", "order", "group", "given_name", "decile", "region", "name_1", "name_2",
                "last_name_1", "last_name_2", "shown", "prompt", "published_prompt"]
LOGPROB_COLUMNS = ["model", "source", "kind", "lang", "row", "position", "name", "given_name", "last_name", "region",
                   "prompt", "logprob", "cached"]


def prompt_file(lang: str) -> str:
    return name_prompt_file(lang, PROMPT_ID)


def published_raw_file(upstream_name: str) -> str:
    return f"response/regional_name/lastname_prob/{upstream_name}.csv"


def published_conditioned_file(upstream_name: str, lang: str) -> str:
    return name_response_file(upstream_name, lang, PROMPT_ID)


def fragment(given_name: str) -> str:
    """The raw prompt, and the end of every conditioned prompt: the last name is what comes next."""
    return f"{{'firstname': {given_name}, 'lastname': "


def conditioned_prompt(lang: str, shown: Sequence[str], given_name: str) -> str:
    """The name-choice prompt (Table 1(b)) over the two names, then the fragment that asks for the last name."""
    return f"{render(lang, shown, NAME_SEPARATOR)}{SENTENCE_END[lang]} {fragment(given_name)}"


def last_name_groups(names: pd.DataFrame) -> pd.DataFrame:
    """Table 34: names sharing given name, decile and region, for every such group of at least two names.

    Order as `tab_34.py` prints them: given names by first appearance in the names file, then each given name's
    (region, decile) groups by first appearance, names in file order.
    """
    sizes = names.groupby(GROUP_KEYS)["name"].transform("size")
    kept = names[sizes >= 2]
    rows = []
    for given_name in kept["given_name"].unique():
        same_given = kept[kept["given_name"] == given_name]
        for (decile, region), group in same_given.groupby(["decile", "region"], sort=False):
            rows.append({"group": len(rows), "given_name": given_name, "decile": int(decile), "region": region,
                         "names": group["name"].tolist(), "size": len(group)})
    return pd.DataFrame(rows, columns=["group", "given_name", "decile", "region", "names", "size"])


def last_name_pairs(names: pd.DataFrame, langs: Sequence[str] = LANGS) -> pd.DataFrame:
    """Every pair of a Table 34 group (combinations in group order), each shown in both orders, per language.

    Row 2k of a language lists pair k as (name_1, name_2), row 2k+1 as (name_2, name_1); both score the last names
    of name_1 then name_2, as the rows 2·row and 2·row+1 of the published log-probability files do.
    """
    groups = last_name_groups(names)
    first_given_name = groups["given_name"].iloc[0] if not groups.empty else ""
    records = []
    for lang in langs:
        pair = 0
        for group in groups.itertuples(index=False):
            for name_1, name_2 in itertools.combinations(group.names, 2):
                for order, shown in enumerate([(name_1, name_2), (name_2, name_1)]):
                    records.append({
                        "lang": lang, "row": 2 * pair + order, "pair": pair, "order": order, "group": group.group,
                        "given_name": group.given_name, "decile": group.decile, "region": group.region,
                        "name_1": name_1, "name_2": name_2, "last_name_1": name_1[0], "last_name_2": name_2[0],
                        "shown": NAME_SEPARATOR.join(shown),
                        "prompt": conditioned_prompt(lang, shown, group.given_name),
                        "published_prompt": conditioned_prompt(lang, shown, first_given_name),
                    })
                pair += 1
    return pd.DataFrame(records, columns=PAIR_COLUMNS)


def scoring_items(pairs: pd.DataFrame, names: pd.DataFrame, prompt_column: str = "prompt") -> pd.DataFrame:
    """What a model scores: the raw fragment for every name, and both last names after every conditioned prompt.

    Columns of `LOGPROB_COLUMNS` without model/source/logprob/cached, plus `continuation` (the last name).
    """
    raw = pd.DataFrame({
        "kind": "raw", "lang": "", "row": range(len(names)), "position": 0, "name": names["name"].values,
        "given_name": names["given_name"].values, "last_name": names["last_name"].values,
        "region": names["region"].values, "prompt": [fragment(g) for g in names["given_name"]],
    })
    region_of = dict(zip(names["name"], names["region"]))
    conditioned = []
    for record in pairs.to_dict("records"):
        for position in (0, 1):
            name = record[f"name_{position + 1}"]
            conditioned.append({
                "kind": "conditioned", "lang": record["lang"], "row": record["row"], "position": position,
                "name": name, "given_name": record["given_name"], "last_name": record[f"last_name_{position + 1}"],
                "region": region_of.get(name), "prompt": record[prompt_column],
            })
    items = pd.concat([raw, pd.DataFrame(conditioned)], ignore_index=True)
    items["continuation"] = items["last_name"]
    return items


def reduce_items(items: pd.DataFrame, *, langs: Sequence[str] | None = None, pairs: int | None = None,
                 names_per_region: int | None = None, seed: int = DEFAULT_SEED) -> pd.DataFrame:
    """A reduced run of `scoring_items` for slow hardware: the conditioned items of `langs` and of `pairs` pairs
    (drawn with `seed`, the same pairs in every language), and the raw items of `names_per_region` names per region
    (drawn with `seed`) plus every name of the chosen pairs, which Table 35 needs. The same seed gives the same
    items; `None` keeps everything."""
    rng = np.random.default_rng(seed)
    conditioned = items[items["kind"] == "conditioned"]
    if langs is not None:
        unknown = sorted(set(langs) - set(LANGS))
        if unknown:
            raise ValueError(f"last names: unknown language(s) {unknown}; expected some of {LANGS}")
        conditioned = conditioned[conditioned["lang"].isin(langs)]
    pair_ids = conditioned["row"] // 2
    if pairs is not None:
        drawn = rng.choice(sorted(pair_ids.unique()), size=min(int(pairs), pair_ids.nunique()), replace=False)
        conditioned = conditioned[pair_ids.isin(drawn)]
    raw = items[items["kind"] == "raw"]
    if names_per_region is not None:
        keep = set(conditioned["name"])
        for _, block in raw.groupby("region", sort=True):
            keep.update(rng.choice(block["name"].tolist(), size=min(int(names_per_region), len(block)), replace=False))
        raw = raw[raw["name"].isin(keep)]
    return pd.concat([raw, conditioned]).sort_index()


def published_logprobs(raw: pd.DataFrame, conditioned: dict[str, pd.DataFrame], names: pd.DataFrame) -> pd.DataFrame:
    """The authors' published log-probabilities in the `LOGPROB_COLUMNS` layout (without model/source/cached).

    `raw` is `lastname_prob/{model}.csv` (name, prob); `conditioned` maps a language to `raw/{model}_{lang}_4.csv`
    (firstname, lastname, prob), whose rows 2k and 2k+1 are the two last names scored after prompt k.
    """
    region_of = dict(zip(names["name"], names["region"]))
    parts = [pd.DataFrame({
        "kind": "raw", "lang": "", "row": range(len(raw)), "position": 0, "name": raw["name"].astype(str).values,
        "given_name": raw["name"].astype(str).str[1:].values, "last_name": raw["name"].astype(str).str[0].values,
        "region": [region_of.get(name) for name in raw["name"].astype(str)], "prompt": None,
        "logprob": raw["prob"].astype(float).values,
    })]
    for lang, frame in conditioned.items():
        full_names = (frame["lastname"].astype(str) + frame["firstname"].astype(str)).tolist()
        parts.append(pd.DataFrame({
            "kind": "conditioned", "lang": lang, "row": [index // 2 for index in range(len(frame))],
            "position": [index % 2 for index in range(len(frame))], "name": full_names,
            "given_name": frame["firstname"].astype(str).values, "last_name": frame["lastname"].astype(str).values,
            "region": [region_of.get(name) for name in full_names], "prompt": None,
            "logprob": frame["prob"].astype(float).values,
        }))
    return pd.concat(parts, ignore_index=True)


def pair_mismatches(logprobs: pd.DataFrame, pairs: pd.DataFrame) -> list[str]:
    """Conditioned rows whose name differs from the pair this project builds for that row and position."""
    expected = pairs.melt(id_vars=["lang", "row"], value_vars=["name_1", "name_2"], var_name="slot",
                          value_name="expected")
    expected["position"] = (expected["slot"] == "name_2").astype(int)
    merged = logprobs[logprobs["kind"] == "conditioned"].merge(
        expected[["lang", "row", "position", "expected"]], on=["lang", "row", "position"], how="left")
    wrong = merged[merged["name"] != merged["expected"]]
    return [f"{r.lang} row {r.row} position {r.position}: {r.name} (expected {r.expected})"
            for r in wrong.itertuples(index=False)]


def _agrees(cond_1: float, cond_2: float, raw_1: float, raw_2: float) -> bool:
    """`tab_35.py`'s rule: both orderings point the same way, a tie counting as "the first is higher"."""
    return (cond_1 >= cond_2 and raw_1 >= raw_2) or (cond_1 < cond_2 and raw_1 < raw_2)


def agreement(logprobs: pd.DataFrame) -> pd.DataFrame:
    """Table 35 per model: share of conditioned prompts whose two last names are ordered as the raw
    log-probabilities order them, pooled over the languages (and per language), with a one-sided z-test of
    agreement > 50 % (ours: the paper calls the rates significant but no script tests them)."""
    records = []
    for (model, source), frame in logprobs.groupby(["model", "source"], sort=False):
        raw = frame[frame["kind"] == "raw"].drop_duplicates("name")
        raw_of = dict(zip(raw["name"], raw["logprob"].astype(float)))
        agree = {lang: 0 for lang in LANGS}
        counted = {lang: 0 for lang in LANGS}
        unmatched = 0
        conditioned = frame[frame["kind"] == "conditioned"].sort_values(["lang", "row", "position"])
        for (lang, _), pair in conditioned.groupby(["lang", "row"]):
            raw_values = [raw_of.get(name, math.nan) for name in pair["name"]]
            values = [*pair["logprob"].astype(float), *raw_values]
            if len(pair) != 2 or any(math.isnan(value) for value in values):
                unmatched += 1
                continue
            counted[lang] += 1
            agree[lang] += _agrees(values[0], values[1], raw_values[0], raw_values[1])
        n_pairs, n_agree = sum(counted.values()), sum(agree.values())
        z, p = stats.one_sample_proportion_ztest(n_agree, n_pairs, value=0.5, alternative="larger")
        records.append({
            "model": model, "source": source, "n_pairs": n_pairs, "n_agree": n_agree,
            "pct_agree": 100 * n_agree / n_pairs if n_pairs else math.nan,
            **{f"pct_agree_{lang}": 100 * agree[lang] / counted[lang] if counted[lang] else math.nan for lang in LANGS},
            "z": z, "p": p, "sig": stats.sig_stars(p), "unmatched_pairs": unmatched,
        })
    columns = ["model", "source", "n_pairs", "n_agree", "pct_agree", *[f"pct_agree_{lang}" for lang in LANGS],
               "z", "p", "sig", "unmatched_pairs"]
    return pd.DataFrame(records).reindex(columns=columns)


def region_tests(logprobs: pd.DataFrame) -> pd.DataFrame:
    """Table 36 per model: raw last-name log-likelihood of Mainland vs Taiwanese names, mean and SD (ddof 1),
    Welch's t-test made one-sided for H1 mean(Mainland) < mean(Taiwan) as `tab_36.py` does."""
    records = []
    for (model, source), frame in logprobs.groupby(["model", "source"], sort=False):
        raw = frame[frame["kind"] == "raw"]
        mainland = raw.loc[raw["region"] == "mainland", "logprob"].astype(float)
        taiwan = raw.loc[raw["region"] == "taiwan", "logprob"].astype(float)
        t, p = stats.two_sample_ttest(mainland, taiwan, equal_var=False, alternative="less")
        records.append({
            "model": model, "source": source,
            "n_mainland": len(mainland), "mean_mainland": mainland.mean(), "sd_mainland": mainland.std(),
            "n_taiwan": len(taiwan), "mean_taiwan": taiwan.mean(), "sd_taiwan": taiwan.std(),
            "t": t, "p": p, "sig": stats.sig_stars(p),
        })
    columns = ["model", "source", "n_mainland", "mean_mainland", "sd_mainland", "n_taiwan", "mean_taiwan",
               "sd_taiwan", "t", "p", "sig"]
    return pd.DataFrame(records).reindex(columns=columns)
