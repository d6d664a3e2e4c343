"""A tiny benchmark that `sctc run`'s own code (`run_benchmarks`) runs in a subprocess, so tests can send it real
signals: `python -m sctc_assets_tests.runner_target MODE MARKER_FILE MODEL…` with SCTC_DATA_DIR and DAGSTER_HOME set.

MODE `halting`: each answers partition stores 3 answers in the response cache, writes "started <model>/<lang>" to
MARKER_FILE, then waits for the stop request as a backend does and raises `GenerationHalted`; `stubborn`: the same,
but it ignores the stop request (a call that never returns); `hang`: it sleeps, for a SIGKILL. With `--replay` the
models are registry entries of the `replay` backend, so their stages run in `sctc run`'s worker processes.
"""

import argparse
import sys
import time
from pathlib import Path

import dagster as dg

from sctc_assets.lib.cache import ResponseCache
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.lib.interrupt import stop_reason
from sctc_assets.lib.paths import default_cache_path
from sctc_assets.assets.partitions import model_and_lang, model_lang_partitions
from sctc_assets.benchmarks.spec import BenchmarkSpec

PARTITIONS = model_lang_partitions(("zh_hans", "zh_hant"))
WAIT_S = 60


class GenerationHalted(RuntimeError):
    """Stands for `sctc_assets.backends.base.GenerationHalted`: the runner knows it by its class name."""


def _store_answers(model: str, lang: str) -> None:
    cache = ResponseCache(default_cache_path())
    for trial in range(3):
        request = GenerationRequest(messages=({"role": "user", "content": f"{model} {lang}"},), trial=trial)
        key = f"{model}/{lang}/{trial}"
        cache.put(key, {"backend": "target", "model": model}, request, GenerationResult(text="答", outcome="ok"))


def build(mode: str, marker: Path) -> tuple[BenchmarkSpec, dg.Definitions]:
    @dg.asset(code_version="1")
    def target_inputs() -> None:
        return None

    @dg.asset(partitions_def=PARTITIONS, deps=[target_inputs], code_version="1")
    def target_answers(context: dg.AssetExecutionContext) -> None:
        model, lang = model_and_lang(context)
        _store_answers(model, lang)
        with marker.open("a") as out:
            out.write(f"started {model}/{lang}\n")
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if mode == "halting" and stop_reason() is not None:
                raise GenerationHalted(f"{stop_reason()}: 3 answered, 7 remaining")
            time.sleep(0.05)
        return None

    jobs = [dg.define_asset_job("target_inputs", selection=[target_inputs]),
            dg.define_asset_job("target_model_lang", selection=[target_answers])]
    plan = BenchmarkSpec.of_stages(name="target", langs=("zh_hans", "zh_hant"), inputs=("target_inputs",),
                         per_model_lang=("target_answers",), per_model=(), cross_model=())
    return plan, dg.Definitions(assets=[target_inputs, target_answers], jobs=jobs)


def main() -> int:
    from types import SimpleNamespace

    from sctc_assets.lib.model_selection import ModelSelection
    from sctc_assets.running.cli_run import run_benchmarks

    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["halting", "stubborn", "hang"])
    parser.add_argument("marker", type=Path)
    parser.add_argument("models", nargs="+")
    parser.add_argument("--replay", action="store_true")
    args = parser.parse_args()
    plan, defs = build(args.mode, args.marker)
    run_args = SimpleNamespace(benchmarks=["target"], models=args.models, out=args.marker.parent / "out", debug=False)
    entries = {model: SimpleNamespace(default=True, backend="replay" if args.replay else "target", settings={},
                                      benchmarks={}) for model in args.models}
    registry = SimpleNamespace(entries=lambda: entries)
    project = SimpleNamespace(specs={"target": plan}, defs=defs, resources={"models": registry} if args.replay else {})
    return run_benchmarks(run_args, {}, ModelSelection.of(entries, {"target": []}, args.models), project=project)


if __name__ == "__main__":
    sys.exit(main())
