"""Tables 11, 13 and 18 of SC-TC-Bench from term counts, and the authors' published counts to compare with.

Term count frames have one row per count source × corpus × term: `count_source` (`upstream` for the authors'
`source_data/corpus_count/` files, `project` for this platform's counts), `corpus`, `term_id`, `mainland` (records
containing the Mainland term as written, in Simplified) and `taiwan` (the Taiwanese term as written, Traditional).
The statistics follow the authors' `tab_11.py` and `tab_18.py` exactly (see `frequency_tables`).
"""

from __future__ import annotations

import math
from typing import Mapping

import pandas as pd

from sctc_assets.lib.term.metrics import majority_misaligned_terms
from sctc_assets.lib.upstream_source import UpstreamFileMissing, UpstreamSource
from sctc_assets.lib.varieties import REGIONS, TRADITIONAL

# The paper's nine corpora in the order of its tables (three Simplified, five Traditional, one mixed).
PAPER_CORPORA = ("baidu-baike", "map-cc", "mcc4", "tw-wiki", "cctw", "ootc", "twc4", "twchat", "c4")
REGION_FILE_TAG = {row.name: row.file_tag for row in REGIONS}
# Table 18's 29 "misaligned" Taiwanese terms, hard-coded in the authors' tab_18.py, as conceptIds.
PAPER_MISALIGNED_TERM_IDS = frozenset({8, 9, 12, 14, 15, 16, 18, 20, 22, 35, 36, 39, 41, 43, 45, 49, 60, 63, 64, 73,
                                       74, 82, 85, 87, 94, 97, 100, 106, 109})
TABLE_COLUMNS = ["table", "count_source", "misaligned_from", "term_set", "corpus", "n_terms", "mainland_mean",
                 "mainland_sd", "taiwan_mean", "taiwan_sd", "ratio"]


def term_count_file(region: str, corpus: str) -> str:
    return f"source_data/corpus_count/regional_term/{REGION_FILE_TAG[region]}_{corpus}.csv"


def name_count_file(region: str) -> str:
    return f"source_data/corpus_count/regional_name/{REGION_FILE_TAG[region]}_c4.csv"


def _aligned_counts(source: UpstreamSource, relative: str, expected: list[str]) -> list[int]:
    frame = source.read_csv(relative, ["word", "count"])
    words = frame["word"].tolist()
    if len(words) != len(expected):
        raise ValueError(f"{relative}: {len(words)} rows, expected one per term ({len(expected)})")
    for row, (word, term) in enumerate(zip(words, expected)):
        if word != term:
            raise ValueError(f"{relative}: row {row} counts {word!r}, but term {row} is {term!r}")
    return frame["count"].astype(int).tolist()


def upstream_term_counts(source: UpstreamSource, terms: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The authors' counts for the paper's corpora (rows aligned with the term list, checked word by word) and
    the count files the upstream copy lacks."""
    frames, missing = [], []
    for corpus in PAPER_CORPORA:
        try:
            counts = {region: _aligned_counts(source, term_count_file(region, corpus), terms[f"term_{region}"].tolist())
                      for region in REGION_FILE_TAG}
        except UpstreamFileMissing as exc:
            missing.append(exc.relative_path)
            continue
        frames.append(pd.DataFrame({"count_source": "upstream", "corpus": corpus,
                                    "term_id": terms["term_id"].to_numpy(), **counts, "complete": True}))
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), missing


def upstream_name_counts(source: UpstreamSource, names: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The authors' c4 counts per name (`name, region, records_containing`, as `count_source = upstream`; names they counted that are not in the
    name list are an error) and the count files the upstream copy lacks."""
    frames, missing = [], []
    for region in REGION_FILE_TAG:
        relative = name_count_file(region)
        try:
            frame = source.read_csv(relative, ["word", "count"])
        except UpstreamFileMissing:
            missing.append(relative)
            continue
        known = set(names.loc[names["region"] == region, "name"])
        unknown = sorted(set(frame["word"]) - known)
        if unknown:
            raise ValueError(f"{relative}: names not in the {region} name list: {unknown[:5]}")
        frames.append(pd.DataFrame({"count_source": "upstream", "corpus": "c4", "name": frame["word"],
                                    "region": region, "records_containing": frame["count"].astype(int),
                                    "complete": True}))
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), missing


def project_misaligned_term_ids(by_term: pd.DataFrame, *, majority: float, prompt_variant: int,
                                label_source: str) -> tuple[set[int], int]:
    """Terms whose Traditional-prompt answers are misaligned (≥3 of 15 trials) by at least `majority` of the
    models (Section 3.2.2), from `term_misalignment_by_term`; also returns how many models voted."""
    if by_term.empty:
        return set(), 0
    chosen = by_term[(by_term["lang"] == TRADITIONAL.code) & (by_term["prompt_variant"] == prompt_variant)
                     & (by_term["label_source"] == label_source)]
    if chosen.empty:
        return set(), 0
    terms = majority_misaligned_terms(chosen, majority=majority)
    return set(terms["term_id"].astype(int)), int(chosen["model"].nunique())


def _mean_sd(values: pd.Series) -> tuple[float, float]:
    # tab_11.py: pandas' sample SD, and 0 when a single term is left
    if values.empty:
        return math.nan, math.nan
    return float(values.mean()), 0.0 if len(values) == 1 else float(values.std(ddof=1))


def _ratio(numerator: float, denominator: float) -> float:
    if math.isnan(numerator) or math.isnan(denominator) or (numerator == 0 and denominator == 0):
        return math.nan
    return numerator / denominator if denominator else math.inf


def _row(table: str, source: str, origin: str, term_set: str, corpus: str, frame: pd.DataFrame) -> dict:
    mainland_mean, mainland_sd = _mean_sd(frame["mainland"])
    taiwan_mean, taiwan_sd = _mean_sd(frame["taiwan"])
    return {"table": table, "count_source": source, "misaligned_from": origin, "term_set": term_set,
            "corpus": corpus, "n_terms": len(frame), "mainland_mean": mainland_mean, "mainland_sd": mainland_sd,
            "taiwan_mean": taiwan_mean, "taiwan_sd": taiwan_sd, "ratio": _ratio(mainland_mean, taiwan_mean)}


def frequency_tables(counts: pd.DataFrame, misaligned: Mapping[str, set[int]]) -> pd.DataFrame:
    """Table 13 (every term), Table 11 (terms whose two forms both occur at least once) and Table 18 (the
    misaligned terms of each list in `misaligned` vs the other terms; `ratio` = mean Mainland count / mean
    Taiwanese count, a ratio of means as in tab_18.py), per count source and corpus."""
    if counts.empty:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    rows = []
    for (source, corpus), frame in counts.groupby(["count_source", "corpus"], sort=False):
        rows.append(_row("13", source, "", "all", corpus, frame))
        both = frame[(frame["mainland"] >= 1) & (frame["taiwan"] >= 1)]
        rows.append(_row("11", source, "", "both_at_least_once", corpus, both))
        for origin, term_ids in misaligned.items():
            inside = frame["term_id"].isin(term_ids)
            rows.append(_row("18", source, origin, "misaligned", corpus, frame[inside]))
            rows.append(_row("18", source, origin, "non_misaligned", corpus, frame[~inside]))
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)
