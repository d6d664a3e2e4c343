"""`sctc plan` / `sctc run --dry-run`: the calls it predicts are the calls the run makes, counted against the same
cache keys, with token and cost estimates; and a halted run says what is left."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar, Sequence

import pytest

from sctc_assets.backends.base import ResultCallback
from sctc_assets.cli import main
from sctc_assets.lib.cache import ResponseCache
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.lib.cost_estimate import (
    MESSAGE_OVERHEAD, SCRIPT_RULE, Estimate, EstimateRow, ExpectedAnswer, RequestSet, TokenCounter, cache_keys,
    cached_answers, estimate_partition, render,
)
from sctc_assets.lib.model_registry import load_registry
from sctc_assets.benchmarks import SPECS
from sctc_assets.cli.plan import build_estimate, keyed_request, token_counter
from sctc_assets_tests.fakes import ScriptedBackend, count_calls


class GenerationHalted(RuntimeError):
    """Stands for `sctc_assets.backends.base.GenerationHalted`: the CLI recognises it by its class name."""


class HaltingBackend(ScriptedBackend):
    """Answers `halt_after` requests of a partition (each stored), then stops as a spent budget stops a backend."""

    backend_name: ClassVar[str] = "halting"
    halt_after: int = 3

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        for index, request in enumerate(requests[: self.halt_after]):
            self._log_call(request)
            on_result(index, GenerationResult(text=self.default_answer, input_tokens=10, output_tokens=2))
        if len(requests) > self.halt_after:
            raise GenerationHalted(f"max calls reached: {self.halt_after} answered, "
                                   f"{len(requests) - self.halt_after} remaining")


def _requests(n: int, *, repeats: int = 1) -> list[GenerationRequest]:
    return [GenerationRequest.user(f"定义为'{index}'的是什么？", trial=trial, benchmark="term", row=index)
            for index in range(n) for trial in range(repeats)]


def test_plan_keys_are_the_keys_generate_stores(tmp_path):
    backend = ScriptedBackend(name="a")
    requests = _requests(30, repeats=2)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    backend.generate(requests[:20], cache=cache)
    stored = {row[0] for row in cache._connect().execute("SELECT key FROM responses")}
    keyed = keyed_request(backend)  # a backend that adds a per-trial seed keys the seeded request
    assert set(cache_keys(backend.identity(), requests[:20], keyed)) == stored
    request_set = RequestSet(requests)
    # Whether the few cached answers are found from the cache side or by keying every request, the answers agree.
    few = cached_answers(backend.identity(), request_set, cache, stored_count=len(stored), keyed=keyed)
    every = cached_answers(backend.identity(), request_set, cache, stored_count=10 ** 6, keyed=keyed)
    assert sorted(few) == sorted(every) == list(range(20))
    row = estimate_partition("term", "a", "zh_hans", request_set, identity=backend.identity(), cache=cache,
                         counter=SCRIPT_RULE, max_output_tokens=None, pricing=(None, None), stored_count=len(stored),
                         keyed=keyed)
    assert (row.calls, row.cached, row.to_ask) == (60, 20, 40)
    other = ScriptedBackend(name="b")  # another model's answers are not this one's
    assert cached_answers(other.identity(), request_set, cache, stored_count=len(stored), keyed=keyed) == {}


def test_repeats_of_one_request_are_asked_once_and_tokens_follow_the_script_rule():
    same = [GenerationRequest.user("你好abcd", trial=0), GenerationRequest.user("你好abcd", trial=0),
            GenerationRequest.user("你好abcd", trial=1)]
    row = estimate_partition("term", "m", "zh_hans", RequestSet(same), identity={"backend": "x", "model": "m"},
                         cache=None, counter=SCRIPT_RULE, max_output_tokens=50, pricing=(1.0, 2.0))
    # 2 Han characters (1 token each) + 4 ASCII letters (1 token), plus the chat format, for each of 2 requests
    assert (row.calls, row.cached, row.to_ask) == (3, 0, 2)
    assert row.input_tokens == 2 * (3 + MESSAGE_OVERHEAD)
    assert (row.output_tokens, row.output_ceiling) == (100, True)
    assert row.cost_usd == pytest.approx((row.input_tokens * 1.0 + 100 * 2.0) / 1e6)


def test_a_request_an_earlier_partition_asks_is_not_counted_again():
    asked: set = set()
    first = RequestSet([GenerationRequest.user("a"), GenerationRequest.user("b")])
    second = RequestSet([GenerationRequest.user("b"), GenerationRequest.user("c"), GenerationRequest.user("b", trial=1)])
    rows = [estimate_partition("reviews", "m", fmt, requests, identity={"model": "m"}, cache=None, counter=SCRIPT_RULE,
                           max_output_tokens=None, pricing=(None, None), asked_before=asked)
            for fmt, requests in (("plain", first), ("shuffled", second))]
    assert [(row.calls, row.to_ask, row.note) for row in rows] == [(2, 2, ""), (3, 2, "1 asked in an earlier partition")]


def test_a_real_tokenizer_is_sampled_and_scaled_by_characters():
    calls = []

    def encode(text: str) -> list[int]:
        calls.append(text)
        return [0] * len(text)  # one token per character

    prompts = ["字" * (index % 7 + 1) + str(index) for index in range(5000)]
    requests = RequestSet([GenerationRequest.user(prompt) for prompt in prompts])
    counter = TokenCounter("one per character", encode)
    row = estimate_partition("name", "m", "en", requests, identity={"model": "m"}, cache=None, counter=counter,
                         max_output_tokens=None, pricing=(None, None))
    assert len(calls) <= 1000  # a sample, not every prompt
    characters = sum(map(len, prompts))
    assert row.input_tokens == pytest.approx(characters + MESSAGE_OVERHEAD * 5000, rel=0.01)
    assert row.tokens_by == "one per character"


class CountingBackend(ScriptedBackend):
    """A backend of one's own that knows its model's tokenizer: two tokens per character."""

    backend_name: ClassVar[str] = "counting"

    def token_counter(self) -> TokenCounter:
        return TokenCounter("two per character", lambda text: [0] * (2 * len(text)))


def test_the_estimate_counts_tokens_with_the_counter_the_backend_s_class_gives():
    assert token_counter(CountingBackend()).name == "two per character"
    assert token_counter(ScriptedBackend()) is SCRIPT_RULE  # no tokenizer of its own: the script rule


def test_render_marks_ceilings_and_totals_per_model():
    plan = Estimate(rows=[EstimateRow("term", "m", "zh_hans", 10, 4, 6, 600, 60, True, 0.001, "rule"),
                      EstimateRow("term", "m", "zh_hant", 10, 10, 0, 0, 0, False, 0.0, "rule"),
                      EstimateRow("term", "paper", "zh_hans", 10, None, 0, note="replays published answers")])
    plan.add_note("term", "a note for the benchmark")
    text = render(plan)
    assert "≤ 60" in text and "≤ 0.0010" in text and "replays published answers" in text
    assert "  a note for the benchmark" in text
    totals = text[text.index("total per model:"):]
    assert "| m       | 20        | 14       | 6       | 600            | ≤ 60            | ≤ 0.0010   |" in totals


def test_replays_make_no_calls_and_the_expected_cost_is_bounded_by_the_ceiling():
    requests = RequestSet([GenerationRequest.user(f"prompt {index}") for index in range(100)])
    one_word = ExpectedAnswer(4, "one word")
    row = estimate_partition("term", "api", "zh_hans", requests, identity={"model": "api"}, cache=None,
                             counter=SCRIPT_RULE, max_output_tokens=256, pricing=(0.15, 0.60), expected=one_word)
    # Nothing cached: the benchmark's expected answer length, with the max_tokens ceiling as the bound.
    assert (row.output_tokens, row.max_output_tokens, row.output_by, row.output_ceiling) == (400, 25600, "expected",
                                                                                              False)
    assert row.cost_usd == pytest.approx((row.input_tokens * 0.15 + 400 * 0.60) / 1e6)
    assert row.max_cost_usd == pytest.approx((row.input_tokens * 0.15 + 25600 * 0.60) / 1e6)
    # An expectation above a lower ceiling is cut to it.
    capped = estimate_partition("term", "api", "zh_hans", requests, identity={"model": "api"}, cache=None,
                                counter=SCRIPT_RULE, max_output_tokens=2, pricing=(0.15, 0.60), expected=one_word)
    assert capped.output_tokens == capped.max_output_tokens == 200
    replay = estimate_partition("term", "paper", "zh_hans", requests, identity=None, cache=None, counter=SCRIPT_RULE,
                                max_output_tokens=None, pricing=(None, None))
    plan = Estimate(rows=[row, replay], expected_answers={"term": one_word})
    text = render(plan)
    table = text[:text.index("total per model:")]
    assert "| answers   | cached   | calls   |" in table
    assert (f"| api     | zh_hans     | 100       | 0        | 100     | {row.input_tokens:<14} | 400 (≤ 25,600)  |"
            f" {row.cost_usd:.4f}     | {row.max_cost_usd:.4f}        |") in table
    assert "| paper   | zh_hans     | 100       | –        | 0       |" in table  # answers, but no paid call
    assert "output tokens expected: one word, about 4 per answer" in table
    totals = text[text.index("total per model:"):]
    assert "| paper   | 100       | 0        | 0       |" in totals


def test_a_local_model_s_tokenizer_on_the_machine_counts_its_input_tokens(tmp_path, monkeypatch):
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    from sctc_assets.backends import gguf_cache
    from sctc_assets.backends.transformers_backend import TransformersBackend

    # A tokenizer.json giving one token per character, where the embedded model's converted weights are kept.
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    folder = tmp_path / "weights"
    folder.mkdir()
    tokenizer.save(str(folder / "tokenizer.json"))
    seen = []
    monkeypatch.setattr(gguf_cache, "cached_folder", lambda *args, **kwargs: seen.append(args) or folder)
    backend = TransformersBackend(embedded="qwen2.5-coder-0.5b-instruct-q4_k_m", device="cpu")
    counter = token_counter(backend)
    assert counter.name == "qwen2.5-coder-0.5b-instruct-q4_k_m's tokenizer.json" and counter.encode is not None
    assert seen and seen[0][1] == "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"  # looked up by the artifact's file
    requests = RequestSet([GenerationRequest.user("abcdefgh")] * 3)

    def input_tokens(counter: TokenCounter) -> int:
        return estimate_partition("term", "m", "zh_hans", requests, identity={"model": "m"}, cache=None,
                                  counter=counter, max_output_tokens=None, pricing=(None, None)).input_tokens

    assert input_tokens(counter) == 8 + MESSAGE_OVERHEAD  # its 8 tokens, not the 2 of the 4-characters rule
    # With the chat template kept beside it, what the template adds (here a default system message) is counted.
    (folder / "chat_template.jinja").write_text(
        "{% if messages[0].role != 'system' %}<s>default</s>{% endif %}"
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<a>{% endif %}",
        encoding="utf-8")
    templated = token_counter(backend)
    assert templated.name.endswith("tokenizer.json and chat template")
    assert input_tokens(templated) == len("<s>default</s><user>abcdefgh<a>")
    with_system = token_counter(TransformersBackend(embedded="qwen2.5-coder-0.5b-instruct-q4_k_m", device="cpu",
                                                    system_prompt="Be brief."))
    assert input_tokens(with_system) == len("<system>Be brief.<user>abcdefgh<a>")  # the backend's system message
    # Without a tokenizer on the machine (a hub model, nothing converted yet), the rule counts.
    monkeypatch.setattr(gguf_cache, "cached_folder", lambda *args, **kwargs: None)
    monkeypatch.setenv("SCTC_DOWNLOAD_CACHE", str(tmp_path / "empty-cache"))
    assert token_counter(TransformersBackend(model="Qwen/Qwen2.5-0.5B-Instruct", device="cpu")) is SCRIPT_RULE


@pytest.fixture
def fakes(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch):
    calls = tmp_path / "calls.log"
    registry = tmp_path / "models.yaml"
    registry.write_text(
        "models:\n"
        f"  fake-a: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: a, calls_file: '{calls}',"
        " default_answer: '复印件', benchmark_answers: {name: '陳麗華'},"  # on the first same_name_script list
        " benchmarks: {term: {trials: 1, prompt_variants: [1]}}}\n"
        f"  fake-b: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: b, calls_file: '{calls}',"
        " benchmark_answers: {reviews: '8'}}\n"
        f"  halting: {{backend: 'sctc_assets_tests.test_estimate:HaltingBackend', name: h, calls_file: '{calls}',"
        " halt_after: 3}\n"
        "  paper-qwen: {backend: replay, upstream_name: qwen}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    return calls


def _plan(benchmark: str, models: list[str], options: dict[str, Any] | None = None) -> list:
    entries = load_registry(Path(__import__("os").environ["SCTC_MODELS"]))
    return build_estimate({benchmark: models}, entries, options or {}).rows


def test_dry_run_prints_the_plan_and_writes_nothing(fakes, isolated_data_dir, capsys):
    assert main(["run", "--dry-run", "--models", "fake-a", "paper-qwen", "--prompt-variants", "1"]) == 0
    out = capsys.readouterr().out
    assert "| fake-a     | zh_hans     | 110       | 0        | 110     |" in out
    assert "replays published answers" in out
    assert "total per model:" in out and "Estimates:" in out
    assert not (isolated_data_dir / "storage").exists() and not (isolated_data_dir / "cache").exists()
    assert count_calls(fakes) == 0


@pytest.mark.parametrize("benchmark, argv", [
    ("term", ["--prompt-variants", "1"]),
    ("name", ["--name-experiments", "same_name_script", "gender_balanced", "--name-lists", "1", "--name-shuffles",
              "2"]),
])
@pytest.mark.slow
def test_the_plan_predicts_the_calls_the_run_makes_and_then_finds_them_cached(fakes, benchmark, argv, tmp_path):
    options = {"prompt_variants": [1]} if benchmark == "term" else {
        "name_experiments": ["same_name_script", "gender_balanced"], "name_lists": 1, "name_shuffles": 2}
    before = _plan(benchmark, ["fake-a", "paper-qwen"], options)
    live = [row for row in before if row.model == "fake-a"]
    assert all(row.cached == 0 for row in live) and sum(row.to_ask for row in live) > 0
    # No answer cached yet: the output is the benchmark's expected answer length (its spec's, one word or name).
    assert all(row.output_by == "expected" and row.output_tokens == 4 * row.to_ask for row in live)
    assert all(row.to_ask == 0 and row.cached is None for row in before if row.model == "paper-qwen")
    assert main(["run", "--benchmarks", benchmark, "--models", "fake-a", "paper-qwen", "--out", str(tmp_path / "out"),
                 *argv]) == 0
    assert count_calls(fakes) == sum(row.to_ask for row in live)
    after = [row for row in _plan(benchmark, ["fake-a"], options)]
    assert [(row.partition, row.cached, row.to_ask) for row in after] == [(row.partition, row.calls, 0) for row in live]


def test_sovereignty_and_reviews_plans_match_their_runs(fakes, tsb_location, monkeypatch, tmp_path):
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    sovereignty = _plan("sovereignty", ["fake-b"], {"sovereignty_samples": 2})
    reviews = _plan("reviews", ["fake-b"], {"max_pairs": 2})
    assert [row.calls for row in sovereignty] == [20, 20, 20]
    assert main(["run", "--benchmarks", "sovereignty", "reviews", "--models", "fake-b", "--sovereignty-samples", "2",
                 "--max-pairs", "2", "--out", str(tmp_path / "out")]) == 0
    assert count_calls(fakes) == sum(row.to_ask for row in sovereignty + reviews)
    again = _plan("sovereignty", ["fake-b"], {"sovereignty_samples": 2}) + _plan("reviews", ["fake-b"], {"max_pairs": 2})
    assert all(row.to_ask == 0 and row.cached == row.calls for row in again)


def test_a_benchmark_plan_takes_extra_lines_from_its_hooks(fakes, monkeypatch):
    seen = []

    def power(design) -> list[str]:
        seen.append(design)
        return [f"{len(design.partitions)} partitions, {len(design.partitions[0].selected)} prompts in the first"]

    monkeypatch.setitem(SPECS, "term", dataclasses.replace(SPECS["term"], estimate_lines=(power,)))
    entries = load_registry(Path(__import__("os").environ["SCTC_MODELS"]))
    plan = build_estimate({"term": ["fake-a"]}, entries, {})
    assert plan.notes["term"] == ["2 partitions, 110 prompts in the first"]
    assert seen[0].partitions[0].settings == (1, [1])


@pytest.mark.slow
def test_a_halted_run_says_what_is_left_and_a_rerun_continues(fakes, capsys, tmp_path):
    status = main(["run", "--models", "halting", "--trials", "1", "--prompt-variants", "1", "--out",
                   str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 1
    assert count_calls(fakes) == 6  # 3 per language were answered and stored
    assert "model calls halted: max calls reached: 3 answered" in err  # the fake counts one claimed chunk
    assert "left to ask: 214 calls" in err
    assert "term halting/zh_hans: 107" in err and "term halting/zh_hant: 107" in err
    # Nothing answered is asked again: the rerun's first calls are new ones.
    main(["run", "--models", "halting", "--trials", "1", "--prompt-variants", "1", "--out", str(tmp_path / "out")])
    prompts = [json.loads(line)["prompt"] for line in Path(fakes).read_text(encoding="utf-8").splitlines()]
    assert len(prompts) == 12 and len(set(prompts)) == 12


def test_the_term_and_name_plans_print_the_power_of_their_design(fakes):
    from scipy.stats import norm

    entries = load_registry(Path(__import__("os").environ["SCTC_MODELS"]))
    plan = build_estimate({"term": ["fake-a"], "name": ["fake-a"]}, entries, {"trials": 3, "prompt_variants": [1]})
    term = [line for line in plan.notes["term"] if line.startswith("power")]
    assert len(term) == 1 and "fake-a: 110 terms × 3 trial(s)" in term[0]
    # By hand: two groups of n = 110·3 (ICC 0) or 110 (ICC 1) answers, Cohen's h = 2·(z_0.975 + z_0.8)/√(2n)... the
    # drop from 50 % whose arcsine distance is h.
    import math

    def drop(n: int) -> float:
        h = (norm.ppf(0.975) + norm.ppf(0.8)) * math.sqrt(2 / n)
        return 0.5 - math.sin(math.asin(math.sqrt(0.5)) - h / 2) ** 2
    assert f"from {100 * drop(330):.1f} pp (independent trials) to {100 * drop(110):.1f} pp" in term[0]
    name = [line for line in plan.notes["name"] if line.startswith("power")]
    assert len(name) == 1 and "Mainland share vs 50 %" in name[0] and " lists × " in name[0]
