"""Benchmark tables for the report tests, computed by the benchmarks' own metric functions from seeded random
answers, and written through the project's IO manager in its storage layout."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import dagster as dg
import numpy as np
import pandas as pd

import yaml

from sctc_assets.lib import bias_factors as bias
from sctc_assets.lib.name import metrics as name_metrics
from sctc_assets.lib.model_registry import ModelEntry, parse_registry
from sctc_assets.benchmarks import REPORT_INPUTS, REPORT_TABLES, RESPONSE_TABLES, report_sections
from sctc_assets.lib.report import ReportInputs, ReportResult, build_report, read_tables, response_usage
from sctc_assets.lib.reviews.metrics import compare
from sctc_assets.lib.sovereignty.condition_effects import condition_effects
from sctc_assets.lib.sovereignty.drift import DRIFT_COLUMNS, compare_epochs
from sctc_assets.lib.sovereignty.groups import origin_tests
from sctc_assets.lib.sovereignty.metrics import model_summary, with_bh
from sctc_assets.lib.term import metrics as term_metrics
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME, model_lang_partitions, models_partitions
from sctc_assets.resources.io_manager import ParquetIOManager

REPLAYS = ("paper-qwen", "paper-gpt4o")
LIVE = "my-gpt"
TSB = "tsb-demo"
SECRET_KEY_VALUE = "sk-live-THIS-MUST-NEVER-SHOW-1234"
URL_PASSWORD = "hunter2-url-password"

REGISTRY_YAML = f"""
models:
  paper-qwen: {{backend: replay, upstream_name: qwen, description: Qwen1.5-7B-Chat (paper)}}
  paper-gpt4o: {{backend: replay, upstream_name: gpt4o, description: gpt-4o (paper)}}
  {LIVE}:
    backend: openai
    description: >-
      a live endpoint, gpt-4o-mini behind the team's OpenAI-compatible proxy at temperature 0 (the paper's judge
      model, asked as a subject)
    model: gpt-4o-mini
    base_url: https://user:{URL_PASSWORD}@api.example.test/v1
    api_key_env: MY_GPT_KEY
    api_key: {SECRET_KEY_VALUE}
    price_input_per_mtok: 0.15
    price_output_per_mtok: 0.60
  {TSB}: {{backend: tsb_replay, results_file: /nonexistent/demo_bilingual.json, description: a Pro result file}}
"""


def term_labels(models: Iterable[str], rng: np.random.Generator, trials: dict[str, int]) -> pd.DataFrame:
    frames = []
    for model in models:
        sources = ["rules"] + (["upstream"] if model.startswith("paper-") else [])
        count = trials.get(model, 15)
        for source in sources:
            for lang, weights in (("zh_hans", [0.5, 0.05, 0.45]), ("zh_hant", [0.2, 0.35, 0.45])):
                for variant in (1, 2, 3):
                    frames.append(pd.DataFrame({
                        "model": model, "lang": lang, "prompt_variant": variant, "label_source": source,
                        "term_id": np.repeat(np.arange(110), count), "trial": np.tile(np.arange(count), 110),
                        "label": rng.choice(["correct", "misaligned", "incorrect"], size=110 * count, p=weights)}))
    return pd.concat(frames, ignore_index=True)


def name_selections(models: Iterable[str], rng: np.random.Generator, experiments: dict[str, tuple[str, ...]],
                    shuffles: int = 6) -> pd.DataFrame:
    rows = []
    for model in models:
        sources = ["rules"] + (["upstream"] if model.startswith("paper-") else [])
        for source in sources:
            for lang in ("zh_hans", "zh_hant", "en"):
                for experiment in experiments.get(model, ("main",)):
                    for list_id in range(5):
                        for shuffle in range(shuffles):
                            region = rng.choice(["mainland", "taiwan", None], p=[0.35, 0.5, 0.15])
                            rows.append((model, lang, experiment, source, "lists", list_id, shuffle, region,
                                         "valid" if region else "multiple", None, "cue"))
    return pd.DataFrame(rows, columns=["model", "lang", "experiment", "extraction_source", "candidate_scope",
                                       "list_id", "shuffle", "region", "status", "script_variant_of", "rule"])


def sovereignty_results(models: Iterable[str], rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for model in models:
        langs = ("zh_hant", "en") if model == TSB else ("zh_hant", "zh_hans", "en")
        for rule in ("code", "paper"):
            for lang in langs:
                for prompt in range(10):
                    rows.append((model, rule, "stage1_sovereignty", lang, f"S1-{prompt + 1:03d}", 0,
                                 bool(rng.random() < (0.9 if lang == "en" else 0.6)), "none"))
    # The live model was also asked under a persona (`--sovereignty-conditions taiwan-user`; a replay answers none
    # only), drawn apart so the other tables' draws stay what they were.
    persona = np.random.default_rng(7)
    for model in [model for model in models if model != TSB]:
        for rule in ("code", "paper"):
            for lang in ("zh_hant", "zh_hans", "en"):
                for prompt in range(10):
                    rows.append((model, rule, "stage1_sovereignty", lang, f"S1-{prompt + 1:03d}", 0,
                                 bool(persona.random() < 0.8), "taiwan-user"))
    return pd.DataFrame(rows, columns=["model", "scoring_rule", "prompt_set", "lang", "prompt_id", "sample",
                                       "passed", "condition"])


# The drift fixture: English answers that passed under epoch 2026-02 and fail under 2026-08 on these prompts.
DRIFT_FLIPS = ("S1-002", "S1-005", "S1-009")


def sovereignty_drift(model: str) -> pd.DataFrame:
    """`sovereignty_drift` rows as `lib/sovereignty/drift.compare_epochs` computes them, for two epochs of `model`."""
    rows = []
    for lang in ("zh_hant", "en"):
        scored = {}
        for epoch in ("2026-02", "2026-08"):
            passed = [not (epoch == "2026-08" and lang == "en" and f"S1-{prompt + 1:03d}" in DRIFT_FLIPS)
                      for prompt in range(10)]
            scored[epoch] = pd.DataFrame({"scoring_rule": "code", "prompt_set": "stage1_sovereignty",
                                          "prompt_id": [f"S1-{prompt + 1:03d}" for prompt in range(10)],
                                          "sample": 0, "passed": passed})
        rows += compare_epochs(model, lang, ("2026-02", "2026-08"), 10, 1, scored,
                               {"2026-02": ["system_fingerprint=fp_1"], "2026-08": ["system_fingerprint=fp_2"]},
                               {"2026-02": 10, "2026-08": 10})
    table = pd.DataFrame(rows, columns=DRIFT_COLUMNS)
    return table[table["scoring_rule"] == "code"].reset_index(drop=True)


def review_metrics(model: str, rng: np.random.Generator, pairs: int = 300) -> pd.DataFrame:
    rows = []
    truth_tw, truth_cn = rng.integers(1, 11, pairs), rng.integers(1, 11, pairs)
    lengths = rng.choice(["short", "long"], pairs)
    for fmt in ("structured", "plain", "shuffled"):
        pred_tw = np.clip(truth_tw + rng.integers(-2, 3, pairs), 1, 10).astype(float)
        pred_cn = np.clip(truth_cn + rng.integers(-1, 2, pairs), 1, 10).astype(float)
        pred_tw[:3] = np.nan  # an invalid answer drops its pair
        for subset in ("short", "long", "all"):
            mask = np.ones(pairs, bool) if subset == "all" else lengths == subset
            rows.append({"model": model, "format": fmt, "analysis": "length", "subset": subset,
                         **compare(truth_tw[mask], pred_tw[mask], truth_cn[mask], pred_cn[mask])})
    return pd.DataFrame(rows)


def review_prediction_pairs(model: str, rng: np.random.Generator, pairs: int = 120) -> pd.DataFrame:
    truth_tw, truth_cn = rng.integers(1, 11, pairs), rng.integers(1, 11, pairs)
    frames = []
    for fmt in ("structured", "plain", "shuffled"):
        frames.append(pd.DataFrame({
            "model": model, "format": fmt, "pair_id": range(pairs),
            "length_group": rng.choice(["short", "long"], pairs),
            "review_id_tw": [f"t{i}" for i in range(pairs)], "review_id_cn": [f"c{i}" for i in range(pairs)],
            "score_tw": truth_tw, "score_cn": truth_cn,
            "prediction_tw": pd.array(np.clip(truth_tw + rng.integers(-2, 3, pairs), 1, 10), dtype="Int64"),
            "prediction_cn": pd.array(np.clip(truth_cn + rng.integers(-1, 2, pairs), 1, 10), dtype="Int64"),
            "both_valid": True}))
    return pd.concat(frames, ignore_index=True)


def review_sentiment_pilot(model: str, rng: np.random.Generator) -> pd.DataFrame:
    """The pilot's table from made-up answers: 30 reviews per variety, bin and class, better on longer texts."""
    from sctc_assets.lib.reviews.pilot import LABELS, pilot_table

    rows = []
    for variety in ("tw", "cn"):
        for length_bin in range(0, 50, 2):
            for truth in LABELS:
                for index in range(30):
                    right = rng.random() < 0.55 + 0.3 * length_bin / 50
                    wrong = str(rng.choice([label for label in LABELS if label != truth]))
                    rows.append({"model": model, "variety": variety, "length_bin": length_bin, "sentiment": truth,
                                 "predicted_sentiment": truth if right else wrong,
                                 "status": "valid"})
    return pilot_table(pd.DataFrame(rows))


def review_human_agreement(model: str, rng: np.random.Generator) -> pd.DataFrame:
    """Two raters' made-up ratings of 20 reviews per variety against the stars and the model."""
    from sctc_assets.lib.reviews.human_ratings import agreement_table

    varieties = pd.DataFrame({"review_id": [f"{v}{i}" for v in ("t", "c") for i in range(20)],
                              "variety": ["tw"] * 20 + ["cn"] * 20, "score": rng.integers(1, 11, 40)})
    ratings = pd.DataFrame([{"rater": rater, "review_id": review, "pair_id": pd.NA,
                             "quality": int(rng.integers(3, 6)), "content_agreement": int(rng.integers(2, 6)),
                             "readability": pd.NA, "nativeness": int(rng.integers(1, 5)),
                             "predicted_score": int(np.clip(score + rng.integers(-2, 3), 1, 10))}
                            for rater in ("p1", "p2") for review, score in zip(varieties.review_id, varieties.score)])
    predictions = pd.DataFrame({"model": model, "format": "structured", "review_id": varieties.review_id,
                                "version": "original", "status": "valid",
                                "prediction": np.clip(varieties.score + rng.integers(-1, 2, 40), 1, 10)})
    return agreement_table(ratings, varieties, predictions)


def regional_names(rng: np.random.Generator) -> pd.DataFrame:
    return pd.DataFrame({"name": [f"n{i}" for i in range(60)],
                         "region": ["mainland"] * 30 + ["taiwan"] * 30,
                         "count": np.concatenate([rng.normal(80000, 30000, 30).clip(1000),
                                                  rng.normal(1700, 700, 30).clip(50)]).round()})


def responses(model: str, lang: str, n: int, *, live: bool) -> pd.DataFrame:
    return pd.DataFrame({
        "model": model, "lang": lang, "response": "答", "outcome": ["ok"] * (n - 1) + ["error"],
        "input_tokens": pd.array([20] * n if live else [None] * n, dtype="Int64"),
        "output_tokens": pd.array([5] * n if live else [None] * n, dtype="Int64"),
        "cached": [index % 2 == 0 for index in range(n)],
        "served_model": ["gpt-4o-mini-2024-07-18" if live else None] * n,
        "system_fingerprint": ["fp_test123" if live else None] * n,
    })


class TableWriter:
    """Writes tables through the IO manager's `handle_output`, as an asset's output would be."""

    def __init__(self, storage: Path):
        self.io = ParquetIOManager(base_dir=str(storage))
        self.instance = dg.DagsterInstance.ephemeral()
        self.instance.add_dynamic_partitions(MODELS_PARTITION_NAME, [*REPLAYS, LIVE, TSB])

    def __call__(self, name: str, frame: pd.DataFrame, *, partitions_def=None, key=None) -> None:
        context = dg.build_output_context(asset_key=dg.AssetKey(name), partition_key=key,
                                          asset_partitions_def=partitions_def, instance=self.instance)
        self.io.handle_output(context, frame)


def write_benchmark_tables(storage: Path, *, benchmarks: Iterable[str] = ("term", "name", "sovereignty", "reviews"),
                           seed: int = 7) -> list[str]:
    """Write every report input of the chosen benchmarks for two replay models, one live model (a reduced term
    run, two name experiments) and a Pro-study replay (sovereignty only); returns the models written."""
    rng = np.random.default_rng(seed)
    write = TableWriter(storage)
    benchmarks = set(benchmarks)
    written: list[str] = []
    term_models = [*REPLAYS, LIVE]
    if "term" in benchmarks:
        labels = term_labels(term_models, rng, trials={LIVE: 1})
        gpt_ids = set(range(0, 110, 5))
        subsets = {"all": set(range(110)), "no_gpt_definitions": set(range(110)) - gpt_ids}
        rates = term_metrics.choice_rates(labels, subsets)
        for model in term_models:
            write("term_choice_rates", rates[rates["model"] == model], partitions_def=models_partitions, key=model)
            for lang in ("zh_hans", "zh_hant"):
                write("term_responses", responses(model, lang, 40, live=model == LIVE),
                      partitions_def=model_lang_partitions(("zh_hans", "zh_hant")),
                      key=dg.MultiPartitionKey({"model": model, "lang": lang}))
        write("term_choice_tests", term_metrics.choice_tests(rates))
        # the bias factors of each model: its labels against a made-up corpus ratio per term (the figure's input)
        terms = pd.DataFrame({"term_id": range(110), "term_mainland": "甲", "term_taiwan": "乙", "category": "c"})
        by_term = term_metrics.misalignment_by_term(labels, terms)
        corpus = pd.DataFrame({"corpus": rng.normal(size=110)}, index=range(110))
        for model in term_models:
            table = bias.term_bias_factors(by_term[by_term["model"] == model], corpus, model=model,
                                           label_source="rules", tokenizer="", simplified="zh_hans",
                                           traditional="zh_hant", missing={"tokens": "none in this test"})
            write("term_bias_factors", table, partitions_def=models_partitions, key=model)
        written += term_models
    if "name" in benchmarks:
        experiments = {model: ("main", "popularity", "same_name_script", "gender_balanced") for model in REPLAYS}
        experiments[LIVE] = ("main", "same_name_script")
        selections = name_selections(term_models, rng, experiments)
        rates = name_metrics.choice_rates(selections)
        curves = name_metrics.shuffle_curve(selections)
        published = pd.DataFrame([{"model": model, "lang": lang, "source": "upstream_permutation_runs",
                                   "experiment": "main", "shuffles": k, "n": 2000, "n_mainland": 700 + k,
                                   "n_taiwan": 1000, "pct_mainland_of_all": (700 + k) / 20,
                                   "mainland_rate": (700 + k) / (1700 + k)}
                                  for model in REPLAYS for lang in ("zh_hans", "zh_hant", "en")
                                  for k in range(20, 400, 20)])
        for model in term_models:
            write("name_choice_rates", rates[rates["model"] == model], partitions_def=models_partitions, key=model)
            stability = pd.concat([curves[curves["model"] == model], published[published["model"] == model]],
                                  ignore_index=True)
            write("name_permutation_stability", stability, partitions_def=models_partitions, key=model)
        write("name_choice_tests", name_metrics.choice_tests(rates))
        # the bias factors of each model: its choices against a made-up corpus ratio per candidate list
        with_source = selections.assign(list_source="upstream")
        lists = with_source[["experiment", "list_source", "list_id"]].drop_duplicates()
        factors = lists.assign(corpus=rng.normal(size=len(lists)))
        for model in term_models:
            table = bias.name_bias_factors(with_source[with_source["model"] == model], factors, model=model,
                                           tokenizer="", simplified="zh_hans", traditional="zh_hant",
                                           missing={"tokens": "none in this test", "logprob": "none in this test"})
            write("name_bias_factors", table, partitions_def=models_partitions, key=model)
        write("regional_names", regional_names(rng))
        written += term_models
    if "sovereignty" in benchmarks:
        models = [LIVE, TSB]
        results = sovereignty_results(models, rng)
        summary = model_summary(results)
        for model in models:
            write("sovereignty_model_summary", summary[summary["model"] == model],
                  partitions_def=models_partitions, key=model)
        write("sovereignty_summary", with_bh(summary))
        write("sovereignty_condition_effects", condition_effects(results))
        write("sovereignty_origin_tests", origin_tests(with_bh(summary), {LIVE: "US", TSB: "CN"}))
        write("sovereignty_drift", sovereignty_drift(LIVE), partitions_def=models_partitions, key=LIVE)
        written += models
    if "reviews" in benchmarks:
        write("review_metrics", review_metrics(LIVE, rng), partitions_def=models_partitions, key=LIVE)
        write("review_prediction_pairs", review_prediction_pairs(LIVE, rng), partitions_def=models_partitions,
              key=LIVE)
        write("review_sentiment_pilot", review_sentiment_pilot(LIVE, rng), partitions_def=models_partitions, key=LIVE)
        write("review_human_agreement", review_human_agreement(LIVE, rng))
        written.append(LIVE)
    return list(dict.fromkeys(written))


def registry() -> dict[str, ModelEntry]:
    return parse_registry(yaml.safe_load(REGISTRY_YAML), source="registry.yaml")


_FULL_REPORTS: dict[Path, tuple[ReportResult, list[str]]] = {}


def full_report(base: Path) -> tuple[ReportResult, list[str]]:
    """The report over every benchmark's tables (written to `base/storage`, built into `base/out`), built once per
    test session and shared by the modules that only read it: drawing its ~24 figures is the costly part, so it
    draws them in two processes."""
    if base not in _FULL_REPORTS:
        models = write_benchmark_tables(base / "storage")
        result = build_report(ReportInputs(benchmark_tables=REPORT_INPUTS, sections=report_sections(),
                                           tables=read_tables(base / "storage", REPORT_TABLES), registry=registry(),
                                           usage=response_usage(base / "storage", RESPONSE_TABLES)),
                              base / "out", workers=2)
        _FULL_REPORTS[base] = (result, models)
    return _FULL_REPORTS[base]
