"""The embedded default model on the term prompts: today's path, the new default path and a naive loop, side by side.

Each path runs in its own fresh Python process (so "first answer" includes the model load, as after `sctc run`
starts), over the same term prompts, asked per language as the `term_responses` partitions ask them:
- `before`: the path before this bench existed, reconstructed from settings: the GGUF de-quantized at every start
  (`cache_converted_weights: false`), `engine: generate` (padded batches of `batch_size`, each batch running until
  its longest answer ends), `max_new_tokens: 64`;
- `new`: the registry entry as it is (converted weights cached, continuous batching, the term benchmark's
  `max_new_tokens`); the first `new` run of a machine fills the weight cache (reported as its load);
- `loop`: the naive per-prompt loop: `engine: generate` at batch size 1, otherwise the `new` settings.

Prints, per path: load time, first-answer latency after process start, wall and CPU seconds, prompts/s (wall) and
CPU seconds per answer, then the ratios. The machine may be shared: wall times then vary, CPU seconds much less.
`--save DIR` keeps each path's answers (JSON lines); `--compare A B` counts identical answers and identical `rules`
labels between two saved answer files (e.g. the 660 answers of `before` and `new`).

    python bench/embedded_speed.py --upstream /path/to/SC-TC-Bench-aaad554.tar.xz --prompts 120
    python bench/embedded_speed.py --paths before new --prompts 660 --save /tmp/answers
    python bench/embedded_speed.py --compare /tmp/answers/before.jsonl /tmp/answers/new.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run as a plain script from a checkout: make the repository importable without installing it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODEL_KEY = "qwen2.5-coder-0.5b-instruct"
PATHS = ("before", "new", "loop")
BEFORE = {"engine": "generate", "cache_converted_weights": False, "max_new_tokens": 64, "batch_size": 16}


def term_prompts(upstream: str | None, count: int):
    """`count` of the registry run's term prompts (1 trial × 3 variants × 110 terms × 2 languages = 660)."""
    from sctc_assets.lib.model_registry import load_registry
    from sctc_assets.lib.paths import default_registry_path
    from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
    from sctc_assets.lib.term.prompts import build_prompts, run_settings
    from sctc_assets.lib.term.terms import LANGS, parse_terms
    from sctc_assets.resources.upstream import SCTCUpstreamResource

    entry = load_registry(default_registry_path())[MODEL_KEY]
    trials, variants = run_settings(None, None, entry.benchmark_settings("term"))
    source = SCTCUpstreamResource(location=upstream).open()
    terms = parse_terms(source.read_csv(TERMS_FILE, TERM_COLUMNS), source_name=TERMS_FILE)
    prompts = build_prompts(terms, langs=LANGS, variants=variants, trials=trials).reset_index(drop=True)
    if count < len(prompts):  # a seeded sample, the same for every path
        prompts = prompts.iloc[sorted(random.Random(0).sample(range(len(prompts)), count))].reset_index(drop=True)
    return prompts


def backend_settings(path: str, new_settings: dict | None = None) -> dict:
    from sctc_assets.lib.paths import default_registry_path
    from sctc_assets.lib.model_registry import load_registry
    from sctc_assets.lib.term.prompts import generation_overrides

    entry = load_registry(default_registry_path())[MODEL_KEY]
    settings = {**entry.settings, **generation_overrides(entry.benchmark_settings("term")), **(new_settings or {})}
    if path == "before":
        settings.update(BEFORE)
    elif path == "loop":
        settings.update(engine="generate", batch_size=1)
    return settings


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker(path: str, upstream: str | None, count: int, answers: Path, new_settings: dict) -> dict:
    """Runs in the child process: load, answer, and report timings measured from the process start."""
    if path == "before" and "OMP_WAIT_POLICY" not in os.environ:
        import torch  # noqa: F401 - loaded first, so the backend leaves the OpenMP wait policy unset, as before
    from sctc_assets.backends.transformers_backend import TransformersBackend
    from sctc_assets.lib.generation import GenerationRequest

    started = float(os.environ["SCTC_BENCH_STARTED"])
    prompts = term_prompts(upstream, count)
    settings = backend_settings(path, new_settings)
    backend = TransformersBackend(**settings)
    load_started = time.time()
    loaded = backend._loaded()
    load_wall = time.time() - load_started
    cpu_loaded = _cpu()
    first: list[float] = []
    generate_started = time.time()
    rows = []
    for lang, block in prompts.groupby("lang", sort=False):
        records = block.to_dict("records")
        requests = [GenerationRequest.user(r["prompt"], trial=r["trial"], benchmark="term", lang=lang,
                                           prompt_variant=r["prompt_variant"], row=r["row"]) for r in records]

        def progress(done: int, total: int) -> None:
            if done and not first:
                first.append(time.time() - started)

        results = backend.generate(requests, progress=progress)
        rows += [{"lang": lang, "prompt_variant": int(r["prompt_variant"]), "term_id": r["term_id"],
                  "trial": int(r["trial"]), "prompt": r["prompt"], "text": result.text,
                  "output_tokens": result.output_tokens, "finish_reason": result.finish_reason}
                 for r, result in zip(records, results)]
    generate_wall = time.time() - generate_started
    cpu_generate = _cpu() - cpu_loaded
    with open(answers, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return {"path": path, "answers": len(rows), "load_wall": load_wall, "weights": loaded.info.get("weights", ""),
            "first_answer": first[0] if first else None, "generate_wall": generate_wall,
            "total_wall": time.time() - started, "cpu_load": cpu_loaded, "cpu": cpu_generate,
            "settings": {k: getattr(backend, k) for k in ("engine", "batch_size", "max_new_tokens",
                                                          "cache_converted_weights")}}


def run_path(path: str, args: argparse.Namespace, folder: Path) -> dict:
    answers = folder / f"{path}.jsonl"
    command = [sys.executable, __file__, "--worker", path, "--prompts", str(args.prompts), "--answers", str(answers),
               "--new-settings", json.dumps(new_settings(args))]
    if args.upstream:
        command += ["--upstream", args.upstream]
    env = {**os.environ, "SCTC_BENCH_STARTED": repr(time.time())}
    # Each path's own OpenMP wait policy unless one is forced: `before` as today's code ran (unset: the OpenMP
    # runtime's spinning default), `new` and `loop` the backend's PASSIVE default.
    env.pop("OMP_WAIT_POLICY", None)
    if args.omp_wait_policy:
        env["OMP_WAIT_POLICY"] = args.omp_wait_policy
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"path {path!r} failed:\n{done.stderr[-4000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["answers_file"] = str(answers)
    return report


def new_settings(args: argparse.Namespace) -> dict:
    """Settings that override the registry entry on the `new` and `loop` paths."""
    chosen = {"batch_size": args.batch_size, "max_new_tokens": args.max_new_tokens, "dtype": args.dtype}
    return {name: value for name, value in chosen.items() if value is not None}


def read_answers(path: str | Path) -> dict[tuple, dict]:
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return {(r["lang"], r["prompt_variant"], r["term_id"], r["trial"]): r for r in rows}


def compare(first: str | Path, second: str | Path, upstream: str | None) -> str:
    """Identical answers and identical `rules` labels over the prompts both files answered."""
    import pandas as pd

    from sctc_assets.lib.term.labelling import rules_labels

    a, b = read_answers(first), read_answers(second)
    shared = sorted(set(a) & set(b))
    prompts = term_prompts(upstream, 10**9)

    def labels(answers: dict) -> list[str]:
        frame = pd.DataFrame([{"model": "m", "lang": k[0], "prompt_variant": k[1], "term_id": k[2], "trial": k[3],
                               "response": answers[k]["text"], "outcome": "ok"} for k in shared])
        labelled = rules_labels(frame, prompts)
        by_key = {(r["lang"], r["prompt_variant"], r["term_id"], r["trial"]): r["label"]
                  for r in labelled.to_dict("records")}
        return [by_key[k] for k in shared]

    same_text = sum(a[k]["text"] == b[k]["text"] for k in shared)
    la, lb = labels(a), labels(b)
    same_label = sum(x == y for x, y in zip(la, lb))
    prefix = sum(a[k]["text"] != b[k]["text"] and (a[k]["text"].startswith(b[k]["text"])
                                                   or b[k]["text"].startswith(a[k]["text"])) for k in shared)
    counts = lambda values: {label: values.count(label) for label in ("correct", "misaligned", "incorrect")}  # noqa: E731
    return (f"{len(shared)} prompts answered by both: identical answers {same_text}/{len(shared)}"
            f" ({prefix} more differ only in length), identical labels {same_label}/{len(shared)}\n"
            f"  labels {Path(first).name}: {counts(la)}\n  labels {Path(second).name}: {counts(lb)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", default=None, help="SC-TC-Bench copy (default: $SCTC_UPSTREAM, else download)")
    parser.add_argument("--prompts", type=int, default=120, help="how many of the 660 term prompts each path answers")
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    parser.add_argument("--batch-size", type=int, default=None, help="new path: rows decoded at once (default: registry)")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="new and loop paths: answer length (default: the registry's benchmarks.term setting)")
    parser.add_argument("--dtype", default=None, help="new and loop paths: the model's dtype (default: registry)")
    parser.add_argument("--omp-wait-policy", choices=["PASSIVE", "ACTIVE"], default=None,
                        help="force one OMP_WAIT_POLICY on every path (default: before unset, as today's code ran;"
                        " new and loop the backend's PASSIVE)")
    parser.add_argument("--save", default=None, help="folder that keeps each path's answers (<path>.jsonl)")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two saved answer files and exit")
    parser.add_argument("--worker", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--answers", help=argparse.SUPPRESS)
    parser.add_argument("--new-settings", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.compare:
        print(compare(*args.compare, args.upstream))
        return
    if args.worker:
        print(json.dumps(worker(args.worker, args.upstream, args.prompts, Path(args.answers),
                                json.loads(args.new_settings))))
        return

    folder = Path(args.save) if args.save else Path(tempfile.mkdtemp(prefix="embedded-speed-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"{MODEL_KEY}: {args.prompts} term prompts per path, each path in a fresh process; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start, OMP_WAIT_POLICY="
          f"{args.omp_wait_policy or 'per path'}, new-path overrides {new_settings(args) or 'none'}")
    reports = {}
    for path in args.paths:
        reports[path] = report = run_path(path, args, folder)
        rate = report["answers"] / report["generate_wall"]
        first = report["first_answer"]
        print(f"{path:>6}: start+load {report['load_wall']:6.1f}s wall {report['cpu_load']:6.1f} CPU-s"
              f" ({report['weights'].split(' /')[0]}); first answer {first if first is None else round(first, 1)}s"
              f" after process start; {report['answers']} answers in {report['generate_wall']:6.1f}s wall ="
              f" {rate:5.2f} prompts/s, {report['cpu']:7.1f} CPU-s = {report['cpu'] / report['answers']:5.2f}"
              f" CPU-s/answer  {report['settings']}", flush=True)
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    rates = {path: r["answers"] / r["generate_wall"] for path, r in reports.items()}
    cpu = {path: r["cpu"] / r["answers"] for path, r in reports.items()}
    for other in ("before", "loop"):
        if "new" in reports and other in reports:
            print(f"new vs {other}: {rates['new'] / rates[other]:.1f}x prompts/s (wall), "
                  f"{cpu[other] / cpu['new']:.1f}x fewer CPU-s per answer")
    if "new" in reports and "before" in reports:
        print(compare(reports["before"]["answers_file"], reports["new"]["answers_file"], args.upstream))
    print(f"answers kept in {folder}")


if __name__ == "__main__":
    main()
