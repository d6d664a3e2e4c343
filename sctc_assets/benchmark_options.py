"""What `sctc` knows about each benchmark before any asset is loaded: its partition keys, its `sctc run` options and
their asset config, which registry entries can answer it, and what runs before the registry is read.

Nothing here imports Dagster, torch or transformers, so `sctc --help`, `sctc models` and `sctc plan` stay fast; the
`BenchmarkPlan` of each benchmark (its stages and summary, `sctc_assets.benchmarks.PLANS`) is built from these.
"""

from __future__ import annotations

import argparse
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from sctc_assets.lib.languages import NAME_LANGS, SOVEREIGNTY_LANGS, TERM_LANGS
from sctc_assets.lib.name.candidates import EXPERIMENTS, LIST_SOURCES
from sctc_assets.lib.reviews.prompts import FORMATS
from sctc_assets.lib.reviews.source import FIELDS, REVIEWS_ENV_VAR
from sctc_assets.lib.sovereignty.pro_format import EXPORT_FOLDER
from sctc_assets.lib.sovereignty.upstream import MAIN_PROMPT_SET, PROMPT_SETS, RED_FLAGS_ENV_VAR, TSB_ENV_VAR


@dataclass(frozen=True)
class BenchmarkOptions:
    """`langs`: the keys of the second partition dimension (named `dimension`). `add_arguments(parser)` adds the
    benchmark's `sctc run` options; `config(options)` turns the parsed options into `{asset name: op config}`;
    `serves(entry)` says whether a registry entry can answer the benchmark at all (a replay of another benchmark's
    published answers cannot); `prepare(options)` runs before the registry is read and returns model keys to run
    besides the default ones; `default_models`: whether a run without `--models` runs the registry's defaults."""

    name: str
    langs: tuple[str, ...]
    dimension: str = "lang"
    add_arguments: Callable[[Any], None] = field(default=lambda parser: None)
    config: Callable[[Mapping[str, Any]], dict] = field(default=lambda options: {})
    serves: Callable[[Any], bool] = field(default=lambda entry: True)
    prepare: Callable[[Mapping[str, Any]], list[str]] = field(default=lambda options: [])
    default_models: bool = True

    def plan_fields(self) -> dict[str, Any]:
        """The keyword arguments of the benchmark's `BenchmarkPlan` that come from here."""
        return {"name": self.name, "langs": self.langs, "dimension": self.dimension,
                "add_arguments": self.add_arguments, "config": self.config, "serves": self.serves,
                "prepare": self.prepare, "default_models": self.default_models}


def _assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return key, value


def _present(values: Mapping[str, Any]) -> dict:
    return {key: value for key, value in values.items() if value is not None}


def not_a_pro_result(entry: Any) -> bool:
    """A Pro-study result file (`tsb_replay`) holds sovereignty answers only."""
    return entry.backend != "tsb_replay"


# --- term -----------------------------------------------------------------------------------------------------------

def term_arguments(parser: Any) -> None:
    group = parser.add_argument_group("term benchmark")
    group.add_argument("--trials", type=int, metavar="N",
                       help="trials per prompt for every model, 1–15 (default: registry, else 15)")
    group.add_argument("--prompt-variants", type=int, nargs="+", choices=[1, 2, 3],
                       help="prompt variants (default: registry, else 1 2 3)")
    group.add_argument("--judge", metavar="KEY", help="registry key of a judge model for the `judge` labels")


def term_config(options: Mapping[str, Any]) -> dict:
    return {
        "term_responses": {"trials": options.get("trials"), "prompt_variants": options.get("prompt_variants")},
        "term_judgements": {"judge": options.get("judge")},
    }


# --- name -----------------------------------------------------------------------------------------------------------

def name_arguments(parser: Any) -> None:
    group = parser.add_argument_group("name benchmark")
    group.add_argument("--name-experiments", nargs="+", choices=list(EXPERIMENTS), metavar="EXPERIMENT",
                       help=f"experiments to run, of {', '.join(EXPERIMENTS)} (default: registry, else all)")
    group.add_argument("--name-lists", type=int, metavar="N", help="at most N lists per experiment, N ≥ 1 (default: "
                                                                   "registry, else the paper's)")
    group.add_argument("--name-shuffles", type=int, metavar="N", help="at most N shuffles per list, N ≥ 1 (default: "
                                                                      "registry, else the paper's)")
    group.add_argument("--name-list-source", choices=list(LIST_SOURCES),
                       help="whose candidate lists live models answer (default: the authors' where present)")
    group.add_argument("--name-seed", type=int, metavar="SEED", help="seed of the generated candidate lists")
    group.add_argument("--name-judge", metavar="KEY", help="registry key of an LLM extractor for `judge` selections")


def name_config(options: Mapping[str, Any]) -> dict:
    config: dict = {
        "name_responses": {"experiments": options.get("name_experiments"), "lists": options.get("name_lists"),
                           "shuffles": options.get("name_shuffles"), "list_source": options.get("name_list_source")},
        "name_judgements": {"judge": options.get("name_judge")},
    }
    if options.get("name_seed") is not None:
        config["name_candidate_lists"] = {"seed": options["name_seed"]}
    return config


# --- sovereignty ----------------------------------------------------------------------------------------------------

def sovereignty_arguments(parser: Any) -> None:
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
                       help="answers per prompt, N ≥ 1 (default: registry, else 1 as in the paper)")
    group.add_argument("--sovereignty-temperature", type=float, metavar="T", help="sampling temperature, 0–2")
    group.add_argument("--sovereignty-judge", metavar="KEY", help="registry key of a judge model for the judge rule")
    group.add_argument("--sovereignty-prompt-sets", nargs="+", metavar="SET",
                       choices=[name for name in PROMPT_SETS if name != MAIN_PROMPT_SET],
                       help="extra upstream prompt sets to run besides stage1_sovereignty")
    group.add_argument("--sovereignty-reviews", metavar="FILE",
                       help="a filled copy of the review queue (default data/sovereignty_review/"
                            "sovereignty_reviews.csv); decisions filled in the queue file itself are read too")


def sovereignty_config(options: Mapping[str, Any]) -> dict:
    out = options.get("out")
    return {
        "sovereignty_prompts": {"extra_prompt_sets": list(options.get("sovereignty_prompt_sets") or [])},
        "sovereignty_responses": {"samples": options.get("sovereignty_samples"),
                                  "temperature": options.get("sovereignty_temperature")},
        "sovereignty_judgements": {"judge": options.get("sovereignty_judge")},
        "sovereignty_results": {"reviews_file": options.get("sovereignty_reviews")},
        "sovereignty_pro_export": {"export_dir": str(Path(out) / EXPORT_FOLDER) if out else None},
    }


def sovereignty_prepare(options: Mapping[str, Any]) -> list[str]:
    """Point the resources at the chosen data, and import published result files when asked to."""
    if options.get("tsb_upstream"):
        os.environ[TSB_ENV_VAR] = shlex.join(options["tsb_upstream"])
    if options.get("red_flags"):
        os.environ[RED_FLAGS_ENV_VAR] = options["red_flags"]
    location = options.get("tsb_results")
    if location is None:
        return []
    # Only an import needs the upstream resource and the registry file, hence the imports here.
    from sctc_assets.lib.paths import default_registry_path, default_upstream_cache_dir
    from sctc_assets.lib.sovereignty.pro_format import import_results, results_folder
    from sctc_assets.lib.sovereignty.upstream import PRO_RESULTS_DIR
    from sctc_assets.lib.upstream_source import UpstreamError, local_directory

    if location:
        folder = results_folder(local_directory(location, default_upstream_cache_dir()))
    else:
        from sctc_assets.resources.tsb_upstream import TSBUpstreamResource

        pro = TSBUpstreamResource().roots().pro
        if pro is None:
            raise UpstreamError("the upstream location has no Pro-study results; give --tsb-results PATH|URL")
        folder = pro / PRO_RESULTS_DIR
    imported = import_results(folder, Path(default_registry_path()))
    print(f"imported {len(imported)} result file(s) from {folder}: {', '.join(imported)}")
    return list(imported)


def answers_sovereignty_prompts(entry: Any) -> bool:
    """The SC-TC-Bench replays hold no answers to these prompts."""
    return entry.backend != "replay"


# --- reviews --------------------------------------------------------------------------------------------------------

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
    group.add_argument("--reviews-varieties", nargs="+", type=_assignment, metavar="REGION=VARIETY",
                       help="region code → tw or cn (default tw=tw cn=cn)")
    group.add_argument("--reviews-seed", type=int, help="seed of the pairing and of the shuffled format (default 0)")
    group.add_argument("--max-pairs", type=int, metavar="N",
                       help="ask models about the first N pairs only (a random sample), N ≥ 1")
    group.add_argument("--no-translation-control", action="store_true",
                       help="skip the OpenCC-converted reviews (Table 3)")


def reviews_config(options: Mapping[str, Any]) -> dict:
    seed = options.get("reviews_seed")
    return {
        "raw_reviews": _present({"location": options.get("reviews"), "hf_dataset": options.get("reviews_hf"),
                                 "hf_split": options.get("reviews_split"),
                                 "hf_config": options.get("reviews_hf_config"),
                                 "columns": dict(options["reviews_columns"]) if options.get("reviews_columns") else None}),
        "review_varieties": _present({"varieties": dict(options["reviews_varieties"])
                                      if options.get("reviews_varieties") else None}),
        "review_pairs": _present({"seed": seed}),
        "review_prompts": _present({"seed": seed}),
        "review_predictions": _present({"max_pairs": options.get("max_pairs"),
                                        "translation_control": False if options.get("no_translation_control") else None}),
    }


def answers_new_prompts(entry: Any) -> bool:
    """Replay backends (they bypass the response cache) hold published answers to other benchmarks' prompts."""
    from sctc_assets.backends import backend_class  # Dagster: only when a run asks

    try:
        return backend_class(entry.backend).uses_cache
    except (ImportError, ValueError):
        return True  # the asset then fails with the registry's own message


# --- corpus ---------------------------------------------------------------------------------------------------------

def corpus_arguments(parser: Any) -> None:
    group = parser.add_argument_group("corpus counts")
    group.add_argument("--corpora", nargs="+", metavar="KEY",
                       help="count every shard of these registered corpora in this run (default: none; the "
                            "tables then use the shards counted so far and the authors' counts)")
    group.add_argument("--corpus-majority", type=float, metavar="SHARE",
                       help="share of models that must misalign a term for Table 18's project list, in (0, 1] "
                            "(default 0.5)")
    group.add_argument("--corpus-label-source", choices=["upstream", "rules"],
                       help="label source deciding Table 18's project list (default upstream)")


def corpus_config(options: Mapping[str, Any]) -> dict:
    settings = {"majority": options.get("corpus_majority"), "label_source": options.get("corpus_label_source")}
    return {"corpus_term_frequency_tables": _present(settings)}


# One entry per benchmark: `sctc run --benchmarks` offers these, in this order (`all`: every one).
OPTIONS: dict[str, BenchmarkOptions] = {options.name: options for options in (
    BenchmarkOptions("term", TERM_LANGS, add_arguments=term_arguments, config=term_config, serves=not_a_pro_result),
    BenchmarkOptions("name", NAME_LANGS, add_arguments=name_arguments, config=name_config, serves=not_a_pro_result),
    BenchmarkOptions("sovereignty", SOVEREIGNTY_LANGS, add_arguments=sovereignty_arguments, config=sovereignty_config,
                     serves=answers_sovereignty_prompts, prepare=sovereignty_prepare),
    BenchmarkOptions("reviews", FORMATS, dimension="format", add_arguments=reviews_arguments, config=reviews_config,
                     serves=answers_new_prompts, default_models=False),
    # Counting calls no model; Table 18 reads whatever term results exist.
    BenchmarkOptions("corpus", (), add_arguments=corpus_arguments, config=corpus_config, default_models=False),
)}
BENCHMARKS: tuple[str, ...] = tuple(OPTIONS)
