"""The long selection table: one row per answer and extraction source.

Sources: `rules` (the deterministic extractor, every model), `upstream` (the authors' published extraction of the
paper models' answers, `response/regional_name/final/`), `judge` (the paper's procedure with a registered model in
GPT-4o-mini's place). `candidate_scope` says what the rules matched against: the trial's own list (`trial`) or,
where the upstream copy lacks the trial's list, all 352 names (`all_names`: a listed name that was not among the
trial's 20 then counts as selected instead of out of list).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from sctc_assets.lib.generation import stored_text
from sctc_assets.lib.name.candidates import LIST_KEYS
from sctc_assets.lib.name.extraction import (
    EMPTY, INVALID, REFUSAL, VALID, Extraction, exact_substring_matches, matcher_for, parse_judge_answer,
)

ROW_KEYS = ["experiment", "list_source", "list_id", "shuffle", "row"]
SELECTION_COLUMNS = ["model", "lang", *ROW_KEYS, "extraction_source", "candidate_scope", "status", "rule",
                     "selected_name", "region", "script_variant_of"]
PUBLISHED_REGIONS = {1: "mainland", 0: "taiwan", -1: None}
SCORABLE_OUTCOMES = ("ok", "refusal")


def _with_lists(responses: pd.DataFrame, lists: pd.DataFrame) -> pd.DataFrame:
    scorable = responses[responses["outcome"].isin(SCORABLE_OUTCOMES)]
    return scorable.merge(lists[LIST_KEYS + ["candidates", "mainland_names", "taiwan_names"]], on=LIST_KEYS,
                          how="left")


def _record(row: Mapping, source: str, scope: str | None, extraction: Extraction, region: str | None) -> dict:
    return {"model": row["model"], "lang": row["lang"], **{key: row[key] for key in ROW_KEYS},
            "extraction_source": source, "candidate_scope": scope, "status": extraction.status,
            "rule": extraction.rule, "selected_name": extraction.name, "region": region,
            "script_variant_of": extraction.script_variant_of}


def _has_list(value: object) -> bool:
    return value is not None and not isinstance(value, float)  # a trial the upstream copy has no list for is NaN


def _list_region(name: str | None, row: Mapping) -> str | None:
    if name in list(row["mainland_names"]):
        return "mainland"
    return "taiwan" if name in list(row["taiwan_names"]) else None


def _frame(records: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(records, columns=SELECTION_COLUMNS)


def _positions_in(known: pd.DataFrame, rows: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """Per row of `rows`, the position of the row of `known` with the same `keys` (unique in `known`), else -1:
    what `MultiIndex.get_indexer` gives, on one integer code per key combination instead of a tuple per row."""
    known_codes = np.zeros(len(known), dtype=np.int64)
    row_codes = np.zeros(len(rows), dtype=np.int64)
    for key in keys:
        codes, uniques = pd.factorize(known[key])  # a missing value: -1
        found = pd.Index(uniques).get_indexer(rows[key])
        missing, absent = len(uniques), len(uniques) + 1  # codes of a missing value (matches one) and of a value
        found = np.where(rows[key].isna().to_numpy(), missing, np.where(found < 0, absent, found))  # not known
        known_codes = known_codes * (absent + 1) + np.where(codes < 0, missing, codes)
        row_codes = row_codes * (absent + 1) + found
    return pd.Index(known_codes).get_indexer(row_codes)


def _list_signatures(responses: pd.DataFrame, lists: pd.DataFrame) -> tuple[np.ndarray, list[tuple | None]]:
    """Per response, the code of what its extraction depends on besides the answer: the trial's candidates and
    their regions, whatever the order a shuffle gives them (code 0: no list, all 352 names), and those
    signatures, `(candidates, mainland names, taiwan names)` or None."""
    known = lists.drop_duplicates(LIST_KEYS).reset_index(drop=True)
    position = _positions_in(known, responses, LIST_KEYS)
    used, inverse = np.unique(position, return_inverse=True)  # the lists these responses were asked, once each
    signatures: list[tuple | None] = [None]
    code_of: dict[tuple, int] = {}
    used_codes = np.zeros(len(used), dtype=np.int64)
    columns = [known[name].to_numpy(dtype=object) for name in ("candidates", "mainland_names", "taiwan_names")]
    for slot, row in enumerate(used.tolist()):
        if row < 0:
            continue
        candidates, mainland, taiwan = (column[row] for column in columns)
        if candidates is None or isinstance(candidates, float):  # a trial the upstream copy has no list for
            continue
        signature = (tuple(sorted(candidates)), frozenset(mainland), frozenset(taiwan))
        if signature not in code_of:
            code_of[signature] = len(signatures)
            signatures.append(signature)
        used_codes[slot] = code_of[signature]
    return used_codes[inverse.reshape(-1)], signatures


def rules_selections(responses: pd.DataFrame, lists: pd.DataFrame, names: pd.DataFrame) -> pd.DataFrame:
    """The deterministic extractor on every scorable answer (errors are asked again, replay gaps have no text).

    An extraction depends only on the answer text, whether the backend refused, and the trial's candidate set, so
    each distinct combination is extracted once (the published answers repeat heavily) and the result is given to
    every answer that shares it."""
    scorable = responses[responses["outcome"].isin(SCORABLE_OUTCOMES)]
    if scorable.empty:
        return _frame([])
    pool = matcher_for(names["name"].tolist())
    region_of = dict(zip(names["name"], names["region"]))
    list_codes, signatures = _list_signatures(scorable, lists)
    text_codes, uniques = pd.factorize(scorable["response"], use_na_sentinel=True)
    texts = [stored_text(value) for value in uniques] + [None]  # code -1: no text
    refused = (scorable["outcome"] == "refusal").to_numpy(dtype=bool)
    width = len(texts)
    combined = (list_codes * width + np.where(text_codes < 0, width - 1, text_codes)) * 2 + refused
    group_of, firsts = pd.factorize(combined)
    matchers = [pool] + [matcher_for(signature[0]) for signature in signatures[1:]]
    rows = []
    for key in firsts.tolist():
        list_code, text_code = divmod(key // 2, width)
        signature = signatures[list_code]
        scope = "trial" if signature is not None else "all_names"
        if key % 2:
            extraction = Extraction(REFUSAL, rule="backend refusal")
        else:
            extraction = matchers[list_code].extract(texts[text_code])
        if extraction.status != VALID:
            region = None
        elif signature is None:
            region = region_of.get(extraction.name)
        else:
            region = "mainland" if extraction.name in signature[1] else \
                "taiwan" if extraction.name in signature[2] else None
        rows.append((scope, extraction.status, extraction.rule, extraction.name, region,
                     extraction.script_variant_of))
    per_group = pd.DataFrame(rows, columns=["candidate_scope", "status", "rule", "selected_name", "region",
                                            "script_variant_of"])
    frame = scorable[["model", "lang", *ROW_KEYS]].reset_index(drop=True)
    frame["extraction_source"] = "rules"
    taken = per_group.take(group_of).reset_index(drop=True)
    return pd.concat([frame, taken], axis=1)[SELECTION_COLUMNS]


def published_regions(codes: pd.Series, *, source_name: str) -> list[str | None]:
    """The authors' region codes (1 Mainland, 0 Taiwan, -1 invalid) as regions; another value is an error naming
    the file and row."""
    if isinstance(codes.dtype, np.dtype) and codes.dtype.kind in "iu":  # as read, no Python int per row
        numbers = pd.Series(codes.to_numpy(), index=pd.RangeIndex(len(codes)))
    else:
        numbers = pd.to_numeric(pd.Series(list(codes)), errors="coerce")
    bad = numbers.index[~numbers.isin(list(PUBLISHED_REGIONS))].tolist()
    if bad:
        raise ValueError(f"{source_name}: row {bad[0]}: region must be 1, 0 or -1, got {list(codes)[bad[0]]!r}"
                         + (f" ({len(bad)} such rows)" if len(bad) > 1 else ""))
    by_code = np.array([PUBLISHED_REGIONS[-1], PUBLISHED_REGIONS[0], PUBLISHED_REGIONS[1]], dtype=object)
    return by_code[numbers.to_numpy().astype(np.int64) + 1].tolist()


def upstream_selections(final: pd.DataFrame, *, model: str, lang: str, experiment: str, shuffles: int,
                        rows: set[int] | None = None, source_name: str = "final file") -> pd.DataFrame:
    """The authors' extraction (`extracted_name`, `refine_flag`, `region` 1/0/-1) of one final file
    (`source_name`, for errors), row i being prompt row i as in their scripts; `rows` keeps only the requested
    ones."""
    regions = pd.Series(published_regions(final["region"], source_name=source_name), dtype=object)
    index = pd.RangeIndex(len(final))
    chosen = index.isin(sorted(rows)) if rows is not None else np.ones(len(final), dtype=bool)
    positions = index[chosen].to_numpy()
    valid = regions[chosen].notna().to_numpy()
    extracted, flags = final["extracted_name"], final["refine_flag"]
    if isinstance(extracted.dtype, pd.StringDtype):  # texts or missing: stored_text is the text or None
        names = extracted.to_numpy(dtype=object, na_value=None)[chosen].tolist()
    else:
        names = [stored_text(name) for name in extracted.to_numpy()[chosen]]
    if flags.dtype == np.bool_:
        refined = flags.to_numpy()[chosen].tolist()  # str(flag) == "True" of a bool is the bool
    else:
        refined = [str(flag) == "True" for flag in flags.to_numpy()[chosen]]
    return pd.DataFrame({
        "model": model, "lang": lang, "experiment": experiment, "list_source": "upstream",
        "list_id": positions // shuffles, "shuffle": positions % shuffles, "row": positions,
        "extraction_source": "upstream", "candidate_scope": "trial",
        "status": np.where(valid, VALID, INVALID).tolist(),
        "rule": ["gpt-4o-mini" if flag else "substring" for flag in refined],
        "selected_name": names, "region": regions[chosen].tolist(), "script_variant_of": None,
    }, index=pd.RangeIndex(len(positions)), columns=SELECTION_COLUMNS)


def needs_judge(response: str | None, candidates: list[str]) -> bool:
    """gpt_eval.py asks GPT-4o-mini unless the answer is empty or contains exactly one candidate as written."""
    return response is not None and len(exact_substring_matches(response, candidates)) != 1


def judge_selections(responses: pd.DataFrame, lists: pd.DataFrame, judgements: pd.DataFrame) -> pd.DataFrame:
    """The paper's extraction procedure with the judge's verdicts. An answer the judge failed on (or was not
    asked about) stays in n as `invalid` with rule `judge_error: <outcome>`; a backend refusal is a refusal, as
    in the rules."""
    outcomes = judgements["judge_outcome"] if "judge_outcome" in judgements.columns else [None] * len(judgements)
    verdicts = {tuple(key): (stored_text(answer), stored_text(outcome)) for key, answer, outcome in
                zip(judgements[LIST_KEYS].itertuples(index=False), judgements["judge_answer"], outcomes)}
    records = []
    for row in _with_lists(responses, lists).to_dict("records"):
        if not _has_list(row["candidates"]):
            continue
        candidates, text = list(row["candidates"]), stored_text(row["response"])
        if row["outcome"] == "refusal":
            extraction = Extraction(REFUSAL, rule="backend refusal")
        elif text is None:
            extraction = Extraction(EMPTY, rule="no answer")
        elif not needs_judge(text, candidates):
            extraction = Extraction(VALID, exact_substring_matches(text, candidates)[0], "substring")
        else:
            answer, outcome = verdicts.get(tuple(row[name] for name in LIST_KEYS), (None, "not judged"))
            if answer is None:
                extraction = Extraction(INVALID, rule=f"judge_error: {outcome or 'no verdict'}")
            else:
                extraction = parse_judge_answer(answer, candidates)
        region = _list_region(extraction.name, row) if extraction.status == VALID else None
        records.append(_record(row, "judge", "trial", extraction, region))
    return _frame(records)


AGREEMENT_COLUMNS = ["model", "lang", "experiment", "candidate_scope", "n_compared", "n_agree", "agreement",
                     "rules_invalid_published_valid", "rules_valid_published_invalid", "other_region"]


def compared_with_published(selections: pd.DataFrame) -> pd.DataFrame:
    """Rules and published extraction side by side on the answers both cover, with the kind of disagreement."""
    keys = ["model", "lang", *ROW_KEYS]
    rules = selections[selections["extraction_source"] == "rules"]
    published = selections[selections["extraction_source"] == "upstream"]
    both = rules.merge(published[keys + ["region", "selected_name"]], on=keys, suffixes=("", "_published"))
    ours, theirs = both["region"].fillna("invalid"), both["region_published"].fillna("invalid")
    both["disagreement"] = "none"
    both.loc[(ours == "invalid") & (theirs != "invalid"), "disagreement"] = "rules_invalid_published_valid"
    both.loc[(ours != "invalid") & (theirs == "invalid"), "disagreement"] = "rules_valid_published_invalid"
    both.loc[(ours != "invalid") & (theirs != "invalid") & (ours != theirs), "disagreement"] = "other_region"
    return both


def agreement(selections: pd.DataFrame, compared: pd.DataFrame | None = None) -> pd.DataFrame:
    """Share of answers where the rules give the published region (or both call the answer invalid); `compared`:
    `compared_with_published(selections)`, when the caller has it."""
    if compared is not None:
        both = compared
    else:
        both = compared_with_published(selections) if not selections.empty else pd.DataFrame()
    if both.empty:
        return pd.DataFrame(columns=AGREEMENT_COLUMNS)
    counts = (both.groupby(["model", "lang", "experiment", "candidate_scope", "disagreement"]).size()
              .unstack("disagreement", fill_value=0))
    for kind in ("none", *AGREEMENT_COLUMNS[-3:]):
        if kind not in counts.columns:
            counts[kind] = 0
    counts = counts.reset_index()
    counts["n_agree"] = counts["none"]
    counts["n_compared"] = counts[["none", *AGREEMENT_COLUMNS[-3:]]].sum(axis=1)
    counts["agreement"] = counts["n_agree"] / counts["n_compared"]
    return counts[AGREEMENT_COLUMNS]
