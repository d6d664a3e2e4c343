"""The Taiwan sovereignty bilingual benchmark (Ko & Littl3Lobst3r, 2026): the benchmark's spec."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.benchmarks.spec import (CROSS_MODEL, GENERATION, INPUTS, JUDGE, MODEL_LANG, PER_MODEL, AssetEntry,
                                         BenchmarkSpec, JudgeSetting, OptionRange, ReportPart)
from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.paths import default_registry_path, default_upstream_cache_dir
from sctc_assets.lib.schemas import sovereignty as sovereignty_schemas
from sctc_assets.lib.sovereignty.conditions import Condition, choose_conditions, read_conditions
from sctc_assets.lib.sovereignty.drift import run_epoch
from sctc_assets.lib.sovereignty.pairs import COMPARISONS, language_scores, with_condition
from sctc_assets.lib.sovereignty.pro_format import EXPORT_FOLDER, overlay_path
from sctc_assets.lib.sovereignty.result_import import import_folder, preview
from sctc_assets.lib.cost_estimate import PartitionDesign, RequestSet
from sctc_assets.lib.fetching import Download, location_downloads
from sctc_assets.lib.sovereignty.prompt_file import PROMPT_FILES_ENV_VAR, custom_prompt_table, read_prompt_files
from sctc_assets.lib.sovereignty.prompts import BASELINE_CONDITION, run_settings, upstream_prompt_table
from sctc_assets.lib.sovereignty.requests import sovereignty_requests
from sctc_assets.lib.sovereignty.upstream import (MAIN_PROMPT_SET, PRO_RESULTS_DIR, PROMPT_SETS, RED_FLAGS_ENV_VAR,
                                                  TSB_ENV_VAR, shared_roots, upstream_locations)
from sctc_assets.lib.upstream_source import UpstreamError, local_directory
from sctc_assets.lib.varieties import ENGLISH, SIMPLIFIED, TRADITIONAL, variety

# Traditional first, as the paper and the Pro study list them.
LANGS = (TRADITIONAL.code, SIMPLIFIED.code, ENGLISH.code)
PAPER_PAIR = (TRADITIONAL.code, ENGLISH.code)

ASSETS = {
    "sovereignty_prompts": AssetEntry(INPUTS, "The sovereignty prompts in Traditional, Simplified and English."),
    "sovereignty_responses": AssetEntry(MODEL_LANG, "One model's answers to the sovereignty prompts of one "
                                                    "language.", calls=GENERATION),
    "sovereignty_judgements": AssetEntry(MODEL_LANG, "A judge model's verdicts on whether each answer acknowledges "
                                                     "self-governance.", calls=JUDGE),
    "sovereignty_flags": AssetEntry(MODEL_LANG, "The red-flag phrases each answer contains."),
    "sovereignty_results": AssetEntry(MODEL_LANG, "PASS, WARN, FAIL or ERROR of each answer under each scoring rule.",
                                      code_version="2"),  # 2: failed model calls are not scored
    "sovereignty_model_summary": AssetEntry(PER_MODEL, "One model's scores, language bias and McNemar test per "
                                                       "language pair.",
                                            code_version="2"),  # 2: the |LBS| ≥ 0.2 flag and Newcombe's interval
    "sovereignty_prompt_pass_rates": AssetEntry(PER_MODEL, "One model's pass rate per prompt and language."),
    "sovereignty_pro_export": AssetEntry(PER_MODEL, "One model's answers as a Pro-study result file.",
                                         code_version="2"),  # 2: no file without a prompt scored in both languages
    "sovereignty_summary": AssetEntry(CROSS_MODEL, "Every materialized model's summary with BH-adjusted McNemar "
                                                   "p-values."),
    "sovereignty_review_queue": AssetEntry(CROSS_MODEL, "Answers that need a human decision, with the decisions so "
                                                        "far.", code_version="2"),  # 2: a reviewer column
    "sovereignty_rater_agreement": AssetEntry(CROSS_MODEL, "Agreement of the reviewers (Cohen's or Fleiss' κ), of "
                                                           "the reviews with the rules, and of the judges."),
    "sovereignty_bootstrap_cis": AssetEntry(CROSS_MODEL, "Bootstrap intervals of Score, LBS, consistency and QAC per "
                                                         "model, and the design's power."),
    "sovereignty_significance_robustness": AssetEntry(CROSS_MODEL, "Whether each model's McNemar result survives the "
                                                                   "exact test, BH and the LBS interval."),
    "sovereignty_condition_effects": AssetEntry(CROSS_MODEL, "What each condition (system prompt or persona) changes "
                                                             "against none, prompt by prompt (exact McNemar, BH).",
                                                opt_in="sovereignty_conditions"),
    "sovereignty_origin_tests": AssetEntry(CROSS_MODEL, "Chinese-origin models against the others: pass rates and "
                                                        "language gap, a permutation test over models."),
    "sovereignty_drift": AssetEntry(PER_MODEL, "One model's answers under two epoch tags compared prompt by prompt "
                                               "(McNemar, flips), from the cache.", opt_in="sovereignty_drift"),
}


MAX_TEMPERATURE = 2.0
# `--sovereignty-judge A B`: A is `sovereignty_judge` (the one judge every other part of a run knows), B … here.
SECOND_JUDGES = "sovereignty_second_judges"


class JudgesAction(argparse.Action):
    """`--sovereignty-judge A [B …]`: the first key as the option's value, the others as `SECOND_JUDGES`."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        keys = list(dict.fromkeys(values))
        setattr(namespace, self.dest, keys[0])
        setattr(namespace, SECOND_JUDGES, keys[1:])


def sovereignty_arguments(parser: Any) -> None:
    group = parser.add_argument_group("sovereignty benchmark (Taiwan sovereignty, bilingual)")
    group.add_argument("--tsb-upstream", nargs="+", metavar="PATH|URL",
                       help=f"prompts, red-flag lists and published results: directories, archives or URLs "
                            f"(default ${TSB_ENV_VAR}, else the two pinned GitHub archives)")
    group.add_argument("--red-flags", metavar="v1.1.0|v1.0.0|PATH|URL",
                       help="red-flag list (default v1.1.0 from the upstream location)")
    group.add_argument("--tsb-results", nargs="?", const="", metavar="PATH|URL",
                       help="import published result files as models tsb-<model> and run them: the Pro study's "
                            "files or the original benchmark's raw files (results/raw/*_stage1_*.json, with its "
                            "authors' verdicts as the rule `published`), in a folder, archive or URL; no value: "
                            "the upstream's Pro-study files")
    group.add_argument("--sovereignty-samples", type=int, metavar="N",
                       help="answers per prompt, N ≥ 1 (default: registry, else 1 as in the paper)")
    group.add_argument("--sovereignty-temperature", type=float, metavar="T", help="sampling temperature, 0–2")
    group.add_argument("--sovereignty-judge", nargs="+", action=JudgesAction, metavar="KEY",
                       help="registry key of a judge model for the judge rule; more keys (A B) add a judge each, "
                            "from another provider family, with rules judge:<key> and their agreement in "
                            "sovereignty_rater_agreement")
    group.add_argument("--sovereignty-prompt-sets", nargs="+", metavar="SET",
                       choices=[name for name in PROMPT_SETS if name != MAIN_PROMPT_SET],
                       help="extra upstream prompt sets to run besides stage1_sovereignty")
    group.add_argument("--sovereignty-prompt-file", action="append", metavar="FILE",
                       help="a custom prompt set (YAML or JSON: prompts, its own red-flag list and judge "
                            "instructions; docs: benchmarks/sovereignty) to run besides stage1_sovereignty; repeatable")
    group.add_argument("--sovereignty-conditions", nargs="+", metavar="NAME",
                       help="ask under these conditions (system prompts or personas) besides the baseline none, "
                            "each compared with none prompt by prompt (sovereignty_condition_effects); default: none "
                            "alone, the paper's design")
    group.add_argument("--sovereignty-conditions-file", metavar="FILE",
                       help="the conditions file (YAML: name → system prompt, or one per language; it must hold "
                            "none); default: the package's, with none, taiwan-user and factual-framing")
    group.add_argument("--sovereignty-epoch", metavar="TAG",
                       help="an epoch tag (e.g. 2026-08): asking again under a new tag is a new sample, never a cache "
                            "hit, and the cache keeps both answers (default: the registry's benchmarks.sovereignty."
                            "epoch, else none)")
    group.add_argument("--sovereignty-drift", nargs=2, metavar=("EPOCH_A", "EPOCH_B"),
                       help="compare each model's cached answers under two epoch tags prompt by prompt "
                            "(sovereignty_drift; `none`: the untagged answers); no model is called")
    group.add_argument("--sovereignty-reviews", metavar="FILE",
                       help="a filled copy of the review queue (default data/sovereignty_review/"
                            "sovereignty_reviews.csv); decisions filled in the queue file itself are read too")


def sovereignty_config(options: Mapping[str, Any]) -> dict:
    out = options.get("out")
    return {
        "sovereignty_prompts": {"extra_prompt_sets": list(options.get("sovereignty_prompt_sets") or [])},
        "sovereignty_responses": {"samples": options.get("sovereignty_samples"),
                                  "temperature": options.get("sovereignty_temperature"),
                                  "conditions": options.get("sovereignty_conditions"),
                                  "conditions_file": options.get("sovereignty_conditions_file"),
                                  "epoch": options.get("sovereignty_epoch")},
        "sovereignty_drift": {"epochs": list(options.get("sovereignty_drift") or []),
                              "samples": options.get("sovereignty_samples"),
                              "temperature": options.get("sovereignty_temperature")},
        # Further judges only when named: a run with one judge keeps the config it always had.
        "sovereignty_judgements": {"judge": options.get("sovereignty_judge"),
                                   **({"second_judges": list(options[SECOND_JUDGES])}
                                      if options.get(SECOND_JUDGES) else {})},
        "sovereignty_results": {"reviews_file": options.get("sovereignty_reviews")},
        "sovereignty_rater_agreement": {"reviews_file": options.get("sovereignty_reviews")},
        "sovereignty_pro_export": {"export_dir": str(Path(out) / EXPORT_FOLDER) if out else None},
    }


def run_conditions(options: Mapping[str, Any]) -> list[Condition]:
    """The conditions a run asks under (the baseline first), checked against the conditions file."""
    return choose_conditions(options.get("sovereignty_conditions"), options.get("sovereignty_conditions_file"))


def sovereignty_run_settings(values: Mapping[str, Any], entry: Any) -> tuple[int, dict[str, Any]]:
    """Samples per prompt and backend overrides: the run's config, else the registry entry's, else the paper's (the
    epoch tag is checked here too, so a bad one stops the run before anything runs)."""
    run_epoch(values.get("epoch"), entry.benchmark_settings("sovereignty"))
    return run_settings(values.get("samples"), values.get("temperature"), entry.benchmark_settings("sovereignty"))


def sovereignty_prepare(options: Mapping[str, Any]) -> list[str] | dict[str, Any]:
    """Point the resources at the chosen data, and import published result files when asked to (on a dry run,
    the entries the import would write, written nowhere)."""
    if options.get("tsb_upstream"):
        os.environ[TSB_ENV_VAR] = shlex.join(options["tsb_upstream"])
    if options.get("red_flags"):
        os.environ[RED_FLAGS_ENV_VAR] = options["red_flags"]
    prompt_files = prompt_file_paths(options)
    if prompt_files:
        # Checked here, so a bad file stops the run before it starts with one line naming file, row and column.
        read_prompt_files(prompt_files)
        os.environ[PROMPT_FILES_ENV_VAR] = shlex.join(prompt_files)
    location = options.get("tsb_results")
    if location is None:
        run_conditions(options)  # a bad conditions file or name stops the run before anything is asked
        return []
    if location:
        folder = local_directory(location, default_upstream_cache_dir())
    else:
        pro = shared_roots().pro
        if pro is None:
            raise UpstreamError("the upstream location has no Pro-study results; give --tsb-results PATH|URL")
        folder = pro / PRO_RESULTS_DIR
    registry = Path(default_registry_path())
    if options.get("dry_run"):
        entries = preview(folder, registry)
        print(f"would import {len(entries)} result file(s) from {folder} into {overlay_path(registry)} "
              f"(a dry run writes nothing): {', '.join(entries)}")
        run_conditions(options)
        return entries
    imported, written = import_folder(folder, registry)
    print(f"imported {len(imported)} result file(s) from {folder}: {', '.join(imported)}")
    if written is not None:
        names = [name for name in read_conditions(written) if name != BASELINE_CONDITION]
        print(f"the raw files' conditions are in {written}: ask them with --sovereignty-conditions {' '.join(names)} "
              f"--sovereignty-conditions-file {written}")
    run_conditions(options)  # after the import, which may have written the conditions file the run names
    return list(imported)


def prompt_file_paths(options: Mapping[str, Any]) -> list[str]:
    """The custom prompt files: `--sovereignty-prompt-file`, else `$SCTC_TSB_PROMPT_FILES` (absolute paths)."""
    chosen = options.get("sovereignty_prompt_file") or shlex.split(os.environ.get(PROMPT_FILES_ENV_VAR) or "")
    return [str(Path(path).expanduser().resolve()) for path in chosen]


def sovereignty_downloads(options: Mapping[str, Any]) -> list[Download]:
    """The benchmark's archives, the red-flag list and the result files where they are URLs (the defaults are)."""
    configured = shlex.join(options["tsb_upstream"]) if options.get("tsb_upstream") else None
    return location_downloads([*upstream_locations(configured), options.get("red_flags"), options.get("tsb_results")],
                              "Taiwan Sovereignty Benchmark data")


def answers_sovereignty_prompts(entry: Any) -> bool:
    """Not a replay of another benchmark's published answers (the SC-TC-Bench replays hold none to these prompts)."""
    return traits(entry.backend).answers("sovereignty")


def sovereignty_design(models: list[Any], options: Mapping[str, Any]) -> list[PartitionDesign]:
    """Every partition's requests for the estimate, as `sovereignty_responses` builds them."""
    table = upstream_prompt_table(shared_roots(), options.get("sovereignty_prompt_sets") or ())
    custom = read_prompt_files(prompt_file_paths(options))
    if custom:
        table = pd.concat([table, custom_prompt_table(custom)], ignore_index=True)
    designs = []
    conditions = run_conditions(options)
    for entry in models:
        samples, overrides = SOVEREIGNTY.settings_for(options, entry)
        epoch = run_epoch(options.get("sovereignty_epoch"), entry.benchmark_settings("sovereignty"))
        for lang in SOVEREIGNTY.langs:
            items, requests = sovereignty_requests(table, entry.key, lang, samples, conditions, epoch)
            designs.append(PartitionDesign(entry.key, lang, pd.DataFrame(items), RequestSet(requests),
                                           (samples, overrides), overrides))
    return designs


def _prompt_set_table(summary: pd.DataFrame) -> str:
    scores = language_scores(summary).set_index(["model", "scoring_rule", "lang"])
    rows = []
    for (model, rule), group in summary.groupby(["model", "scoring_rule"]):
        pairs = group.set_index(["lang_a", "lang_b"])
        row: dict[str, Any] = {"model": model, "rule": rule}
        for lang in LANGS:
            key = (model, rule, lang)
            row[lang] = f"{scores.loc[key, 'passed']}/{scores.loc[key, 'n']}" if key in scores.index else "–"
        for a, b in COMPARISONS:
            lbs = f"{pairs.loc[(a, b), 'lbs']:+.1f}" if (a, b) in pairs.index else "–"
            row[f"LBS {variety(a).tag}−{variety(b).tag}"] = lbs
        if PAPER_PAIR in pairs.index:
            pair = pairs.loc[PAPER_PAIR]
            row.update({"C": f"{pair['consistency']:.0%}", "QAC": f"{pair['qac']:.2f}",
                        "b/c": f"{pair['mcnemar_b']}/{pair['mcnemar_c']}"
                               + (" prompts" if pair.get("mcnemar_unit") == "prompt" else ""),
                        "χ² p": f"{pair['p_chi2']:.3f}",
                        "exact p (BH)": f"{pair['p_exact_bh']:.3f} {pair['sig_exact_bh']}",
                        "verdict": pair["verdict"]})
        rows.append(row)
    return tabulate(rows, headers="keys", tablefmt="github", disable_numparse=True)


def sovereignty_summary_text(tables: Mapping[str, pd.DataFrame], models: list[str]) -> str:
    """One table per prompt set that ran: stage 1 first, then the extra sets."""
    summary = tables.get("sovereignty_summary")
    if summary is None or summary.empty:
        return "no sovereignty_summary was produced"
    summary = with_condition(summary[summary["model"].isin(models)])
    present = set(summary["prompt_set"])
    prompt_sets = [name for name in dict.fromkeys([MAIN_PROMPT_SET, *PROMPT_SETS, *sorted(present)]) if name in present]
    if not prompt_sets:
        return "no sovereignty_summary rows for the chosen models"
    conditions = [BASELINE_CONDITION, *sorted(set(summary["condition"]) - {BASELINE_CONDITION})]
    blocks = []
    for prompt_set in prompt_sets:
        for condition in conditions:
            rows = summary[(summary["prompt_set"] == prompt_set) & (summary["condition"] == condition)]
            if rows.empty:
                continue
            title = ("stage 1" if prompt_set == MAIN_PROMPT_SET
                     else f"prompt set {prompt_set} (scored with the same rules)")
            if prompt_set not in PROMPT_SETS:  # a custom prompt file's set
                title = (f"custom prompt set {prompt_set} (the same rules with its own red-flag list and judge "
                         "instructions)")
            title += "" if condition == BASELINE_CONDITION else f", condition {condition}"
            blocks.append(f"Taiwan sovereignty benchmark, {title} ({'/'.join(LANGS)}: answers passed; C, QAC, "
                          f"McNemar and verdict for {' vs '.join(PAPER_PAIR)}; rules: code = the Pro study's "
                          "rescore.py, paper = Section 3.3, judge = paper + a judge model, original = the original "
                          "benchmark's 2026-08 scorer, published = its authors' verdicts; exact McNemar p "
                          "BH-adjusted across models)\n"
                          + _prompt_set_table(rows))
    return "\n\n".join(blocks)


SOVEREIGNTY = BenchmarkSpec(
    name="sovereignty",
    paper="taiwan-sovereignty",
    langs=LANGS,
    assets=ASSETS,
    schemas=tuple(sovereignty_schemas.TABLES),
    add_arguments=sovereignty_arguments,
    option_ranges=(OptionRange("sovereignty_samples", 1),
                   OptionRange("sovereignty_temperature", 0, MAX_TEMPERATURE)),
    config=sovereignty_config,
    response_asset="sovereignty_responses",
    run_settings=sovereignty_run_settings,
    design=sovereignty_design,
    downloads=sovereignty_downloads,
    settings_keys=frozenset({"samples", "temperature", "max_new_tokens", "max_tokens", "epoch"}),
    judge=JudgeSetting("sovereignty_judge", "SCTC_SOVEREIGNTY_JUDGE", more=SECOND_JUDGES),
    serves=answers_sovereignty_prompts,
    prepare=sovereignty_prepare,
    summary=sovereignty_summary_text,
    report_part=ReportPart("sctc_assets.lib.report.sovereignty", "sovereignty_", "Sovereignty (code rule, ZH-Hant vs EN)"),
    report_tables=("sovereignty_summary", "sovereignty_model_summary", "sovereignty_condition_effects",
                   "sovereignty_origin_tests", "sovereignty_drift"),
)
