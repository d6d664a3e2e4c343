"""Table 23 for any model and pair, through `sctc run` with the stub OpenAI server as a model that always picks the
first candidate; and misalignment counted by term category with its test."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sctc_assets.cli import main
from sctc_assets.lib.name.prompts import shown_names
from sctc_assets.lib.term.categories import misalignment_by_category
from sctc_assets_tests.openai_stub_server import StubOpenAIServer, completion

KEY_ENV = "SCTC_TEST_PAIR_KEY"
LANGS = ("zh_hans", "zh_hant", "en")


class FirstCandidate(StubOpenAIServer):
    def echo(self, prompt: str, body: dict[str, Any]):
        return completion(shown_names(prompt, where="stub")[0])


@pytest.mark.slow
def test_table_23_of_a_model_that_always_picks_the_first_candidate(isolated_data_dir, extracted_upstream, tmp_path,
                                                                    monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    out = tmp_path / "out"
    run = ["run", "--benchmarks", "name", "--models", "first", "--name-experiments", "main", "--name-lists", "4",
           "--name-shuffles", "2", "--out", str(out)]
    with FirstCandidate() as server:
        registry = tmp_path / "models.yaml"
        registry.write_text(f"models:\n  first: {{backend: openai, model: stub-model, base_url: '{server.base_url}', "
                            f"api_key_env: {KEY_ENV}, max_retries: 0, concurrency: 8}}\n", encoding="utf-8")
        monkeypatch.setenv("SCTC_MODELS", str(registry))
        assert main(run) == 0
        lists = pd.read_parquet(out / "name_candidate_lists.parquet")
        selections = pd.read_parquet(out / "name_selections.parquet")
        asked = lists.merge(selections[["experiment", "list_source", "row"]].drop_duplicates(),
                            on=["experiment", "list_source", "row"])
        first, other = asked["candidates"].iloc[0][0], asked["candidates"].iloc[0][-1]
        calls = len(server.requests)
        assert main(run + ["--name-pair", first, other]) == 0  # re-scoring: the pair needs no model call
        assert len(server.requests) == calls
    table = pd.read_parquet(out / "name_pair_selection_rates.parquet")
    table = table[(table.model == "first") & (table.extraction_source == "rules")]
    # by hand: a list shown puts a selection on its first candidate
    shown = {name: int(sum(name in list(c) for c in asked["candidates"])) for name in (first, other)}
    picked = {name: int(sum(list(c)[0] == name for c in asked["candidates"])) for name in (first, other)}
    assert shown[first] >= 1 and picked[first] >= 1
    for lang in LANGS:
        rows = table[table.lang == lang].set_index("name")
        for name in (first, other):
            assert rows.loc[name, "appearances"] == shown[name]
            assert rows.loc[name, "selections"] == picked[name]
            assert rows.loc[name, "selection_rate"] == pytest.approx(100 * picked[name] / shown[name])
            assert rows.loc[name, "pct_of_answers"] == pytest.approx(100 * picked[name] / len(asked))


def _by_term(flags_by_category: dict[str, list[bool]]) -> pd.DataFrame:
    rows, term = [], 0
    for category, flags in flags_by_category.items():
        for flag in flags:
            rows.append({"model": "m", "lang": "zh_hant", "prompt_variant": 1, "label_source": "rules",
                         "term_id": term, "category": category, "misaligned_term": flag, "n_trials": 15,
                         "n_misaligned": 6 if flag else 1})
            term += 1
    return pd.DataFrame(rows)


def test_misalignment_by_category_counts_and_tests_by_hand():
    # travel: 6 of 8 terms misaligned; food: 1 of 12; housing: 0 of 10
    table = misalignment_by_category(_by_term({"travel": [True] * 6 + [False] * 2, "food": [True] + [False] * 11,
                                               "housing": [False] * 10}), permutations=4000)
    table = table.set_index("category")
    assert table.loc["travel", ["n_terms", "n_misaligned_terms", "n_answers", "n_misaligned_answers"]].tolist() == \
        [8, 6, 120, 6 * 6 + 2 * 1]
    assert table.loc["travel", "pct_misaligned_terms"] == 75.0
    assert table.loc["food", "pct_misaligned_answers"] == pytest.approx(100 * (6 + 11) / 180)
    counts = np.array([[1, 11], [0, 10], [6, 2]])  # food, housing, travel (sorted), misaligned / not
    expected = (counts.sum(1, keepdims=True) * counts.sum(0)) / counts.sum()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert table["chi2"].iloc[0] == pytest.approx(chi2) and table["chi2_df"].iloc[0] == 2
    assert table["chi2_p"].iloc[0] == pytest.approx(stats.chi2.sf(chi2, 2))
    assert table["min_expected"].iloc[0] == pytest.approx(expected.min())
    assert table["chi2_permutation_p"].iloc[0] < 0.01  # travel stands out
    assert table.loc["travel", "fisher_p_vs_rest"] == pytest.approx(stats.fisher_exact([[6, 2], [1, 21]]).pvalue)
    assert table.loc["travel", "fisher_p_vs_rest_bh"] < 0.05


def test_categories_that_do_not_differ_are_not_called_different():
    table = misalignment_by_category(_by_term({"a": [True, False] * 5, "b": [True, False] * 5}), permutations=2000)
    assert table["chi2"].iloc[0] == 0 and table["chi2_permutation_p"].iloc[0] == 1.0
    untested = misalignment_by_category(_by_term({"a": [False] * 4, "b": [False] * 3}))
    assert untested["chi2"].isna().all() and (untested["permutations"] == 0).all()


def test_the_permutation_p_value_matches_the_exact_one_of_every_assignment():
    """Both margins fixed: the exact p-value enumerates every way of placing the misaligned terms among the terms;
    the Monte Carlo one (10,000 shuffles, shared by groups of the same category sizes and count) is within its
    sampling error of it, and groups with the same sizes and count but other terms misaligned share the draw."""
    from itertools import combinations

    from sctc_assets.lib.term.categories import chi2_statistic, permutation_p

    categories = np.array(["a"] * 3 + ["b"] * 3 + ["c"] * 4)
    flags = np.array([True, True, True, False, False, False, True, False, False, False])
    observed = chi2_statistic(np.array([[3, 0], [0, 3], [1, 3]]))
    sizes = {"a": 3, "b": 3, "c": 4}
    hits = total = 0
    for chosen in combinations(range(10), 4):
        placed = np.zeros(10, bool)
        placed[list(chosen)] = True
        table = np.array([[placed[categories == name].sum(), sizes[name] - placed[categories == name].sum()]
                          for name in sizes])
        hits += chi2_statistic(table) >= observed - 1e-9
        total += 1
    exact = hits / total
    estimate = permutation_p(categories, flags, observed)
    assert abs(estimate - exact) < 4 * np.sqrt(exact * (1 - exact) / 10_000) + 1e-4
    assert permutation_p(categories, flags[::-1].copy(), observed) == estimate
