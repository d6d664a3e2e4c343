"""Throughput of the `transformers` backend at several batch sizes, side by side in one run.

Builds a model with random weights and the architecture of Qwen2.5-0.5B-Instruct (or a smaller one with
`--tiny`), so it runs anywhere without downloading weights; random weights rarely stop early, so every answer runs
to `--max-new-tokens`, which makes the batch sizes comparable. The tokenizer comes from `--tokenizer DIR` (a saved
Hugging Face tokenizer; `--tokenizer embedded` takes it from the embedded Qwen GGUF) so prompts are tokenised as
the real model would. Prints answers per second per batch size and the speed-up over batch size 1, for the
backend's `--engine` (continuous batching by default, or `generate`, transformers' padded batches). For the real
embedded model on the term prompts see `bench/embedded_speed.py`.

    python bench/transformers_throughput.py --tokenizer embedded --prompts 64 --batch-sizes 1 8 16
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

QWEN25_05B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                  num_key_value_heads=2, max_position_embeddings=32768, rope_theta=1000000.0, tie_word_embeddings=True)
TINY = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=4096, tie_word_embeddings=True)


def _tokenizer(source: str):
    from transformers import AutoTokenizer

    if source == "embedded":
        from sctc_assets.lib.embedded_model import ensure_artifact

        path = ensure_artifact("qwen2.5-coder-0.5b-instruct-q4_k_m")
        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return AutoTokenizer.from_pretrained(source)


def build_random_model(tokenizer_source: str, target: Path, *, tiny: bool) -> Path:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = _tokenizer(tokenizer_source)
    config = Qwen2Config(vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, **(TINY if tiny else QWEN25_05B))
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def term_like_prompts(count: int) -> list[str]:
    definitions = ["用来控制电脑光标的手持设备", "通过复印机复制原始文件或图片所得到的副本", "在飞机上负责为乘客提供服务的工作人员",
                   "距离营业窗口一米远的地面上画出的横线", "一种黄色多刺的热带水果"]
    return [f"定义为'{definitions[i % len(definitions)]}（{i}）'的是什么，请用一个词回答？" for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", default="embedded", help="saved tokenizer folder, or 'embedded' (default)")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 16])
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model instead of Qwen2.5-0.5B's shape")
    parser.add_argument("--engine", choices=["continuous", "generate"], default="continuous")
    args = parser.parse_args()

    import torch

    from sctc_assets.backends.transformers_backend import TransformersBackend
    from sctc_assets.lib.generation import GenerationRequest

    with tempfile.TemporaryDirectory() as folder:
        model_dir = build_random_model(args.tokenizer, Path(folder) / "model", tiny=args.tiny)
        requests = [GenerationRequest.user(prompt) for prompt in term_like_prompts(args.prompts)]
        device = "cuda" if torch.cuda.is_available() and args.device == "auto" else args.device
        print(f"model: random {'tiny' if args.tiny else 'Qwen2.5-0.5B-shaped'} Qwen2, device={device}, "
              f"dtype={args.dtype}, engine={args.engine}, prompts={args.prompts}, max_new_tokens={args.max_new_tokens}")
        if torch.cuda.is_available():
            print(f"gpu: {torch.cuda.get_device_name(0)}")
        rates: dict[int, float] = {}
        first_answers = None
        for batch_size in args.batch_sizes:
            backend = TransformersBackend(model=str(model_dir), device=args.device, dtype=args.dtype,
                                          batch_size=batch_size, max_new_tokens=args.max_new_tokens,
                                          engine=args.engine)
            backend.generate(requests[: min(len(requests), batch_size)])  # load + warm-up, not timed
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            started = time.perf_counter()
            results = backend.generate(requests)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            elapsed = time.perf_counter() - started
            tokens = sum(result.output_tokens or 0 for result in results)
            rates[batch_size] = len(results) / elapsed
            same = "" if first_answers is None else \
                f", answers equal to batch {args.batch_sizes[0]}: {sum(a == r.text for a, r in zip(first_answers, results))}/{len(results)}"
            first_answers = first_answers or [result.text for result in results]
            print(f"batch {batch_size:4d}: {elapsed:7.2f}s  {rates[batch_size]:8.2f} answers/s  "
                  f"{tokens / elapsed:9.1f} new tokens/s{same}")
        base = rates[args.batch_sizes[0]]
        for batch_size, rate in rates.items():
            print(f"speedup batch {batch_size} vs {args.batch_sizes[0]}: {rate / base:.1f}x")


if __name__ == "__main__":
    main()
