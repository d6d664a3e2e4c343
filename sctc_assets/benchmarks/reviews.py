"""Contextually aligned review pairs (Tang et al., NAACL 2025): the benchmark's spec."""

from __future__ import annotations

import argparse
from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.benchmarks.spec import (CROSS_MODEL, GENERATION, INPUTS, MODEL_LANG, PER_MODEL, AssetEntry,
                                         BenchmarkSpec, OptionRange, ReportPart, present)
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.reviews.declared import declared_varieties
from sctc_assets.lib.reviews.pairing import unpaired_counts, unpaired_reviews
from sctc_assets.lib.reviews.prompts import FORMATS
from sctc_assets.lib.cost_estimate import ExpectedAnswer, PartitionDesign, SharedRequests
from sctc_assets.lib.reviews.requests import ReviewRunSettings, review_prompt_table, review_requests, run_settings
from sctc_assets.lib.fetching import Download, location_downloads
from sctc_assets.lib.reviews.source import FIELDS, REVIEWS_ENV_VAR, default_location
from sctc_assets.lib.reviews.varieties import (DEFAULT_PAIR, REVIEW_VARIETIES, VarietyPair, pair_of_columns,
                                               variety_pair)
from sctc_assets.lib.schemas import reviews as review_schemas

ASSETS = {
    "raw_reviews": AssetEntry(INPUTS, "The review export in the paper's Table 4 fields."),
    "review_varieties": AssetEntry(INPUTS, "Reviews with their variety, rating class, length and script."),
    "review_pairs": AssetEntry(INPUTS, "Reviews of the two varieties (Taiwan and Mainland by default) paired by "
                                       "hotel, rating class and length."),
    "review_prompts": AssetEntry(INPUTS, "The rating prompts of every paired review in three formats, as written and "
                                         "converted."),
    "review_predictions": AssetEntry(MODEL_LANG, "One model's rating predictions for one prompt "
                                                 "format.", calls=GENERATION),
    "review_metrics": AssetEntry(PER_MODEL, "One model's accuracy and error per variety of the pair (Taiwan vs "
                                            "Mainland by default), with paired tests."),
    "review_paired_cis": AssetEntry(PER_MODEL, "One model's ΔAcc and ΔMSE with paired intervals, the paper's tests "
                                               "and the design's power.",
                                    code_version="2"),  # 2: no pairs, no McNemar p
    "review_significance_robustness": AssetEntry(CROSS_MODEL, "Whether each model's significant ΔAcc or ΔMSE has a "
                                                              "paired interval that excludes 0."),
    "review_translations": AssetEntry(INPUTS, "Each paired review translated into the other variety by a registered "
                                              "model (the translation control).", calls=GENERATION,
                                      opt_in="reviews_translator"),
    "review_translation_predictions": AssetEntry(MODEL_LANG, "One model's rating predictions for the translated "
                                                             "reviews in one prompt format.", calls=GENERATION,
                                                 opt_in="reviews_translator"),
    "review_translation_control": AssetEntry(PER_MODEL, "One model's Table 3: each review as written against its "
                                                        "OpenCC conversion and its model translation.",
                                             opt_in="reviews_translator"),
    "review_sentiment_predictions": AssetEntry(PER_MODEL, "One model's three-class sentiment answers for Appendix E's "
                                                          "pilot by review length.", calls=GENERATION,
                                               opt_in="reviews_pilot"),
    "review_sentiment_pilot": AssetEntry(PER_MODEL, "One model's pilot accuracy and MSE per variety, 10-character "
                                                    "bin and sentiment class (Figure 2).", opt_in="reviews_pilot"),
    "review_prediction_pairs": AssetEntry(PER_MODEL, "One model's two predictions and the two stars of every asked "
                                                     "pair, per format (Figures 3–4)."),
    "review_human_agreement": AssetEntry(CROSS_MODEL, "Imported human ratings (Appendix B) against the stars and "
                                                      "each model's predictions."),
}


def _assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return key, value


def reviews_arguments(parser: Any) -> None:
    group = parser.add_argument_group("review benchmark (--benchmarks reviews; without --models only the "
                                      "model-independent assets run)")
    group.add_argument("--reviews", metavar="PATH|URL",
                       help=f"review export: .csv, .tsv, .parquet or .jsonl file or URL (default ${REVIEWS_ENV_VAR}, "
                            "else the fictional set in data/reviews/)")
    group.add_argument("--reviews-hf", metavar="DATASET", help="a Hugging Face dataset id or local dataset folder instead")
    group.add_argument("--reviews-split", metavar="SPLIT", help="split of --reviews-hf (default train)")
    group.add_argument("--reviews-hf-config", metavar="NAME",
                       help="configuration (subset) name of --reviews-hf (default: the dataset's only or default one)")
    group.add_argument("--reviews-columns", nargs="+", type=_assignment, metavar="FIELD=COLUMN",
                       help=f"your column for a field ({', '.join(FIELDS)}) when it is neither the Booking.com "
                            "name nor the field's name")
    group.add_argument("--reviews-pair", nargs=2, metavar=("A", "B"),
                       help="the two varieties compared, the reference first (Δ = B − A): "
                            f"{', '.join(row.code for row in REVIEW_VARIETIES)} (default {' '.join(DEFAULT_PAIR)}, "
                            "the paper's Taiwan and Mainland Mandarin), or varieties of --reviews-varieties-file; the "
                            "OpenCC control needs two Chinese ones")
    group.add_argument("--reviews-varieties", nargs="+", type=_assignment, metavar="REGION=VARIETY",
                       help="region code → a variety of the pair (default each of the pair's codes to itself: "
                            "tw=tw cn=cn)")
    group.add_argument("--reviews-seed", type=int, help="seed of the pairing and of the shuffled format (default 0)")
    group.add_argument("--max-pairs", type=int, metavar="N",
                       help="ask models about the first N pairs only (a random sample), N ≥ 1")
    group.add_argument("--no-translation-control", action="store_true",
                       help="skip the OpenCC-converted reviews (Table 3)")
    group.add_argument("--reviews-translator", metavar="KEY",
                       help="a registered model that translates each paired review into the other variety: Table 3's "
                            "rows for the model translation beside OpenCC's (any pair, English too)")
    group.add_argument("--reviews-varieties-file", metavar="FILE",
                       help="a YAML or CSV file declaring more varieties for --reviews-pair (code, prompt_language, "
                            "display_name, short_name, opencc, regions, the rating prompts of a new language)")
    group.add_argument("--reviews-pilot", type=int, metavar="N",
                       help="also run Appendix E's three-class sentiment pilot by length (review_sentiment_pilot): "
                            "up to N reviews per variety, 10-character bin and class (the paper's N: 200), each "
                            "one model call through the cache")


def reviews_option_problems(options: Mapping[str, Any]) -> list[str]:
    """Unknown fields of --reviews-columns, an unknown or repeated variety of --reviews-pair and varieties of
    --reviews-varieties outside the pair."""
    problems = [f"--reviews-columns: unknown field {field!r} (fields: {', '.join(FIELDS)})"
                for field, _ in options.get("reviews_columns") or [] if field not in FIELDS]
    try:
        declared = declared_varieties(options.get("reviews_varieties_file"))
    except ValueError as exc:
        problems.append(f"--reviews-varieties-file: {exc}")
        declared = ()
    try:
        codes = variety_pair(options.get("reviews_pair"), declared).codes
    except ValueError as exc:
        where = options.get("reviews_varieties_file")
        problems.append(f"--reviews-pair: {exc}" if not declared else
                        f"--reviews-pair: {str(exc)[:-1]}; varieties file {where})")
        codes = tuple(code.lower() for code in options.get("reviews_pair") or ())
    return problems + [f"--reviews-varieties: {region}={variety}: the variety must be one of {', '.join(codes)}"
                       for region, variety in options.get("reviews_varieties") or [] if variety.lower() not in codes]


def reviews_config(options: Mapping[str, Any]) -> dict:
    seed = options.get("reviews_seed")
    pair = [code.lower() for code in options["reviews_pair"]] if options.get("reviews_pair") else None
    declared = options.get("reviews_varieties_file")
    return {
        "raw_reviews": present({"location": options.get("reviews"), "hf_dataset": options.get("reviews_hf"),
                                "hf_split": options.get("reviews_split"),
                                "hf_config": options.get("reviews_hf_config"),
                                "columns": dict(options["reviews_columns"]) if options.get("reviews_columns") else None}),
        "review_varieties": present({"pair": pair, "varieties": dict(options["reviews_varieties"])
                                     if options.get("reviews_varieties") else None, "varieties_file": declared}),
        "review_pairs": present({"pair": pair, "seed": seed, "varieties_file": declared}),
        "review_prompts": present({"seed": seed, "varieties_file": declared}),
        "review_sentiment_predictions": present({"per_class": options.get("reviews_pilot"), "seed": seed}),
        "review_predictions": present({"max_pairs": options.get("max_pairs"),
                                       "translation_control": False if options.get("no_translation_control") else None}),
        "review_translations": present({"translator": options.get("reviews_translator"),
                                        "max_pairs": options.get("max_pairs"), "varieties_file": declared}),
        "review_translation_predictions": present({"seed": seed, "max_pairs": options.get("max_pairs"),
                                                   "varieties_file": declared}),
    }


def reviews_run_settings(values: Mapping[str, Any], entry: Any) -> ReviewRunSettings:
    """Pairs asked, the translation control and the system role: the run's config, else the registry entry's, else
    every pair with the converted versions."""
    return run_settings(values.get("max_pairs"), values.get("translation_control"), entry.benchmark_settings("reviews"))


def reviews_downloads(options: Mapping[str, Any]) -> list[Download]:
    """The review export where it is a URL (a Hugging Face dataset is the `datasets` library's to fetch)."""
    return [] if options.get("reviews_hf") else location_downloads([options.get("reviews") or default_location()],
                                                                   "review export")


def reviews_design(models: list[Any], options: Mapping[str, Any]) -> list[PartitionDesign]:
    """Every partition's requests for the estimate, as `review_predictions` selects them."""
    table = review_prompt_table(REVIEWS.config(options)) if models else pd.DataFrame()
    shared, designs = SharedRequests(lambda fmt, settings: review_requests(table, fmt, settings)), []
    for entry in models:
        settings = REVIEWS.settings_for(options, entry)
        for fmt in REVIEWS.langs:
            selected, requests = shared((fmt, settings), fmt, settings)
            designs.append(PartitionDesign(entry.key, fmt, selected, requests, settings))
    return designs


def reviews_translation_lines(design: Any) -> list[str]:
    """`--reviews-translator`: the translation calls and the ratings of the translations, not in the table."""
    translator = design.options.get("reviews_translator")
    if not translator:
        return []
    reviews = max((int(partition.selected.loc[partition.selected["version"] == "original", "review_id"].nunique())
                   for partition in design.partitions), default=0)
    counted = f"up to {reviews:,} calls" if reviews else "one call per paired review"
    return [f"translator {translator}: {counted}, one per paired review (cached once), then each model rates the "
            f"translated reviews in {len(FORMATS)} formats (up to {len(FORMATS) * reviews:,} more calls per model); "
            "not in the table"]


def answers_new_prompts(entry: Any) -> bool:
    """Replay backends hold published answers to other benchmarks' prompts."""
    return traits(entry.backend).answers("reviews")


def _cell(row: pd.Series, measure: str, digits: int, pair: VarietyPair) -> str:
    a, b = pair.suffixes
    return f"{row[f'{measure}_{a}']:.{digits}f} / {row[f'{measure}_{b}']:.{digits}f}"


def _pair(tables: Mapping[str, pd.DataFrame]) -> VarietyPair:
    """The pair the tables were written for: read from their per-side columns, else the paper's."""
    for name, stem in (("review_metrics", "acc"), ("review_pairs", "review_id")):
        try:
            return pair_of_columns(tables[name].columns, stem)
        except (KeyError, ValueError):
            continue
    return variety_pair()


def reviews_summary(tables: Mapping[str, pd.DataFrame], models: list[str]) -> str:
    pairs = tables.get("review_pairs")
    if pairs is None:
        return "no review_pairs were produced"
    pair = _pair(tables)
    lines = [f"Aligned review pairs: {len(pairs)} ({pair.first.display_name} vs {pair.second.display_name}; by "
             f"rating class {pairs['rating_class'].value_counts().to_dict()}, "
             f"by length {pairs['length_group'].value_counts().to_dict()})"]
    if "raw_reviews" in tables and "review_varieties" in tables:
        unpaired = unpaired_reviews(tables["raw_reviews"], tables["review_varieties"], pairs)
        lines.append(f"Unpaired reviews: {len(unpaired)} of {len(tables['raw_reviews'])}: {unpaired_counts(unpaired)}")
    metrics = tables.get("review_metrics")
    if not models:
        lines.append("No model run (add --models KEY … to score the pairs).")
    elif metrics is None or metrics.empty:
        lines.append("no review_metrics were produced")
    else:
        chosen = metrics[metrics["model"].isin(models)]
        lines.append(f"Score prediction on pairs with two valid answers, every format (Δ = {pair.difference}; "
                     "McNemar for accuracy, paired t-test for squared error)\n"
                     + _metric_table(chosen[(chosen["analysis"] == "length") & (chosen["subset"] == "all")], pair))
        control = chosen[chosen["analysis"] == "translation"]
        controls = tables.get("review_translation_control")
        if controls is not None and not controls.empty:
            lines.append(_control_summary(controls[controls["model"].isin(models)], pair))
        elif not pair.chinese and control.empty:
            lines.append(f"\nTranslation control (Table 3): skipped, {pair.first.code} and {pair.second.code} are not "
                         "both Chinese varieties (OpenCC converts between Chinese ones only)")
        elif not control.empty:
            lines.append("\nTranslation control (Table 3): each review as written and converted with OpenCC; "
                         f"{' / '.join(pair.codes)} = the variety of the text\n"
                         + _metric_table(control, pair, subset=True))
    return "\n".join(lines)


def _control_summary(controls: pd.DataFrame, pair: VarietyPair) -> str:
    """Table 3 with both controls: OpenCC's conversion and each model translator's translation."""
    untranslated = controls.groupby("control")["n_untranslated"].max().to_dict() if not controls.empty else {}
    missing = {control: int(n) for control, n in untranslated.items() if control != "opencc" and n}
    rows = [{"control": row["control"], **_metric_row(row, pair, subset=True)} for _, row in controls.iterrows()
            if row["n_pairs"] > 0]
    return ("\nTranslation control (Table 3): each review as written and converted (OpenCC) or translated by a model "
            f"(`model:<key>`); {' / '.join(pair.codes)} = the variety of the text"
            + (f"; reviews with no usable translation, left out: {missing}" if missing else "") + "\n"
            + tabulate(rows, headers="keys", tablefmt="github"))


def _metric_row(row: pd.Series, pair: VarietyPair, *, subset: bool = False) -> dict:
    sides = " / ".join(pair.codes)
    return {"model": row["model"], "format": row["format"], **({"reviews": row["subset"]} if subset else {}),
            "pairs": int(row["n_pairs"]),
            "excluded": int(row["n_excluded"]) if pd.notna(row["n_excluded"]) else "–",
            f"acc % {sides}": _cell(row, "acc", 2, pair), "Δacc": f"{row['delta_acc']:+.2f} {row['sig_acc']}",
            f"MSE {sides}": _cell(row, "mse", 3, pair), "ΔMSE": f"{row['delta_mse']:+.3f} {row['sig_mse']}"}


def _metric_table(metrics: pd.DataFrame, pair: VarietyPair, *, subset: bool = False) -> str:
    sides = " / ".join(pair.codes)
    rows = [{"model": row["model"], "format": row["format"], **({"reviews": row["subset"]} if subset else {}),
             "pairs": int(row["n_pairs"]),
             "excluded": int(row["n_excluded"]) if pd.notna(row["n_excluded"]) else "–",
             f"acc % {sides}": _cell(row, "acc", 2, pair), "Δacc": f"{row['delta_acc']:+.2f} {row['sig_acc']}",
             f"MSE {sides}": _cell(row, "mse", 3, pair), "ΔMSE": f"{row['delta_mse']:+.3f} {row['sig_mse']}"}
            for _, row in metrics.iterrows() if row["n_pairs"] > 0]
    return tabulate(rows, headers="keys", tablefmt="github")


REVIEWS = BenchmarkSpec(
    name="reviews",
    paper="aligned-reviews",
    langs=FORMATS,
    dimension="format",
    assets=ASSETS,
    schemas=tuple(review_schemas.TABLES),
    add_arguments=reviews_arguments,
    option_ranges=(OptionRange("max_pairs", 1), OptionRange("reviews_pilot", 1)),
    check_options=reviews_option_problems,
    config=reviews_config,
    response_asset="review_predictions",
    run_settings=reviews_run_settings,
    design=reviews_design,
    expected_answer=ExpectedAnswer(2, "one number, the 1–10 score"),  # "just provide the number"
    downloads=reviews_downloads,
    settings_keys=frozenset({"max_pairs", "translation_control", "system_role"}),
    serves=answers_new_prompts,
    default_models=False,
    summary=reviews_summary,
    report_part=ReportPart("sctc_assets.lib.report.reviews", "review_", "Reviews (structured, all pairs)"),
    report_tables=("review_metrics", "review_prediction_pairs", "review_sentiment_pilot", "review_human_agreement"),
    jobs={"per_model_lang": "reviews_model_format"},
    estimate_lines=(reviews_translation_lines,),
)
