"""The re-analysis hot paths of `sctc run --benchmarks term name` on the published SC-TC-Bench data, before and
after, side by side in one run (CPU seconds of this process, and their ratio), each with a check that both give
the same result:

(a) name extraction over the published answers: `rules_selections` and `upstream_selections` row by row (as
    they were) against the grouped, vectorized ones;
(b) `shuffle_curve` (Figure 6) on those selections: quadratic (each k re-filters the group) against running sums;
(c) replaying the published answers of the name and term benchmarks: a request object per answer through
    `generate()` with the CSV parsed in every process (as it was) against `ReplayBackend.replay()` reading the
    columnar cache (cold: first run, parses and writes the cache; warm: later runs);
(d) the tokenizers of the GGUF files of `tokenization_counts`: the GGUF parsed by transformers (as it was) against
    the cached `tokenizer.json` (cold: convert once; warm: later runs), with the token counts of every name; and
    the conversion itself, `cached_gguf_vocabulary` through AutoTokenizer (as it was, `--gguf-baseline`) against
    the header path (`lib/gguf_reading.py`), checked to write the same `tokenizer.json` bytes;
(e) the term labels of the published answers: `rules_labels` and `upstream_labels` (a `to_dict('records')`
    row loop, each term's forms built per row, as they were) against each term's forms and each distinct answer
    labelled once; the lexicon source's `fixed_labels` (a term's expected forms folded per answer, as it was,
    against once per term); and `table_hash` of the resulting tables, cell by cell against Arrow-joined;
(f) `name_prompts` read back by the IO manager (chunked against one contiguous array per column) and
    `prompts_to_ask` on it for every replay partition (each filter of the frame copying the prompts, against one
    filter per experiment); `upstream_selections` is in (a).
(g) `top_words` of the published explanations (Tables 31–32): each cell segmented by jieba once per top-10 rank
    (as it was) against once.

"Old" is the code of the commit before this work (`--baseline`, default 87c036a; for the conversion
`--gguf-baseline`, default 785ddb5), read with `git show` and loaded next to the current modules, so the product
keeps one implementation.

    python bench/reanalysis_hot_paths.py                      # every paper model
    python bench/reanalysis_hot_paths.py --models qwen gpt4o  # a subset (faster)
    python bench/reanalysis_hot_paths.py --skip a b           # leave parts out
    python bench/reanalysis_hot_paths.py --skip a b c         # the GGUF tokenizers only

Needs the SC-TC-Bench data (`--upstream`, else $SCTC_UPSTREAM) and, for (d), the embedded model file and the
tokenizer downloads of `data/tokenizers.yaml` (run `sctc run --benchmarks name` once, or it downloads them).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's sctc_assets, not an installed one

from sctc_assets.lib.term.terms import LANGS as TERM_LANGS
from sctc_assets.lib.name.lists import published_lists
from sctc_assets.backends.replay import ReplayBackend
from sctc_assets.lib.generation import GenerationRequest, result_columns
from sctc_assets.lib.name import metrics
from sctc_assets.lib.name.candidates import EXPERIMENTS
from sctc_assets.lib.name.names import NAME_COLUMNS, NAMES_FILE, parse_names
from sctc_assets.lib.name.selections import rules_selections, upstream_selections
from sctc_assets.lib.paths import default_upstream_cache_dir
from sctc_assets.lib.sctc_upstream import (
    PAPER_MODELS, SCTC_ENV_VAR, SCTC_MARKERS, UPSTREAM_LANG, name_response_file,
)
from sctc_assets.lib.upstream_source import UpstreamSource

TERM_ROWS = 110 * 15  # terms × trials per prompt file
REPO = Path(__file__).resolve().parents[1]


def baseline_module(commit: str, relative: str, **overrides: Any) -> types.ModuleType:
    """`relative` as it was at `commit`, loaded as a module of its own (`overrides`: names it imported, pointed at
    other baseline modules)."""
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{commit}:{relative}"], capture_output=True,
                            text=True, check=True).stdout
    name = f"baseline_{commit}_" + relative.removesuffix(".py").replace("/", "_")
    module = types.ModuleType(name)
    module.__file__ = f"{commit}:{relative}"
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    module.__dict__.update(overrides)
    return module


class Baseline:
    def __init__(self, commit: str, gguf_commit: str):
        self.commit = commit
        self.gguf_tokenization = baseline_module(gguf_commit, "sctc_assets/lib/name/tokenization.py")
        self.extraction = baseline_module(commit, "sctc_assets/lib/name/extraction.py")
        imported = ("EMPTY", "INVALID", "REFUSAL", "VALID", "Extraction", "exact_substring_matches", "matcher_for",
                    "parse_judge_answer")
        self.selections = baseline_module(commit, "sctc_assets/lib/name/selections.py",
                                          **{name: getattr(self.extraction, name) for name in imported})
        self.metrics = baseline_module(commit, "sctc_assets/lib/name/metrics.py")
        self.replay = baseline_module(commit, "sctc_assets/backends/replay.py")
        self.tokenization = baseline_module(commit, "sctc_assets/lib/name/tokenization.py")
        self.content_hash = baseline_module(commit, "sctc_assets/lib/content_hash.py")
        self.term_labels = baseline_module(commit, "sctc_assets/lib/term/labels.py")
        self.labelling = baseline_module(commit, "sctc_assets/lib/term/labelling.py", **{
            name: getattr(self.term_labels, name) for name in ("combine_with_judge", "find_misaligned",
                                                                "label_answer", "term_forms")})
        self.requests = baseline_module(commit, "sctc_assets/lib/name/requests.py")
        self.lexicon = baseline_module(commit, "sctc_assets/lib/term/lexicon_labels.py")
        self.explanations = baseline_module(commit, "sctc_assets/lib/name/explanations.py")


# --- measuring --------------------------------------------------------------------------------------------------


def cpu(function: Callable[[], Any]) -> tuple[float, Any]:
    started = time.process_time()
    value = function()
    return time.process_time() - started, value


def same_table(old: pd.DataFrame, new: pd.DataFrame) -> bool:
    """Equal as stored: values, missing values and column order (in-memory text dtypes may differ)."""
    def stored(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.reset_index(drop=True).astype(object)
        return frame.where(frame.notna(), None)
    try:
        pd.testing.assert_frame_equal(stored(old), stored(new), check_dtype=False)
    except AssertionError as exc:
        print(f"    DIFFERENT: {str(exc)[:300]}")
        return False
    return True


def line(part: str, old: float, new: float, same: bool, note: str = "") -> None:
    ratio = old / new if new > 0 else float("inf")
    print(f"{part:<44} old {old:8.2f} s   new {new:8.2f} s   old/new {ratio:7.1f}x   "
          f"{'identical' if same else 'DIFFERENT'}  {note}")


def name_inputs(source: UpstreamSource, models: list[str]):
    names = parse_names(source.read_csv(NAMES_FILE, NAME_COLUMNS))
    lists = pd.concat([published_lists(source, name) for name, spec in EXPERIMENTS.items()
                       if source.exists(f"source_data/candidate_name_list/prompt_id_{spec.prompt_id}.csv")])
    answers, finals = [], []
    for model in models:
        for lang in UPSTREAM_LANG:
            for name, spec in EXPERIMENTS.items():
                relative = name_response_file(model, lang, spec.prompt_id)
                if not source.exists(relative):
                    continue
                raw = source.read_csv(relative, ["response"])
                rows = np.arange(len(raw))
                answers.append(pd.DataFrame({
                    "model": f"paper-{model}", "lang": lang, "experiment": name, "list_source": "upstream",
                    "list_id": rows // spec.shuffles, "shuffle": rows % spec.shuffles, "row": rows,
                    "response": raw["response"], "outcome": "ok"}))
                final_file = name_response_file(model, lang, spec.prompt_id, stage="final")
                finals.append((source.read_csv(final_file, ["extracted_name", "refine_flag", "region"]),
                               dict(model=f"paper-{model}", lang=lang, experiment=name, shuffles=spec.shuffles,
                                    source_name=final_file)))
    return names, lists, answers, finals


def part_a_b(old: Baseline, source: UpstreamSource, models: list[str], skip: set[str]) -> None:
    names, lists, answers, finals = name_inputs(source, models)
    n = sum(len(frame) for frame in answers)
    distinct = sum(frame["response"].nunique(dropna=False) for frame in answers)
    print(f"(a) {n} published name answers of {len(models)} models, {distinct} distinct texts per file (summed)")
    old_time, old_rules = cpu(lambda: [old.selections.rules_selections(frame, lists, names) for frame in answers])
    new_time, new_rules = cpu(lambda: [rules_selections(frame, lists, names) for frame in answers])
    line("(a) rules_selections", old_time, new_time,
         all(same_table(a, b) for a, b in zip(old_rules, new_rules)))
    old_time, old_up = cpu(lambda: [old.selections.upstream_selections(final, **kwargs) for final, kwargs in finals])
    new_time, new_up = cpu(lambda: [upstream_selections(final, **kwargs) for final, kwargs in finals])
    line("(a) upstream_selections", old_time, new_time, all(same_table(a, b) for a, b in zip(old_up, new_up)))
    from sctc_assets.lib.content_hash import table_hash
    tables = [pd.concat(new_rules + new_up, ignore_index=True), pd.concat(answers, ignore_index=True)]
    old_time, old_hashes = cpu(lambda: [old.content_hash.table_hash(table) for table in tables])
    new_time, new_hashes = cpu(lambda: [table_hash(table) for table in tables])
    line("(a) table_hash (selections, answers)", old_time, new_time, old_hashes == new_hashes,
         f"({sum(map(len, tables))} rows)")
    selections = tables[0]
    old_time, (old_top, _) = cpu(lambda: old.metrics.selection_frequencies(selections, lists))
    new_time, (new_top, _) = cpu(lambda: metrics.selection_frequencies(selections, lists))
    line("(a) selection_frequencies (top selected)", old_time, new_time, same_table(old_top, new_top)
         and list(old_top.dtypes) == list(new_top.dtypes))
    if "b" in skip:
        return
    selections = pd.concat(new_rules + new_up, ignore_index=True)
    per_model = [frame for _, frame in selections.groupby("model")]  # as name_permutation_stability, per model
    old_time, old_curve = cpu(lambda: [old.metrics.shuffle_curve(frame) for frame in per_model])
    new_time, new_curve = cpu(lambda: [metrics.shuffle_curve(frame) for frame in per_model])
    same = all(a.equals(b) for a, b in zip(old_curve, new_curve))
    line("(b) shuffle_curve", old_time, new_time, same, f"({sum(map(len, new_curve))} curve points)")


def replay_refs(models: list[str]) -> dict[tuple[str, str], pd.DataFrame]:
    """Per model and benchmark, where every answer of the paper's design lives, as the response assets ask for
    them (a file the copy lacks gives `missing` results)."""
    refs = {}
    for model in models:
        name, term = [], []
        for lang in UPSTREAM_LANG:
            for spec in EXPERIMENTS.values():
                rows = np.arange(spec.lists * spec.shuffles)
                name.append(pd.DataFrame({"benchmark": "name", "lang": lang, "prompt_id": spec.prompt_id, "row": rows}))
            if lang != "en":
                for variant in (1, 2, 3):
                    term.append(pd.DataFrame({"benchmark": "term", "lang": lang, "prompt_variant": variant,
                                              "row": np.arange(TERM_ROWS)}))
        refs[(model, "name")] = pd.concat(name, ignore_index=True)
        refs[(model, "term")] = pd.concat(term, ignore_index=True)
    return refs


def part_c(old: Baseline, root: Path, models: list[str], cache_dir: Path) -> None:
    refs = replay_refs(models)
    print(f"(c) {sum(map(len, refs.values()))} published answers (name and term) of {len(models)} models")

    def old_replay() -> dict:
        """As the response assets did: a request per row, `generate()`, then the result columns."""
        out = {}
        for (model, benchmark), frame in refs.items():
            backend = old.replay.ReplayBackend(upstream_name=model, no_think=model == "ds", upstream_root=str(root))
            where = "prompt_id" if benchmark == "name" else "prompt_variant"
            requests = [GenerationRequest.user("", benchmark=benchmark, lang=lang, row=int(row), **{where: int(key)})
                        for lang, key, row in zip(frame["lang"], frame[where], frame["row"])]
            out[(model, benchmark)] = pd.DataFrame(result_columns(backend.generate(requests)))
        return out

    def new_replay() -> dict:
        out = {}
        for (model, benchmark), frame in refs.items():
            backend = ReplayBackend(upstream_name=model, no_think=model == "ds", upstream_root=str(root))
            codes, results = backend.replay(frame)
            out[(model, benchmark)] = pd.DataFrame(result_columns(results)).take(codes).reset_index(drop=True)
        return out

    os.environ["SCTC_DATA_DIR"] = str(cache_dir)
    old_memo = getattr(old.replay, "_read_column", None) or old.replay._published_column
    old_memo.cache_clear()  # a new process: nothing parsed yet
    old_time, before = cpu(old_replay)
    from sctc_assets.backends import replay as replay_module
    replay_module._published_column.cache_clear()
    cold_time, after = cpu(new_replay)
    replay_module._published_column.cache_clear()  # a new process: the cache on disk, nothing in memory
    warm_time, _ = cpu(new_replay)
    columns = ["response", "outcome", "outcome_message"]
    same = all(same_table(before[key][columns], after[key][columns]) for key in refs)
    line("(c) replay, first run (cache written)", old_time, cold_time, same)
    line("(c) replay, later runs (cache read)", old_time, warm_time, same)
    if hasattr(old.replay.ReplayBackend, "replay"):  # the baseline has the columnar replay: the same path, then
        def old_columnar() -> dict:
            out = {}
            for (model, benchmark), frame in refs.items():
                backend = old.replay.ReplayBackend(upstream_name=model, no_think=model == "ds",
                                                   upstream_root=str(root))
                codes, results = backend.replay(frame)
                out[(model, benchmark)] = pd.DataFrame(result_columns(results)).take(codes).reset_index(drop=True)
            return out
        old_memo.cache_clear()
        replay_module._published_column.cache_clear()
        old_time, before = cpu(old_columnar)  # reads the cache files the new code wrote
        replay_module._published_column.cache_clear()
        warm_time, after = cpu(new_replay)
        same = all(same_table(before[key][columns], after[key][columns]) for key in refs)
        line("(c) replay(), baseline's against now (cache read)", old_time, warm_time, same)


def part_d(old: Baseline, files_dir: Path, cache_dir: Path, names: pd.DataFrame) -> None:
    from transformers import PreTrainedTokenizerFast

    from sctc_assets.lib.name import tokenization as tk
    from sctc_assets.lib.paths import default_tokenizers_path

    registry = tk.load_registry(default_tokenizers_path())
    lists = tk.name_lists(names)
    conversions = []
    for key, entry in registry.items():
        source = entry.settings.get("file")
        if not entry.default or entry.kind != "transformers" or not isinstance(source, dict):
            continue
        path = Path(tk.resolve_source(source, files_dir, where=key))
        if path.suffix != ".gguf":
            continue

        def before():
            return tk.token_counts(old.tokenization._transformers(entry, files_dir), lists)

        def new():
            json_file = tk.cached_gguf_vocabulary(path, cache_dir, sha256=source.get("sha256"))
            tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(json_file))
            return tk.token_counts(lambda text: tokenizer(text, add_special_tokens=False)["input_ids"], lists)

        old_time, old_counts = cpu(before)
        cold_time, new_counts = cpu(new)
        warm_time, _ = cpu(new)
        size = f"({path.stat().st_size / 1e6:.0f} MB)"
        line(f"(d) {key}: first run (vocabulary converted)", old_time, cold_time, old_counts == new_counts, size)
        line(f"(d) {key}: later runs (vocabulary read)", old_time, warm_time, old_counts == new_counts, size)

        # The conversion alone, both cold (a folder of their own), after the runs above imported everything.
        convert_old = old.gguf_tokenization.cached_gguf_vocabulary
        old_time, old_json = cpu(lambda: convert_old(path, cache_dir / "old", sha256=source.get("sha256")).read_bytes())
        new_time, new_json = cpu(lambda: tk.cached_gguf_vocabulary(path, cache_dir / "new", sha256=source.get("sha256"))
                                 .read_bytes())
        conversions.append((old_time, new_time, old_json == new_json))
        line(f"(d) {key}: tokenizer.json conversion", old_time, new_time, old_json == new_json,
             f"{size} {len(new_json):,} bytes")
    if conversions:
        old_time, new_time, same = (sum(value) for value in zip(*conversions))
        line(f"(d) all {len(conversions)} GGUF files: conversion", old_time, new_time, same == len(conversions))


def term_inputs(source: UpstreamSource, root: Path, models: list[str]):
    """Per model and language, the replayed term responses as `term_responses` stores them, with the upstream
    label inputs (the other language's `gt` and the cleaned verdicts)."""
    from sctc_assets.assets.term.labels import published_label_inputs
    from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
    from sctc_assets.lib.term.prompts import PAPER_TRIALS, PROMPT_VARIANTS, build_prompts
    from sctc_assets.lib.term.requests import term_requests
    from sctc_assets.lib.term.terms import LANGS, parse_terms

    prompts = build_prompts(parse_terms(source.read_csv(TERMS_FILE, TERM_COLUMNS)), langs=LANGS,
                            variants=PROMPT_VARIANTS, trials=PAPER_TRIALS)
    parts = []
    for model in models:
        backend = ReplayBackend(upstream_name=model, no_think=model == "ds", upstream_root=str(root))
        for lang in LANGS:
            selected, _ = term_requests(prompts, lang, PAPER_TRIALS, PROMPT_VARIANTS)
            codes, results = backend.replay(selected[["lang", "prompt_variant", "row"]].assign(benchmark="term"))
            columns = pd.DataFrame(result_columns(results)).take(codes).reset_index(drop=True)
            frame = selected[["lang", "prompt_variant", "term_id", "trial", "row", "prompt"]].assign(
                **columns[["response", "outcome"]]).assign(model=f"paper-{model}")
            frame = frame[frame["outcome"] != "missing"].reset_index(drop=True)
            if frame.empty:
                continue
            needed = {int(v): int(rows.max()) + 1 for v, rows in frame.groupby("prompt_variant")["row"]}
            other_gt, verdicts, _ = published_label_inputs(source, model, lang, needed)
            parts.append((frame, other_gt, verdicts))
    return prompts, parts


def part_e(old: Baseline, source: UpstreamSource, models: list[str]) -> None:
    from sctc_assets.lib.content_hash import table_hash
    from sctc_assets.lib.term.labelling import rules_labels, upstream_labels

    prompts, parts = term_inputs(source, Path(source.root), models)
    print(f"(e) {sum(len(frame) for frame, _, _ in parts)} published term answers of {len(models)} models")
    old_time, old_rules = cpu(lambda: [old.labelling.rules_labels(frame, prompts) for frame, _, _ in parts])
    new_time, new_rules = cpu(lambda: [rules_labels(frame, prompts) for frame, _, _ in parts])
    line("(e) rules_labels", old_time, new_time, all(same_table(a, b) for a, b in zip(old_rules, new_rules)))
    old_time, old_up = cpu(lambda: [old.labelling.upstream_labels(*part) for part in parts])
    new_time, new_up = cpu(lambda: [upstream_labels(*part) for part in parts])
    line("(e) upstream_labels", old_time, new_time, all(same_table(a, b) for a, b in zip(old_up, new_up)))
    from sctc_assets.lib.term.lexicon_labels import fixed_labels
    keyed = [frame.merge(prompts[["lang", "prompt_variant", "trial", "term_id", "expected"]],
                         on=["lang", "prompt_variant", "trial", "term_id"]) for frame, _, _ in parts]
    flags = [[False] * len(frame) for frame in keyed]
    old_time, old_fixed = cpu(lambda: [old.lexicon.fixed_labels(f, m) for f, m in zip(keyed, flags)])
    new_time, new_fixed = cpu(lambda: [fixed_labels(f, m) for f, m in zip(keyed, flags)])
    line("(e) lexicon fixed_labels", old_time, new_time, all(same_table(a, b) for a, b in zip(old_fixed, new_fixed)))
    tables = [table for table in (pd.concat(old_rules + old_up, ignore_index=True),
                                  *(frame for frame, _, _ in parts)) if not table.empty]
    old_time, old_hashes = cpu(lambda: [old.content_hash.table_hash(table) for table in tables])
    new_time, new_hashes = cpu(lambda: [table_hash(table) for table in tables])
    line("(e) table_hash (labels, responses)", old_time, new_time, old_hashes == new_hashes,
         f"({sum(map(len, tables))} rows)")


def part_f(old: Baseline, source: UpstreamSource, models: list[str], scratch: Path) -> None:
    """`prompts_to_ask` for every replay partition, on `name_prompts` as the IO manager reads it back."""
    from sctc_assets.lib.content_hash import table_hash
    from sctc_assets.lib.name.candidates import RunSettings
    from sctc_assets.lib.name.lists import candidate_lists
    from sctc_assets.lib.name.prompts import build_prompts
    from sctc_assets.lib.name.requests import prompts_to_ask
    from sctc_assets.resources.io_manager import _TEXT_TYPES, read_table
    import pyarrow.parquet as pq

    names = parse_names(source.read_csv(NAMES_FILE, NAME_COLUMNS))
    lists, _ = candidate_lists(names, source)
    path = scratch / "name_prompts.parquet"
    build_prompts(lists).to_parquet(path, index=False)
    read_table(path)  # the file in the page cache for both
    old_time, before = cpu(lambda: [pq.read_table(path).to_pandas(types_mapper=_TEXT_TYPES.get)
                                    for _ in range(5)][-1])
    new_time, after = cpu(lambda: [read_table(path) for _ in range(5)][-1])
    line("(f) read name_prompts (IO manager) x5", old_time, new_time, same_table(before, after)
         and list(before.dtypes) == list(after.dtypes))
    settings = RunSettings(tuple(EXPERIMENTS))
    partitions = [(model, lang) for model in models for lang in UPSTREAM_LANG]
    old_time, old_sel = cpu(lambda: [old.requests.prompts_to_ask(before, lang, settings, replay=True)[0]
                                     for _, lang in partitions])
    new_time, new_sel = cpu(lambda: [prompts_to_ask(after, lang, settings, replay=True)[0]
                                     for _, lang in partitions])
    same = all(a.equals(b) and list(a.dtypes) == list(b.dtypes) for a, b in zip(old_sel, new_sel))
    line(f"(f) prompts_to_ask ({len(partitions)} partitions)", old_time, new_time, same)
    old_time, old_hash = cpu(lambda: [old.content_hash.table_hash(frame) for frame in old_sel[:3]])
    new_time, new_hash = cpu(lambda: [table_hash(frame) for frame in old_sel[:3]])
    line("(f) table_hash (selected prompts)", old_time, new_time, old_hash == new_hash)


def part_g(old: Baseline, source: UpstreamSource) -> None:
    """`top_words` (Tables 31–32) on the published explanations: jieba on every cell once per top-10 rank (as it
    was) against once per cell."""
    from sctc_assets.assets.name.appendix import EXPLAINING_MODELS
    from sctc_assets.lib.name import explanations

    frames = []
    for model in EXPLAINING_MODELS:
        for lang in TERM_LANGS:
            relative = f"response/regional_name/explanation/{model}_{UPSTREAM_LANG[lang]}.csv"
            if source.exists(relative):
                frames.append(source.read_csv(relative, ["adjective", "name", "region"]).assign(model=model, lang=lang))
    frame = pd.concat(frames, ignore_index=True)
    explanations.jieba_words("预热")  # jieba's dictionary loaded before either is timed
    old_time, before = cpu(lambda: old.explanations.top_words(frame))
    new_time, after = cpu(lambda: explanations.top_words(frame))
    line("(g) top_words (explanations)", old_time, new_time, same_table(before, after) and
         list(before.dtypes) == list(after.dtypes), f"({len(frame)} explanations)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", default=os.environ.get(SCTC_ENV_VAR), help="SC-TC-Bench data")
    parser.add_argument("--models", nargs="+", default=list(PAPER_MODELS), choices=list(PAPER_MODELS))
    parser.add_argument("--skip", nargs="+", default=[], choices=list("abcdefg"))
    parser.add_argument("--baseline", default="87c036a", help="the commit whose code is 'old'")
    parser.add_argument("--gguf-baseline", default="785ddb5",
                        help="the commit whose GGUF vocabulary conversion is 'old' in (d)")
    args = parser.parse_args()
    if not args.upstream:
        parser.error(f"give --upstream or set ${SCTC_ENV_VAR}")
    source = UpstreamSource.open(args.upstream, cache_dir=default_upstream_cache_dir(), markers=SCTC_MARKERS)
    skip = set(args.skip)
    old = Baseline(args.baseline, args.gguf_baseline)
    import sctc_assets

    print(f"CPU seconds of this process ({os.cpu_count()} cores); old = commit {args.baseline} "
          f"({args.gguf_baseline} for the GGUF conversion), new = "
          f"{Path(sctc_assets.__file__).parent}\n")
    with tempfile.TemporaryDirectory(prefix="sctc-bench-") as scratch:
        if "a" not in skip:
            part_a_b(old, source, args.models, skip)
        if "c" not in skip:
            part_c(old, Path(source.root), args.models, Path(scratch) / "data")
        if "e" not in skip:
            part_e(old, source, args.models)
        if "f" not in skip:
            part_f(old, source, args.models, Path(scratch))
        if "g" not in skip:
            part_g(old, source)
        if "d" not in skip:
            from sctc_assets.lib.name import tokenization as tk
            part_d(old, tk.default_files_dir(), Path(scratch) / "tokenizers",
                   parse_names(source.read_csv(NAMES_FILE, NAME_COLUMNS)))


if __name__ == "__main__":
    main()
