"""Continuous batching for a `transformers` causal LM: every sequence stops at its own end and its slot is refilled.

`model.generate` on a padded batch runs every row until the longest answer ends, and computes every prompt's shared
beginning (chat template, system prompt) again for each row. Here:
- the prompts' common prefix is computed once and its key/value cache reused by every row;
- prompts enter in token order, so neighbours share beginnings (a prompt template): each group of new rows is
  prefilled as one packed token tree (tree attention), computing each shared token once and no padding;
- a row leaves the batch the moment it produces an end token or reaches `max_new_tokens`, and when enough slots are
  free the next prompts are prefilled and join the running rows (their caches are aligned on the right and masked);
- until the first answer only a few rows run (`FIRST_ROWS`), so the first answer does not wait for a full batch's
  prefill.

Each row's positions and masks are its own, so an answer does not depend on its neighbours except through floating
point rounding (matrix products over other batch shapes). Only plain full-attention key/value caches
(`DynamicLayer`) and the sdpa or eager attention are supported; `supports(model)` says whether a model qualifies.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch

SUPPORTED_ATTENTION = ("sdpa", "eager")
FIRST_ROWS = 8
# (logits of the rows that need a next token [n, vocab], their prompt indices) -> next tokens [n]
NextTokens = Callable[[torch.Tensor, list[int]], torch.Tensor]
# (prompt index, new tokens including the end token, finish reason "stop"/"length", seconds since its prefill)
OnFinished = Callable[[int, list[int], str, float], None]


class UnsupportedModel(RuntimeError):
    """The model's cache or attention does not fit this engine; use `model.generate` instead."""


def supports(model: Any) -> bool:
    config = getattr(model, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) not in SUPPORTED_ATTENTION:
        return False
    if getattr(config, "is_encoder_decoder", False):
        return False
    layer_types = getattr(config, "layer_types", None)
    if layer_types and any(kind != "full_attention" for kind in layer_types):
        return False
    if getattr(config, "use_sliding_window", False) and getattr(config, "sliding_window", None):
        return False
    return True


def _cache_argument(model: Any) -> str:
    """transformers 5 calls the key/value cache argument `cache` (`past_key_values` before)."""
    parameters = inspect.signature(model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def _new_cache(model: Any):
    from transformers import DynamicCache

    return DynamicCache(config=model.config)


def _layers(cache: Any) -> list[Any]:
    from transformers.cache_utils import DynamicLayer

    layers = list(getattr(cache, "layers", []))
    if not layers or any(type(layer) is not DynamicLayer or not getattr(layer, "is_initialized", False)
                         for layer in layers):
        raise UnsupportedModel("the model's key/value cache is not a plain dynamic full-attention cache")
    return layers


@dataclass
class _Running:
    """The rows being decoded: caches aligned on the right, `valid` marks real (non-padding) cache columns."""

    cache: Any = None
    valid: Optional[torch.Tensor] = None  # [rows, columns] bool
    positions: Optional[torch.Tensor] = None  # [rows] next position id of each row
    last: Optional[torch.Tensor] = None  # [rows] last token of each row (the next input)
    rows: list[int] = field(default_factory=list)  # prompt index of each row
    tokens: list[list[int]] = field(default_factory=list)  # new tokens of each row
    started: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)


class ContinuousBatcher:
    """Greedy or sampled generation for many prompts; see the module docstring."""

    def __init__(self, model: Any, *, batch_size: int, max_new_tokens: int, eos_token_ids: Sequence[int],
                 next_tokens: NextTokens, device: Any, refill_at: Optional[int] = None):
        if not supports(model):
            raise UnsupportedModel("continuous batching needs sdpa/eager attention and a full-attention cache")
        self.model = model
        self.batch_size = max(1, int(batch_size))
        self.max_new_tokens = int(max_new_tokens)
        self.eos = set(int(token) for token in eos_token_ids)
        self.next_tokens = next_tokens
        self.device = device
        # Prefilling a handful of rows at a time keeps the batch full; a few at once keep the matrix products large.
        self.refill_at = max(1, refill_at if refill_at is not None else self.batch_size // 4)
        # Until the first answer the batch holds only this many rows: a full first prefill (48 prompts, ~40 s on
        # 2 CPU cores) would come before any answer; the rest join as soon as one row ends.
        self.first_rows = min(self.batch_size, max(FIRST_ROWS, self.refill_at))
        self.cache_argument = _cache_argument(model)
        self.eager = model.config._attn_implementation == "eager"
        self.dtype = next(model.parameters()).dtype
        self.stats = {"prefill_tokens": 0, "decode_steps": 0, "decode_rows": 0, "prefix_tokens": 0}

    # --- model calls ---------------------------------------------------------------------------------------------

    def _mask(self, allowed: torch.Tensor) -> torch.Tensor:
        """[batch, 1, queries, keys] attention mask in the form the attention implementation expects."""
        if not self.eager:
            return allowed
        mask = torch.zeros(allowed.shape, dtype=self.dtype, device=allowed.device)
        return mask.masked_fill(~allowed, torch.finfo(self.dtype).min)

    def _forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, allowed: torch.Tensor, cache: Any,
                 keep: Any) -> torch.Tensor:
        output = self.model(input_ids=input_ids, position_ids=position_ids, attention_mask=self._mask(allowed),
                            use_cache=True, logits_to_keep=keep, **{self.cache_argument: cache})
        return output.logits

    def _prefix_cache(self, prefix: Sequence[int]) -> Optional[list[tuple[torch.Tensor, torch.Tensor]]]:
        if not prefix:
            return None
        cache = _new_cache(self.model)
        n = len(prefix)
        ids = torch.tensor([list(prefix)], dtype=torch.long, device=self.device)
        positions = torch.arange(n, device=self.device)[None, :]
        allowed = torch.ones(n, n, dtype=torch.bool, device=self.device).tril()[None, None]
        self._forward(ids, positions, allowed, cache, 1)
        self.stats["prefix_tokens"] += n
        return [(layer.keys, layer.values) for layer in _layers(cache)]

    def _prefill(self, prefix_kv, prefix_len: int, suffixes: list[Sequence[int]]):
        """Run the new rows' suffixes as one packed token tree; returns (cache tensors per layer, logits, rows)."""
        parents: list[int] = []
        tokens: list[int] = []
        depths: list[int] = []
        children: dict[tuple[int, int], int] = {}
        paths: list[list[int]] = []
        for suffix in suffixes:
            node, path = -1, []
            for token in suffix:
                key = (node, int(token))
                if key not in children:
                    children[key] = len(tokens)
                    parents.append(node)
                    tokens.append(int(token))
                    depths.append(len(path))
                path.append(children[key])
                node = children[key]
            paths.append(path)
        n = len(tokens)
        ancestors = torch.zeros(n, n, dtype=torch.bool)
        for index, parent in enumerate(parents):
            if parent >= 0:
                ancestors[index] = ancestors[parent]
            ancestors[index, index] = True
        allowed = torch.cat([torch.ones(n, prefix_len, dtype=torch.bool), ancestors], dim=1)
        cache = _new_cache(self.model)
        if prefix_kv is not None:
            for index, (keys, values) in enumerate(prefix_kv):
                cache.update(keys, values, index)
        ids = torch.tensor([tokens], dtype=torch.long, device=self.device)
        positions = (torch.tensor(depths, dtype=torch.long) + prefix_len)[None, :].to(self.device)
        last_nodes = torch.tensor([path[-1] for path in paths], dtype=torch.long, device=self.device)
        logits = self._forward(ids, positions, allowed[None, None].to(self.device), cache, last_nodes)[0]
        self.stats["prefill_tokens"] += n
        # Each row's cache: the prefix, then its own path through the tree, aligned on the right.
        lengths = [prefix_len + len(path) for path in paths]
        width = max(lengths)
        gather = torch.zeros(len(paths), width, dtype=torch.long)
        valid = torch.zeros(len(paths), width, dtype=torch.bool)
        for row, path in enumerate(paths):
            columns = list(range(prefix_len)) + [prefix_len + node for node in path]
            gather[row, width - len(columns):] = torch.tensor(columns, dtype=torch.long)
            valid[row, width - len(columns):] = True
        gather = gather.to(self.device)
        layers = []
        for layer in _layers(cache):
            # [1, heads, columns, dim] -> [rows, heads, width, dim]; padding columns copy column 0 and are masked.
            keys = layer.keys[0][:, gather].permute(1, 0, 2, 3)
            values = layer.values[0][:, gather].permute(1, 0, 2, 3)
            layers.append((keys.contiguous(), values.contiguous()))
        return layers, logits, valid.to(self.device), torch.tensor(lengths, dtype=torch.long, device=self.device)

    # --- the batch -----------------------------------------------------------------------------------------------

    def _join(self, state: _Running, layers, valid: torch.Tensor, positions: torch.Tensor, last: torch.Tensor,
              rows: list[int], started: list[float], first_tokens: list[list[int]]) -> _Running:
        if not len(state):
            cache = _new_cache(self.model)
            for index, (keys, values) in enumerate(layers):
                cache.update(keys, values, index)
            return _Running(cache, valid, positions, last, rows, first_tokens, started)
        old_width, new_width = state.valid.shape[1], valid.shape[1]
        width = max(old_width, new_width)
        pad = torch.nn.functional.pad
        for layer, (keys, values) in zip(_layers(state.cache), layers):
            layer.keys = torch.cat([pad(layer.keys, (0, 0, width - old_width, 0)),
                                    pad(keys, (0, 0, width - new_width, 0))], dim=0)
            layer.values = torch.cat([pad(layer.values, (0, 0, width - old_width, 0)),
                                      pad(values, (0, 0, width - new_width, 0))], dim=0)
        state.valid = torch.cat([pad(state.valid, (width - old_width, 0)), pad(valid, (width - new_width, 0))])
        state.positions = torch.cat([state.positions, positions])
        state.last = torch.cat([state.last, last])
        state.rows += rows
        state.tokens += first_tokens
        state.started += started
        return state

    def _keep(self, state: _Running, keep: list[int]) -> _Running:
        if len(keep) == len(state):
            return state
        if not keep:
            return _Running()
        index = torch.tensor(keep, dtype=torch.long, device=self.device)
        valid = state.valid[index]
        used = valid.any(dim=0).nonzero()
        start = int(used[0]) if len(used) else 0  # drop columns that only the removed rows used
        for layer in _layers(state.cache):
            layer.keys = layer.keys[index, :, start:]
            layer.values = layer.values[index, :, start:]
        return _Running(state.cache, valid[:, start:], state.positions[index], state.last[index],
                        [state.rows[i] for i in keep], [state.tokens[i] for i in keep],
                        [state.started[i] for i in keep])

    def _finished(self, tokens: list[int]) -> Optional[str]:
        if tokens and tokens[-1] in self.eos:
            return "stop"
        if len(tokens) >= self.max_new_tokens:
            return "length"
        return None

    def run(self, prompts: Sequence[Sequence[int]], on_finished: OnFinished,
            should_stop: Optional[Callable[[], bool]] = None) -> list[int]:
        """Answer every prompt (each must have at least one token); returns the indices never started (halted)."""
        if not prompts:
            return []
        if any(len(prompt) == 0 for prompt in prompts):
            raise ValueError("every prompt needs at least one token")
        shortest = min(len(prompt) for prompt in prompts)
        prefix_len = 0
        first = prompts[0]
        while prefix_len < shortest - 1 and all(prompt[prefix_len] == first[prefix_len] for prompt in prompts):
            prefix_len += 1
        never: list[int] = []
        with torch.inference_mode():
            prefix_kv = self._prefix_cache(first[:prefix_len])
            pending = sorted(range(len(prompts)), key=lambda index: (list(prompts[index]), index))
            pending.reverse()  # pop() from the end takes them in token order
            state = _Running()
            answered = False

            def finished(index: int, tokens: list[int], reason: str, seconds: float) -> None:
                nonlocal answered
                answered = True
                on_finished(index, tokens, reason, seconds)

            while pending or len(state):
                free = (self.batch_size if answered else self.first_rows) - len(state)
                if pending and (free >= self.refill_at or not len(state)):
                    if should_stop is not None and should_stop():
                        never, pending = sorted(pending), []  # the running rows still finish
                    else:
                        admitted = [pending.pop() for _ in range(min(free, len(pending)))]
                        state = self._admit(state, prefix_kv, prefix_len, prompts, admitted, finished)
                if len(state):
                    state = self._step(state, finished)
        return never

    def _admit(self, state: _Running, prefix_kv, prefix_len: int, prompts: Sequence[Sequence[int]],
               indices: list[int], on_finished: OnFinished) -> _Running:
        started = time.monotonic()
        layers, logits, valid, lengths = self._prefill(prefix_kv, prefix_len, [prompts[i][prefix_len:] for i in indices])
        chosen = self.next_tokens(logits, indices)
        keep = []
        first_tokens = []
        for row, (index, token) in enumerate(zip(indices, chosen.tolist())):
            tokens = [int(token)]
            reason = self._finished(tokens)
            if reason:
                on_finished(index, tokens, reason, time.monotonic() - started)
            else:
                keep.append(row)
                first_tokens.append(tokens)
        if not keep:
            return state
        index = torch.tensor(keep, dtype=torch.long, device=self.device)
        layers = [(keys[index], values[index]) for keys, values in layers]
        return self._join(state, layers, valid[index], lengths[index], chosen.to(self.device)[index],
                          [indices[row] for row in keep], [started] * len(keep), first_tokens)

    def _step(self, state: _Running, on_finished: OnFinished) -> _Running:
        rows = len(state)
        allowed = torch.cat([state.valid, torch.ones(rows, 1, dtype=torch.bool, device=self.device)], dim=1)
        logits = self._forward(state.last[:, None], state.positions[:, None], allowed[:, None, None, :],
                               state.cache, 1)[:, -1]
        chosen = self.next_tokens(logits, state.rows)
        state.valid = allowed
        state.positions = state.positions + 1
        state.last = chosen.to(self.device)
        self.stats["decode_steps"] += 1
        self.stats["decode_rows"] += rows
        keep = []
        now = time.monotonic()
        for row, token in enumerate(chosen.tolist()):
            state.tokens[row].append(int(token))
            reason = self._finished(state.tokens[row])
            if reason:
                on_finished(state.rows[row], state.tokens[row], reason, now - state.started[row])
            else:
                keep.append(row)
        return self._keep(state, keep)
