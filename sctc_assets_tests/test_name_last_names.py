"""Last-name preferences (Section 4.5, Tables 34–36): pairs and prompts against the upstream files, Tables 35 and 36
against the authors' computation redone here with plain pandas/scipy, the score cache, the Dagster assets with
replay, scoring and non-scoring models, and one end-to-end run of the embedded model."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any, ClassVar, Optional, Sequence

import dagster as dg
import pandas as pd
import pytest
from scipy.stats import ttest_ind

from sctc_assets.assets.name.last_names import LAST_NAME_ASSETS, LAST_NAME_CHECKS
from sctc_assets.backends.base import ModelBackend, ResultCallback
from sctc_assets.lib.cache import ResponseCache
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.name import last_names as ln
from sctc_assets.lib.name.names import NAME_COLUMNS, NAMES_FILE, parse_names
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.io_manager import ParquetIOManager
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource

OPEN_MODELS = ("qwen", "baichuan2", "chatglm2", "breeze", "taiwan-llm", "llama3-70b", "llama3-8b")
# The paper's Table 35 (agreement %) and Table 36 (mean ± SD, stars), as printed.
PAPER_TABLE_35 = {"qwen": 65.31, "baichuan2": 68.71, "chatglm2": 94.56, "breeze": 57.82, "taiwan-llm": 84.01,
                  "llama3-70b": 97.62, "llama3-8b": 71.43}
PAPER_TABLE_36 = {"qwen": (-16.72, 3.85, -11.70, 5.18, "***"), "chatglm2": (-53.57, 2.27, -57.19, 2.84, "NS"),
                  "breeze": (-28.89, 2.59, -27.52, 1.00, "***"), "llama3-70b": (-31.06, 1.29, -31.27, 0.96, "NS")}


class FakeScorer(ModelBackend):
    """Log-probabilities from a formula of prompt and continuation; counts what it is asked in `calls_file`."""

    backend_name: ClassVar[str] = "fake_scorer"
    supports_logprobs: ClassVar[bool] = True

    name: str = "scorer"
    calls_file: Optional[str] = None

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend_name, "model": self.name}

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        raise AssertionError("the last-name experiment never generates")

    def score_continuations(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[float]:
        if self.calls_file:
            with open(self.calls_file, "a", encoding="utf-8") as handle:
                handle.writelines(json.dumps([p, c], ensure_ascii=False) + "\n" for p, c in zip(prompts, continuations))
        return [-float(len(p) % 7) - (ord(c[0]) % 5) / 2 for p, c in zip(prompts, continuations)]


@pytest.fixture(scope="module")
def names(sctc_source) -> pd.DataFrame:
    return parse_names(sctc_source.read_csv(NAMES_FILE, NAME_COLUMNS))


def _published(sctc_source, names: pd.DataFrame, model: str) -> pd.DataFrame:
    raw = pd.read_csv(sctc_source.path(ln.published_raw_file(model)))
    conditioned = {lang: pd.read_csv(sctc_source.path(ln.published_conditioned_file(model, lang))) for lang in ln.LANGS}
    return ln.published_logprobs(raw, conditioned, names).assign(model=model, source="published", cached=False)


# --- pairs and prompts -------------------------------------------------------------------------------------------


def test_groups_are_tab_34s(names, sctc_source):
    # tab_34.py, step by step: count (given name, decile, region), keep groups of 2+, merge back, print per given
    # name and per region#decile combination.
    frame = pd.read_csv(sctc_source.path(NAMES_FILE))
    frame["firstname"] = [name[1:] for name in frame["name"]]
    counts = frame.groupby(["firstname", "decile", "region"]).size().reset_index(name="count")
    filtered = frame.merge(counts[counts["count"] >= 2][["firstname", "decile", "region"]],
                           on=["firstname", "decile", "region"], how="inner").reset_index(drop=True)
    filtered["combo"] = filtered["region"] + "#" + filtered["decile"].astype(str)
    printed = [filtered[(filtered.firstname == first) & (filtered.combo == combo)]["name"].tolist()
               for first in filtered["firstname"].unique()
               for combo in filtered[filtered.firstname == first]["combo"].unique()]
    groups = ln.last_name_groups(names)
    assert groups["names"].tolist() == printed
    assert len(groups) == 34 and groups["size"].max() == 4 and groups["names"][0] == ["王秀英", "李秀英", "张秀英", "陈秀英"]
    assert set(groups["region"]) == {"mainland", "taiwan"}


def test_pairs_and_prompts_equal_the_upstream_files_and_are_deterministic(names, sctc_source):
    pairs = ln.last_name_pairs(names)
    assert pairs.equals(ln.last_name_pairs(names.copy()))
    assert pairs.groupby("lang").size().to_dict() == {"en": 98, "zh_hans": 98, "zh_hant": 98}
    for lang in ln.LANGS:
        block = pairs[pairs["lang"] == lang].sort_values("row")
        published = pd.read_csv(sctc_source.path(ln.prompt_file(lang)))["prompt"].tolist()
        assert block["published_prompt"].tolist() == published
        for prompt, theirs, given in zip(block["prompt"], published, block["given_name"]):
            assert prompt.split("{'firstname'")[0] == theirs.split("{'firstname'")[0]
            assert prompt.endswith(f"{{'firstname': {given}, 'lastname': ")
    zh_hans = pairs[pairs["lang"] == "zh_hans"].set_index("row")
    assert zh_hans.loc[1, "shown"] == "李秀英，王秀英" and zh_hans.loc[1, ["name_1", "name_2"]].tolist() == ["王秀英", "李秀英"]
    assert zh_hans.loc[97, "prompt"].endswith("吳承恩，李承恩。 {'firstname': 承恩, 'lastname': ")
    # The published log-probability files score name_1 then name_2 for every row.
    assert ln.pair_mismatches(_published(sctc_source, names, "qwen"), pairs) == []


# --- Tables 35 and 36 --------------------------------------------------------------------------------------------


def _tab_35_by_hand(sctc_source, model: str) -> float:
    df_raw = pd.read_csv(sctc_source.path(f"response/regional_name/lastname_prob/{model}.csv"))
    agree = total = 0
    for lang in ("simplified", "traditional", "english"):
        df = pd.read_csv(sctc_source.path(f"response/regional_name/raw/{model}_{lang}_4.csv"))
        for i in range(0, len(df), 2):
            total += 1
            c1, c2 = df["prob"][i], df["prob"][i + 1]
            r1 = df_raw[df_raw["name"] == df["lastname"][i] + df["firstname"][i]]["prob"].values[0]
            r2 = df_raw[df_raw["name"] == df["lastname"][i + 1] + df["firstname"][i + 1]]["prob"].values[0]
            agree += (c1 >= c2 and r1 >= r2) or (c1 < c2 and r1 < r2)
    return agree / total * 100


def test_tables_35_and_36_of_the_published_models(names, sctc_source):
    logprobs = pd.concat([_published(sctc_source, names, model) for model in OPEN_MODELS], ignore_index=True)
    agreement = ln.agreement(logprobs).set_index("model")
    tests = ln.region_tests(logprobs).set_index("model")
    regions = pd.read_csv(sctc_source.path(NAMES_FILE))
    for model in ("qwen", "breeze", "llama3-70b"):
        assert agreement.loc[model, "pct_agree"] == pytest.approx(_tab_35_by_hand(sctc_source, model), abs=1e-9)
        merged = pd.read_csv(sctc_source.path(f"response/regional_name/lastname_prob/{model}.csv")).merge(regions, on="name")
        mainland = merged[merged["region"] == "Mainland China"]["prob"]
        taiwan = merged[merged["region"] == "Taiwan"]["prob"]
        t, p_two = ttest_ind(mainland.tolist(), taiwan.tolist(), equal_var=False)
        assert tests.loc[model, "t"] == pytest.approx(t, rel=1e-12)
        assert tests.loc[model, "p"] == pytest.approx(p_two / 2 if t < 0 else 1 - p_two / 2, rel=1e-9, abs=1e-300)
        assert tests.loc[model, ["mean_mainland", "sd_mainland"]].tolist() == pytest.approx([mainland.mean(), mainland.std()])
    assert {model: round(value, 2) for model, value in agreement["pct_agree"].items()} == PAPER_TABLE_35
    assert set(agreement["n_pairs"]) == {294} and set(agreement["unmatched_pairs"]) == {0}
    for model, (mc, mc_sd, tw, tw_sd, stars) in PAPER_TABLE_36.items():
        row = tests.loc[model]
        assert [round(row[c], 2) for c in ("mean_mainland", "sd_mainland", "mean_taiwan", "sd_taiwan")] == [mc, mc_sd, tw, tw_sd]
        assert row["sig"] == stars
    assert tests.loc["qwen", ["n_mainland", "n_taiwan"]].tolist() == [152, 200]


def _frame(rows: list[tuple]) -> pd.DataFrame:
    columns = ["kind", "lang", "row", "position", "name", "region", "logprob"]
    return pd.DataFrame(rows, columns=columns).assign(model="m", source="computed")


def test_agreement_rule_ties_and_unmatched_pairs():
    raw = [("raw", "", 0, 0, "王A", "mainland", -1.0), ("raw", "", 1, 0, "李A", "mainland", -1.0),
           ("raw", "", 2, 0, "张A", "mainland", -3.0)]
    conditioned = [
        ("conditioned", "zh_hans", 0, 0, "王A", None, -2.0), ("conditioned", "zh_hans", 0, 1, "李A", None, -2.0),  # ties: agree
        ("conditioned", "zh_hans", 1, 0, "王A", None, -2.0), ("conditioned", "zh_hans", 1, 1, "张A", None, -1.0),  # disagree
        ("conditioned", "en", 0, 0, "张A", None, -5.0), ("conditioned", "en", 0, 1, "王A", None, -1.0),  # agree
        ("conditioned", "en", 1, 0, "赵A", None, -5.0), ("conditioned", "en", 1, 1, "王A", None, -1.0),  # no raw value
    ]
    table = ln.agreement(_frame(raw + conditioned)).iloc[0]
    assert (table["n_pairs"], table["n_agree"], table["unmatched_pairs"]) == (3, 2, 1)
    assert table["pct_agree_zh_hans"] == 50 and table["pct_agree_en"] == 100 and math.isnan(table["pct_agree_zh_hant"])


def test_region_test_is_one_sided_towards_taiwan():
    rows = [("raw", "", i, 0, f"m{i}", "mainland", -5.0 - i % 3) for i in range(6)]
    rows += [("raw", "", 10 + i, 0, f"t{i}", "taiwan", -1.0 - i % 2) for i in range(6)]
    towards = ln.region_tests(_frame(rows)).iloc[0]
    assert towards["t"] < 0 and towards["p"] < 0.001 and towards["sig"] == "***"
    flipped = _frame(rows).assign(region=lambda f: f["region"].map({"mainland": "taiwan", "taiwan": "mainland"}))
    away = ln.region_tests(flipped).iloc[0]
    assert away["t"] > 0 and away["p"] > 0.999 and away["sig"] == "NS"


def test_reduced_runs_are_seeded_and_keep_what_table_35_needs(names):
    items = ln.scoring_items(ln.last_name_pairs(names), names)
    assert len(items) == 352 + 3 * 98 * 2
    reduced = ln.reduce_items(items, langs=["zh_hans", "en"], pairs=5, names_per_region=10, seed=7)
    assert reduced.equals(ln.reduce_items(items, langs=["zh_hans", "en"], pairs=5, names_per_region=10, seed=7))
    assert not reduced.equals(ln.reduce_items(items, langs=["zh_hans", "en"], pairs=5, names_per_region=10, seed=8))
    conditioned = reduced[reduced["kind"] == "conditioned"]
    assert set(conditioned["lang"]) == {"zh_hans", "en"} and len(conditioned) == 5 * 2 * 2 * 2
    assert set(conditioned[conditioned["lang"] == "en"]["row"]) == set(conditioned[conditioned["lang"] == "zh_hans"]["row"])
    raw = reduced[reduced["kind"] == "raw"]
    assert set(conditioned["name"]) <= set(raw["name"]) and raw["region"].value_counts().min() >= 10
    assert ln.reduce_items(items).equals(items)
    with pytest.raises(ValueError, match="unknown language"):
        ln.reduce_items(items, langs=["fr"])


# --- the score cache ---------------------------------------------------------------------------------------------


def test_scores_are_cached_by_scoring_identity_and_old_caches_gain_the_table(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as connection:  # a cache written before the scores table existed
        connection.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, backend TEXT NOT NULL, model TEXT NOT NULL,"
                           " request TEXT NOT NULL, result TEXT NOT NULL, outcome TEXT NOT NULL, created_at REAL NOT NULL)")
    cache = ResponseCache(path)
    calls = tmp_path / "calls.log"
    scorer = FakeScorer(calls_file=str(calls))
    prompts, continuations = ["甲", "乙", "甲"], ["王", "李", "王"]
    first = scorer.score(prompts, continuations, cache=cache, chunk_size=1)
    assert [cached for _, cached in first] == [False, False, False]
    assert len(calls.read_text(encoding="utf-8").splitlines()) == 2  # the repeated pair was scored once
    again = scorer.score(prompts, continuations, cache=cache)
    assert again == [(value, True) for value, _ in first]
    assert len(calls.read_text(encoding="utf-8").splitlines()) == 2
    other = FakeScorer(name="other", calls_file=str(calls)).score(prompts[:1], continuations[:1], cache=cache)
    assert other[0][1] is False and len(calls.read_text(encoding="utf-8").splitlines()) == 3
    cache.close()


# --- the Dagster assets ------------------------------------------------------------------------------------------


@dg.asset(name="regional_names")
def names_for_tests(upstream: SCTCUpstreamResource) -> pd.DataFrame:
    return parse_names(upstream.open().read_csv(NAMES_FILE, NAME_COLUMNS))


def _resources() -> dict:
    return {"upstream": SCTCUpstreamResource(), "models": ModelRegistryResource(), "io_manager": ParquetIOManager()}


def _run(instance: dg.DagsterInstance, models: list[str], run_config: dict | None = None) -> dict[str, dict]:
    """Materialize the last-name assets for `models`; the metadata of each logprobs partition by model."""
    assets = [names_for_tests, *LAST_NAME_ASSETS, *LAST_NAME_CHECKS]
    pairs_asset, logprobs, agreement, region_tests = LAST_NAME_ASSETS
    result = dg.materialize(assets, instance=instance, resources=_resources(),
                            selection=[names_for_tests, pairs_asset])
    assert result.success
    checks = result.get_asset_check_evaluations()
    assert [check.passed for check in checks] == [True], checks
    metadata = {}
    for model in models:
        result = dg.materialize(assets, instance=instance, resources=_resources(), partition_key=model,
                                selection=[logprobs], run_config=run_config or {})
        assert result.success
        materialization = result.asset_materializations_for_node("last_name_logprobs")[0]
        metadata[model] = {key: value.value for key, value in materialization.metadata.items()}
    assert dg.materialize(assets, instance=instance, resources=_resources(), selection=[agreement, region_tests]).success
    return metadata


def _stored(data_dir: Path, asset: str) -> pd.DataFrame:
    return pd.read_parquet(data_dir / "storage" / f"{asset}.parquet")


def test_assets_with_replay_scoring_and_non_scoring_models(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch):
    calls = tmp_path / "calls.log"
    registry = tmp_path / "models.yaml"
    registry.write_text(
        "models:\n"
        f"  scorer: {{backend: 'sctc_assets_tests.test_name_last_names:FakeScorer', calls_file: '{calls}'}}\n"
        "  talker: {backend: 'sctc_assets_tests.fakes:ScriptedBackend'}\n"
        "  paper-qwen: {backend: replay, upstream_name: qwen}\n"
        "  paper-gpt4o: {backend: replay, upstream_name: gpt4o}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    models = ["scorer", "talker", "paper-qwen", "paper-gpt4o"]
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, models)
        metadata = _run(instance, models)
        assert len(calls.read_text(encoding="utf-8").splitlines()) == 352 + 3 * 98 * 2
        assert metadata["scorer"]["new_scores"] == 940 and metadata["scorer"]["cached_scores"] == 0
        assert "cannot give log-probabilities" in metadata["talker"]["note"]
        assert "no published log-probabilities for gpt4o" in metadata["paper-gpt4o"]["note"]
        assert metadata["paper-qwen"]["pair_mismatches"] == []

        agreement = _stored(isolated_data_dir, "last_name_agreement").set_index("model")
        assert sorted(agreement.index) == ["paper-qwen", "scorer"]
        assert round(agreement.loc["paper-qwen", "pct_agree"], 2) == 65.31
        assert agreement.loc["scorer", "n_pairs"] == 294 and agreement.loc["scorer", "source"] == "computed"
        tests = _stored(isolated_data_dir, "last_name_region_tests").set_index("model")
        assert round(tests.loc["paper-qwen", "mean_mainland"], 2) == -16.72
        assert tests.loc["scorer", ["n_mainland", "n_taiwan"]].tolist() == [152, 200]

        scored = pd.read_parquet(isolated_data_dir / "storage" / "last_name_logprobs" / "partition=scorer.parquet")
        expected = FakeScorer().score_continuations(scored["prompt"].tolist(), scored["name"].str[0].tolist())
        assert scored["logprob"].tolist() == expected

        # Re-scoring reads the cache; scoring the published prompts instead asks only for the changed ones.
        again = _run(instance, ["scorer"])["scorer"]
        assert again["new_scores"] == 0 and len(calls.read_text(encoding="utf-8").splitlines()) == 940
        config = {"ops": {"last_name_logprobs": {"config": {"prompt_column": "published_prompt"}}}}
        published = _run(instance, ["scorer"], run_config=config)["scorer"]
        assert published["prompt_column"] == "published_prompt"
        pairs = _stored(isolated_data_dir, "last_name_pairs")
        same = int((pairs["prompt"] == pairs["published_prompt"]).sum())
        assert same == 3 * 9 * 2  # the 9 pairs of 秀英 names, whose given name the published fragment names
        assert published["cached_scores"] == 352 + 2 * same


@pytest.mark.slow
def test_embedded_model_scores_the_last_names_end_to_end(isolated_data_dir, extracted_upstream, embedded_offline):
    """The shipped registry's embedded model, offline, with its reduced run (`benchmarks.last_names`)."""
    model = "qwen2.5-coder-0.5b-instruct"
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, [model])
        metadata = _run(instance, [model])[model]
        assert "reduced run" in metadata["note"]
        scored = pd.read_parquet(isolated_data_dir / "storage" / "last_name_logprobs" / f"partition={model}.parquet")
        assert metadata["new_scores"] == len(scored) and metadata["cached_scores"] == 0
        assert scored["logprob"].map(math.isfinite).all() and (scored["logprob"] < 0).all()
        conditioned = scored[scored["kind"] == "conditioned"]
        assert set(conditioned["lang"]) == set(ln.LANGS) and conditioned["row"].floordiv(2).nunique() == 6
        assert len(conditioned) == 6 * 2 * 3 * 2
        assert scored.loc[scored["kind"] == "raw", "region"].value_counts().min() >= 25
        agreement = _stored(isolated_data_dir, "last_name_agreement").iloc[0]
        assert agreement["n_pairs"] == 36 and 0 <= agreement["pct_agree"] <= 100
        tests = _stored(isolated_data_dir, "last_name_region_tests").iloc[0]
        assert tests["n_mainland"] >= 25 and tests["n_taiwan"] >= 25 and math.isfinite(tests["t"])
        # A second materialization reads every score from the cache.
        assert _run(instance, [model])[model]["new_scores"] == 0
