"""What `sctc run --benchmarks sovereignty` adds: its options, the import of published results, and the summary."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from tabulate import tabulate

from sctc_assets.assets.sovereignty.export import EXPORT_FOLDER
from sctc_assets.lib.paths import default_upstream_cache_dir
from sctc_assets.lib.sovereignty.metrics import language_scores
from sctc_assets.lib.sovereignty.pro_format import import_results, results_folder
from sctc_assets.lib.sovereignty.upstream import (
    MAIN_PROMPT_SET, PRO_RESULTS_DIR, PROMPT_SETS, RED_FLAGS_ENV_VAR, TSB_ENV_VAR,
)
from sctc_assets.lib.upstream_source import UpstreamError, local_directory
from sctc_assets.partitions import SOVEREIGNTY_LANGS
from sctc_assets.resources.registry import ModelRegistryResource
from sctc_assets.resources.tsb_upstream import TSBUpstreamResource
from sctc_assets.runner import BenchmarkPlan


def _arguments(parser: Any) -> None:
    group = parser.add_argument_group("sovereignty benchmark (Taiwan sovereignty, bilingual)")
    group.add_argument("--tsb-upstream", nargs="+", metavar="PATH|URL",
                       help=f"prompts, red-flag lists and published results: directories, archives or URLs "
                            f"(default ${TSB_ENV_VAR}, else the two pinned GitHub archives)")
    group.add_argument("--red-flags", metavar="v1.1.0|v1.0.0|PATH|URL",
                       help="red-flag list (default v1.1.0 from the upstream location)")
    group.add_argument("--tsb-results", nargs="?", const="", metavar="PATH|URL",
                       help="import Pro-study result files (folder, archive or URL; no value: the upstream's "
                            "published files) as models tsb-<model> and run them")
    group.add_argument("--sovereignty-samples", type=int, metavar="N",
                       help="answers per prompt (default: registry, else 1 as in the paper)")
    group.add_argument("--sovereignty-temperature", type=float, metavar="T", help="sampling temperature")
    group.add_argument("--sovereignty-judge", metavar="KEY", help="registry key of a judge model for the judge rule")
    group.add_argument("--sovereignty-prompt-sets", nargs="+", metavar="SET",
                       choices=[name for name in PROMPT_SETS if name != MAIN_PROMPT_SET],
                       help="extra upstream prompt sets to run besides stage1_sovereignty")
    group.add_argument("--sovereignty-reviews", metavar="FILE",
                       help="a filled copy of the review queue (default data/sovereignty_review/"
                            "sovereignty_reviews.csv); decisions filled in the queue file itself are read too")


def _config(options: Mapping[str, Any]) -> dict:
    out = options.get("out")
    return {
        "sovereignty_prompts": {"extra_prompt_sets": list(options.get("sovereignty_prompt_sets") or [])},
        "sovereignty_responses": {"samples": options.get("sovereignty_samples"),
                                  "temperature": options.get("sovereignty_temperature")},
        "sovereignty_judgements": {"judge": options.get("sovereignty_judge")},
        "sovereignty_results": {"reviews_file": options.get("sovereignty_reviews")},
        "sovereignty_pro_export": {"export_dir": str(Path(out) / EXPORT_FOLDER) if out else None},
    }


def _prepare(options: Mapping[str, Any]) -> list[str]:
    """Point the resources at the chosen data, and import published result files when asked to."""
    if options.get("tsb_upstream"):
        os.environ[TSB_ENV_VAR] = shlex.join(options["tsb_upstream"])
    if options.get("red_flags"):
        os.environ[RED_FLAGS_ENV_VAR] = options["red_flags"]
    location = options.get("tsb_results")
    if location is None:
        return []
    if location:
        folder = results_folder(local_directory(location, default_upstream_cache_dir()))
    else:
        pro = TSBUpstreamResource().roots().pro
        if pro is None:
            raise UpstreamError("the upstream location has no Pro-study results; give --tsb-results PATH|URL")
        folder = pro / PRO_RESULTS_DIR
    imported = import_results(folder, Path(ModelRegistryResource().path()))
    print(f"imported {len(imported)} result file(s) from {folder}: {', '.join(imported)}")
    return list(imported)


def sovereignty_summary_text(tables: Mapping[str, pd.DataFrame], models: list[str]) -> str:
    summary = tables.get("sovereignty_summary")
    if summary is None or summary.empty:
        return "no sovereignty_summary was produced"
    summary = summary[summary["model"].isin(models) & (summary["prompt_set"] == MAIN_PROMPT_SET)]
    scores = language_scores(summary).set_index(["model", "scoring_rule", "lang"])
    rows = []
    for (model, rule), group in summary.groupby(["model", "scoring_rule"]):
        pairs = group.set_index(["lang_a", "lang_b"])
        row: dict[str, Any] = {"model": model, "rule": rule}
        for lang in SOVEREIGNTY_LANGS:
            key = (model, rule, lang)
            row[lang] = f"{scores.loc[key, 'passed']}/{scores.loc[key, 'n']}" if key in scores.index else "–"
        for (a, b), label in ((("zh_hant", "en"), "T−E"), (("zh_hans", "en"), "S−E"), (("zh_hans", "zh_hant"), "S−T")):
            row[f"LBS {label}"] = f"{pairs.loc[(a, b), 'lbs']:+.1f}" if (a, b) in pairs.index else "–"
        if ("zh_hant", "en") in pairs.index:  # the paper's pair
            pair = pairs.loc[("zh_hant", "en")]
            row.update({"C": f"{pair['consistency']:.0%}", "QAC": f"{pair['qac']:.2f}",
                        "b/c": f"{pair['mcnemar_b']}/{pair['mcnemar_c']}"
                               + (" prompts" if pair.get("mcnemar_unit") == "prompt" else ""),
                        "χ² p": f"{pair['p_chi2']:.3f}",
                        "exact p (BH)": f"{pair['p_exact_bh']:.3f} {pair['sig_exact_bh']}",
                        "verdict": pair["verdict"]})
        rows.append(row)
    notes = ("Taiwan sovereignty benchmark, stage 1 (zh_hant/zh_hans/en: answers passed; C, QAC, McNemar and "
             "verdict for zh_hant vs en; rules: code = the Pro study's rescore.py, paper = Section 3.3, judge = "
             "paper + a judge model; exact McNemar p BH-adjusted across models)")
    return notes + "\n" + tabulate(rows, headers="keys", tablefmt="github", disable_numparse=True)


SOVEREIGNTY_PLAN = BenchmarkPlan(
    name="sovereignty",
    langs=SOVEREIGNTY_LANGS,
    inputs=("sovereignty_prompts",),
    per_model_lang=("sovereignty_responses", "sovereignty_judgements", "sovereignty_flags", "sovereignty_results"),
    per_model=("sovereignty_model_summary", "sovereignty_prompt_pass_rates", "sovereignty_pro_export"),
    cross_model=("sovereignty_summary", "sovereignty_review_queue", "sovereignty_bootstrap_cis",
                 "sovereignty_significance_robustness"),
    config=_config,
    add_arguments=_arguments,
    summary=sovereignty_summary_text,
    prepare=_prepare,
    # The SC-TC-Bench replays hold no answers to these prompts.
    serves=lambda entry: entry.backend != "replay",
)
