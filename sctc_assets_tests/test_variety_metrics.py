"""The term task's metric tables over any item set and prompting varieties (`lib/term/variety_metrics`), from
hand-made label tables whose every number is known."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest

from sctc_assets.lib import power, stats
from sctc_assets.lib.schemas.base import frame_problems
from sctc_assets.lib.schemas.item_sets import item_set_term_schemas
from sctc_assets.lib.term import variety_metrics as vm
from sctc_assets.lib.term.items import Concept, ItemSet
from sctc_assets.lib.term.variety_prompts import build_variety_prompts
from sctc_assets.lib.varieties import ZH_CN, ZH_HK, ZH_MO, ZH_TW

REGIONS = ["tw", "cn", "hk", "mo"]
VARIETIES = {"zh-TW": "tw", "zh-CN": "cn", "zh-HK": "hk", "zh-MO": "mo"}
# Forms per concept: c1 all different; c2 Taiwan's = Mainland's, Hong Kong's = Macau's; c3 Taiwan's = Hong Kong's =
# Macau's; c4 has no Hong Kong or Macau form (not asked in zh-HK / zh-MO) and a model-written definition.
FORMS = {
    "c1": {"tw": "甲", "cn": "乙", "hk": "丙", "mo": "丁"},
    "c2": {"tw": "戊", "cn": "戊", "hk": "己", "mo": "己"},
    "c3": {"tw": "庚", "cn": "辛", "hk": "庚", "mo": "庚"},
    "c4": {"tw": "壬", "cn": "癸"},
}
DEFINITION_SOURCE = {"c1": "", "c2": None, "c3": "", "c4": "model:my-gpt"}
TRIALS = 3


def _label(variety: str, concept: str, answer_region: str) -> tuple[str | None, str]:
    """(label, regions_found) of an answer giving `answer_region`'s form; the item-set rule (correct wins)."""
    forms = FORMS[concept]
    prompted = VARIETIES[variety]
    if prompted not in forms:
        return None, ""
    answer = forms[answer_region]
    found = [region for region in REGIONS if forms.get(region) == answer]
    return ("correct" if prompted in found else "misaligned"), ",".join(found)


def always_taiwan(model: str = "m", variants=(1,)) -> pd.DataFrame:
    rows = []
    for variety, region in VARIETIES.items():
        for variant in variants:
            for concept in FORMS:
                for trial in range(TRIALS):
                    label, found = _label(variety, concept, "tw")
                    rows.append({"model": model, "variety": variety, "region": region, "prompt_variant": variant,
                                 "concept_id": concept, "trial": trial, "outcome": "ok", "label": label,
                                 "regions_found": found, "definition_source": DEFINITION_SOURCE[concept],
                                 "response": FORMS[concept]["tw"],
                                 "misaligned_forms": FORMS[concept]["tw"] if label == "misaligned" else "",
                                 "label_source": "rules"})
    return pd.DataFrame(rows)


def _matrix_dict(matrix: pd.DataFrame) -> dict[str, dict[str, tuple[int, int]]]:
    return {variety: {row["answered_region"]: (int(row["k"]), int(row["n_answers"]))
                      for row in frame.to_dict("records")}
            for variety, frame in matrix.groupby("variety", sort=False)}


def test_the_matrix_of_a_model_always_giving_taiwans_form():
    matrix = vm.variety_region_matrix(always_taiwan(), REGIONS)
    assert list(matrix.columns) == vm.MATRIX_COLUMNS
    # zh-TW and zh-CN: 4 concepts × 3 trials; zh-HK and zh-MO: c4 not asked, 3 × 3.
    assert _matrix_dict(matrix) == {
        "zh-TW": {"tw": (12, 12), "cn": (3, 12), "hk": (3, 12), "mo": (3, 12), "none": (0, 12)},
        "zh-CN": {"tw": (12, 12), "cn": (3, 12), "hk": (3, 12), "mo": (3, 12), "none": (0, 12)},
        "zh-HK": {"tw": (9, 9), "cn": (3, 9), "hk": (3, 9), "mo": (3, 9), "none": (0, 9)},
        "zh-MO": {"tw": (9, 9), "cn": (3, 9), "hk": (3, 9), "mo": (3, 9), "none": (0, 9)},
    }
    assert list(matrix["variety"].unique()) == list(VARIETIES)  # the order the labels give
    assert list(matrix.loc[matrix["variety"] == "zh-HK", "answered_region"]) == [*REGIONS, "none"]
    hk = matrix[matrix["variety"] == "zh-HK"].set_index("answered_region")["pct"]
    assert hk["tw"] == 100.0 and hk["cn"] == pytest.approx(100 / 3) and hk["none"] == 0.0
    assert set(matrix["region"]) == set(REGIONS)


def test_the_matrix_counts_the_prompted_region_from_a_correct_label_and_refusals_as_none():
    """A labeller that leaves the prompted region out of regions_found (label_frame does): a correct answer still
    holds the prompted region's form. A refusal holds no region's form."""
    labels = always_taiwan()
    labels["regions_found"] = [",".join(code for code in found.split(",") if code != region)
                               for found, region in zip(labels["regions_found"], labels["region"])]
    refusal = labels.iloc[[0]].assign(outcome="refusal", label="incorrect", regions_found="", trial=99)
    matrix = vm.variety_region_matrix(pd.concat([labels, refusal]), REGIONS)
    table = _matrix_dict(matrix)
    assert table["zh-TW"] == {"tw": (12, 13), "cn": (3, 13), "hk": (3, 13), "mo": (3, 13), "none": (1, 13)}
    assert table["zh-CN"]["cn"] == (3, 12) and table["zh-HK"]["hk"] == (3, 9)


def _rates_dict(rates: pd.DataFrame, definitions: str = "all") -> dict[str, dict[str, tuple[int, int]]]:
    chosen = rates[rates["definitions"] == definitions]
    return {variety: {row["measure"]: (int(row["k"]), int(row["n"])) for row in frame.to_dict("records")}
            for variety, frame in chosen.groupby("variety", sort=False)}


def test_rates_and_misaligned_regions_of_a_model_always_giving_taiwans_form():
    rates = vm.variety_rates(always_taiwan())
    assert list(rates.columns) == vm.RATE_COLUMNS
    assert _rates_dict(rates) == {
        "zh-TW": {"correct": (12, 12), "misaligned": (0, 12), "incorrect": (0, 12), "misaligned:cn": (0, 12),
                  "misaligned:hk": (0, 12), "misaligned:mo": (0, 12)},
        "zh-CN": {"correct": (3, 12), "misaligned": (9, 12), "incorrect": (0, 12), "misaligned:tw": (9, 12),
                  "misaligned:hk": (3, 12), "misaligned:mo": (3, 12)},
        "zh-HK": {"correct": (3, 9), "misaligned": (6, 9), "incorrect": (0, 9), "misaligned:tw": (6, 9),
                  "misaligned:cn": (3, 9), "misaligned:mo": (0, 9)},
        "zh-MO": {"correct": (3, 9), "misaligned": (6, 9), "incorrect": (0, 9), "misaligned:tw": (6, 9),
                  "misaligned:cn": (3, 9), "misaligned:hk": (0, 9)},
    }
    # c4's definition was drafted by a model: the source- and model-written concepts apart (c4: zh-TW, zh-CN only).
    assert _rates_dict(rates, "model") == {
        "zh-TW": {"correct": (3, 3), "misaligned": (0, 3), "incorrect": (0, 3), "misaligned:cn": (0, 3),
                  "misaligned:hk": (0, 3), "misaligned:mo": (0, 3)},
        "zh-CN": {"correct": (0, 3), "misaligned": (3, 3), "incorrect": (0, 3), "misaligned:tw": (3, 3),
                  "misaligned:hk": (0, 3), "misaligned:mo": (0, 3)},
    }
    assert _rates_dict(rates, "source")["zh-CN"]["correct"] == (3, 9)
    assert _rates_dict(rates, "source")["zh-HK"] == _rates_dict(rates)["zh-HK"]
    row = rates[(rates["variety"] == "zh-CN") & (rates["measure"] == "correct") & (rates["definitions"] == "all")]
    low, high = stats.wilson_ci(3, 12)
    assert row["pct"].iloc[0] == 25.0
    assert (row["ci_low"].iloc[0], row["ci_high"].iloc[0]) == pytest.approx((low * 100, high * 100))
    assert set(rates["region"]) == set(REGIONS) and set(rates["prompt_variant"]) == {1}
    assert rates["n"].dtype == "int64" and rates["k"].dtype == "int64"


def test_no_model_written_definitions_gives_all_only():
    labels = always_taiwan().assign(definition_source=None)
    assert set(vm.variety_rates(labels)["definitions"]) == {"all"}


def test_by_concept_counts_and_misaligned_regions():
    table = vm.by_concept(always_taiwan())
    assert list(table.columns) == vm.BY_CONCEPT_COLUMNS
    assert len(table) == 4 + 4 + 3 + 3  # c4 not asked in zh-HK and zh-MO
    rows = table.set_index(["variety", "concept_id"])
    assert rows.loc[("zh-CN", "c3"), ["n_trials", "n_correct", "n_misaligned", "n_incorrect"]].tolist() == [3, 0, 3, 0]
    assert json.loads(rows.loc[("zh-CN", "c3"), "misaligned_regions"]) == {"hk": 3, "mo": 3, "tw": 3}
    assert json.loads(rows.loc[("zh-HK", "c2"), "misaligned_regions"]) == {"cn": 3, "tw": 3}
    assert json.loads(rows.loc[("zh-CN", "c2"), "misaligned_regions"]) == {}  # correct: nothing misaligned
    assert rows.loc[("zh-CN", "c4"), "definition_source"] == "model:my-gpt"
    assert rows.loc[("zh-CN", "c2"), "definition_source"] == ""  # None → ""
    assert rows.loc[("zh-HK", "c1"), "region"] == "hk"


def _by_concept_rates(model: str, variety: str, correct: list[int], trials: int = 10) -> pd.DataFrame:
    return pd.DataFrame({"model": model, "variety": variety, "prompt_variant": 1, "region": VARIETIES[variety],
                         "concept_id": [f"k{i}" for i in range(len(correct))], "definition_source": "",
                         "n_trials": trials, "n_correct": correct,
                         "n_misaligned": [trials - value for value in correct], "n_incorrect": 0, "n_refusal": 0,
                         "misaligned_regions": "{}"})


def test_contrasts_find_a_clear_difference_and_none_where_the_rates_are_identical():
    rng = np.random.default_rng(7)
    n = 30
    high = rng.integers(8, 11, size=n).tolist()
    low = rng.integers(0, 3, size=n).tolist()
    table = pd.concat([_by_concept_rates("a", "zh-TW", high), _by_concept_rates("a", "zh-CN", low),
                       _by_concept_rates("a", "zh-HK", high),
                       _by_concept_rates("b", "zh-TW", high), _by_concept_rates("b", "zh-CN", high)],
                      ignore_index=True)
    contrasts = vm.variety_contrasts(table)
    assert list(contrasts.columns) == vm.CONTRAST_COLUMNS
    correct = contrasts[contrasts["measure"] == "correct"].set_index(["model", "variety_a", "variety_b"])
    assert list(correct.index) == [("a", "zh-TW", "zh-CN"), ("a", "zh-TW", "zh-HK"), ("a", "zh-CN", "zh-HK"),
                                   ("b", "zh-TW", "zh-CN")]
    clear = correct.loc[("a", "zh-TW", "zh-CN")]
    assert clear["n_concepts"] == n
    assert clear["diff_pct_points"] == pytest.approx(np.mean(high) * 10 - np.mean(low) * 10)
    assert clear["pct_a"] == pytest.approx(np.mean(high) * 10)
    assert clear["paired_t_p_bh"] < 1e-6 and clear["wilcoxon_p_bh"] < 1e-4
    assert clear["sig_paired_t_bh"] == "***" and clear["ci_low"] > 50
    assert correct.loc[("a", "zh-CN", "zh-HK"), "diff_pct_points"] < -50  # A − B, A first
    for same in (("a", "zh-TW", "zh-HK"), ("b", "zh-TW", "zh-CN")):
        row = correct.loc[same]
        assert row["diff_pct_points"] == 0 and row["paired_t_p"] == 1.0 and row["wilcoxon_p"] == 1.0
        assert row["sig_paired_t_bh"] == "NS" and row["sig_wilcoxon_bh"] == "NS"
    # BH across the family: every pair and model of one prompt variant and measure.
    for _, family in contrasts.groupby(["prompt_variant", "measure"]):
        for test in ("paired_t", "wilcoxon"):
            assert family[f"{test}_p_bh"].tolist() == pytest.approx(stats.bh_adjust(family[f"{test}_p"]))
    assert (correct["ci_method"] == vm.CI_METHOD).all()


def test_contrasts_pair_only_the_concepts_asked_in_both():
    contrasts = vm.variety_contrasts(vm.by_concept(always_taiwan()))
    row = contrasts[(contrasts["variety_a"] == "zh-TW") & (contrasts["variety_b"] == "zh-HK")
                    & (contrasts["measure"] == "correct")].iloc[0]
    assert row["n_concepts"] == 3 and row["pct_a"] == 100.0 and row["pct_b"] == pytest.approx(100 / 3)
    identical = contrasts[(contrasts["variety_a"] == "zh-HK") & (contrasts["variety_b"] == "zh-MO")]
    assert (identical["diff_pct_points"] == 0).all() and (identical["sig_paired_t_bh"] == "NS").all()


def test_power_of_the_design_and_its_degenerate_cases():
    rng = np.random.default_rng(3)
    table = pd.concat([_by_concept_rates("a", "zh-TW", rng.integers(0, 11, size=40).tolist()),
                       _by_concept_rates("a", "zh-CN", rng.integers(0, 11, size=40).tolist()),
                       _by_concept_rates("a", "zh-HK", [5] * 40),
                       _by_concept_rates("b", "zh-TW", [5]), _by_concept_rates("b", "zh-CN", [3])],
                      ignore_index=True)
    # zh-MO: the same rates as zh-HK, so zh-HK − zh-MO is 0 for every concept (SD 0).
    table = pd.concat([table, table[table["variety"] == "zh-HK"].assign(variety="zh-MO", region="mo")],
                      ignore_index=True)
    result = vm.variety_power(table)
    assert list(result.columns) == vm.POWER_COLUMNS
    rows = result[result["measure"] == "correct"].set_index(["model", "variety_a", "variety_b"])
    design = rows.loc[("a", "zh-TW", "zh-CN")]
    a = table[(table["model"] == "a") & (table["variety"] == "zh-TW")]["n_correct"].to_numpy() * 10.0
    b = table[(table["model"] == "a") & (table["variety"] == "zh-CN")]["n_correct"].to_numpy() * 10.0
    sd = float(np.std(a - b, ddof=1))
    assert design["n_concepts"] == 40 and design["sd_concept_diff"] == pytest.approx(sd)
    assert design["mde_pct_points"] == pytest.approx(power.mde_paired(40, sd))
    assert design["concepts_needed_5pp"] == power.units_needed_paired(5.0, sd)
    assert design["concepts_needed_10pp"] == power.units_needed_paired(10.0, sd)
    assert design["concepts_needed_5pp"] > design["concepts_needed_10pp"] and design["note"] == ""
    flat = rows.loc[("a", "zh-HK", "zh-MO")]
    assert np.isnan(flat["mde_pct_points"]) and np.isnan(flat["concepts_needed_5pp"]) and "SD 0" in flat["note"]
    single = rows.loc[("b", "zh-TW", "zh-CN")]
    assert single["n_concepts"] == 1 and np.isnan(single["mde_pct_points"]) and "at least 2" in single["note"]


def test_every_table_matches_its_schema():
    labels = pd.concat([always_taiwan("m", (1, 2)), always_taiwan("n", (1,))], ignore_index=True)
    schemas = {spec.table: spec for spec in item_set_term_schemas("terms_demo", REGIONS)}
    assert list(schemas) == [f"terms_demo_{name}" for name in ("items", "prompts", "responses", "judgements", "labels",
                                                                "by_concept", "rates", "matrix", "contrasts", "power")]
    concepts = vm.by_concept(labels)
    tables = {"labels": labels, "by_concept": concepts, "rates": vm.variety_rates(labels),
              "matrix": vm.variety_region_matrix(labels, REGIONS), "contrasts": vm.variety_contrasts(concepts),
              "power": vm.variety_power(concepts)}
    item_set = ItemSet("demo", tuple(REGIONS), tuple(
        Concept(concept_id, {region: (form,) for region, form in forms.items()}, definition_zh_hans="一种东西",
                definition_source=DEFINITION_SOURCE[concept_id] or None)
        for concept_id, forms in FORMS.items()))
    tables["items"] = item_set.frame()
    tables["prompts"] = build_variety_prompts(item_set, [ZH_TW, ZH_CN, ZH_HK, ZH_MO], variants=(1,), trials=2)
    for name, frame in tables.items():
        assert not frame.empty, name
        assert frame_problems(frame, schemas[f"terms_demo_{name}"]) == [], name
    # Empty inputs give empty tables with the declared columns.
    empty = labels.iloc[0:0]
    for name, frame in (("by_concept", vm.by_concept(empty)), ("rates", vm.variety_rates(empty)),
                        ("matrix", vm.variety_region_matrix(empty, REGIONS)),
                        ("contrasts", vm.variety_contrasts(vm.by_concept(empty))),
                        ("power", vm.variety_power(vm.by_concept(empty)))):
        assert frame.empty and frame_problems(frame, schemas[f"terms_demo_{name}"]) == [], name


def test_100k_label_rows_take_well_under_two_seconds():
    rng = np.random.default_rng(11)
    n = 100_000
    varieties = np.array(list(VARIETIES))
    variety = varieties[rng.integers(0, 4, size=n)]
    labels = pd.DataFrame({
        "model": rng.choice(["m1", "m2"], size=n), "variety": variety,
        "region": [VARIETIES[code] for code in variety], "prompt_variant": rng.integers(1, 4, size=n),
        "concept_id": rng.integers(0, 400, size=n).astype(str), "trial": rng.integers(0, 15, size=n),
        "outcome": rng.choice(["ok", "refusal"], size=n, p=[0.97, 0.03]),
        "label": rng.choice(["correct", "misaligned", "incorrect", None], size=n, p=[0.5, 0.3, 0.15, 0.05]),
        "regions_found": rng.choice(["", "tw", "cn", "tw,cn", "hk,mo", "cn,hk"], size=n),
        "definition_source": rng.choice(["", "model:x"], size=n, p=[0.8, 0.2])})
    started = time.perf_counter()
    concepts = vm.by_concept(labels)
    rates = vm.variety_rates(labels)
    matrix = vm.variety_region_matrix(labels, REGIONS)
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0, elapsed
    asked = labels["label"].notna().sum()
    assert concepts["n_trials"].sum() == asked
    assert rates[(rates["definitions"] == "all") & (rates["measure"] == "correct")]["n"].sum() == asked
    assert matrix[matrix["answered_region"] == "none"]["n_answers"].sum() == asked
    started = time.perf_counter()
    vm.variety_contrasts(concepts)
    vm.variety_power(concepts)
    assert time.perf_counter() - started < 10.0
