"""What a run would ask, before it asks: calls, cached answers, estimated tokens and cost, per partition.

The requests come from the same builders the response assets use (`lib/<benchmark>/requests.py`); this module
counts them against the response cache (the keys `ModelBackend.generate` would look up) and estimates tokens:
- input: with the model's own tokenizer where one is known offline (an OpenAI model name that tiktoken maps to an
  encoding whose file the tokenizer registry holds), else by script: one token per CJK character (Han, kana,
  bopomofo, CJK and full-width punctuation; the o200k, cl100k and Qwen vocabularies give 0.6–1.5) and one per four
  other characters. A tokenizer is run on up to `SAMPLE_PROMPTS` prompts of a partition, spread evenly, and its
  tokens per character scale to the partition's characters. Each message adds `MESSAGE_OVERHEAD` tokens (the chat
  format's role markers), unless the counter knows the model's chat template (`TokenCounter.render`, a local
  model's): then what the template adds to a request (role markers, a default system message) is counted with the
  tokenizer on up to `SAMPLE_TEMPLATES` requests and added per request.
- output: the mean output tokens of the model's answers to these requests already in the cache, when there are
  any; else the benchmark's expected answer length (`ExpectedAnswer`, stated once in its spec: one word for the
  term benchmark), at most the ceiling; else the ceiling, the backend's `max_tokens`/`max_new_tokens` per call
  (marked as such).
Cost is tokens × the registry's `price_input_per_mtok`/`price_output_per_mtok`; only calls not yet cached count. The
expected cost uses the expected output tokens; its bound, every answer as long as the ceiling allows. A model that
goes by batch is priced at the batch price (the caller passes the prices times its `batch_price_factor`, and the
factor, which the plan shows).
Replays of published answers make no call: their answers are counted, their calls are 0.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from sctc_assets.lib.cache import Cache, cache_key
from sctc_assets.lib.generation import GenerationRequest, GenerationResult

if TYPE_CHECKING:  # the designs carry tables; this module itself needs no pandas
    import pandas as pd

SAMPLE_PROMPTS = 1000
SAMPLE_TEMPLATES = 100
MESSAGE_OVERHEAD = 4
CJK_TOKENS_PER_CHAR = 1.0
OTHER_CHARS_PER_TOKEN = 4.0
_CJK = re.compile("[\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u31a0-\u31bf\u3400-\u4dbf\u4e00-\u9fff"
                  "\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003134f]")

Encode = Callable[[str], Sequence[int]]
Render = Callable[[Sequence[Mapping[str, str]]], str]
_MISSING = object()


@dataclass(frozen=True)
class ExpectedAnswer:
    """How long a benchmark's answers are expected to be, in output tokens per answer, and in words (`what`, shown
    in the plan): the expected cost before any answer of the model is cached."""

    tokens: int
    what: str


@dataclass(frozen=True)
class TokenCounter:
    """How input tokens are counted: `encode` is a real tokenizer, or None for the characters-per-token rule;
    `render`, when known, turns a request's messages into the text the model reads (its chat template)."""

    name: str
    encode: Encode | None = None
    render: Render | None = None

    def template_tokens(self, requests: Sequence[Sequence[Mapping[str, str]]]) -> float | None:
        """The mean tokens `render` adds to the messages' own (None without a tokenizer and a template)."""
        if self.encode is None or self.render is None or not requests:
            return None
        added = [len(self.encode(self.render(messages)))
                 - sum(len(self.encode(message.get("content") or "")) for message in messages)
                 for messages in requests]
        return sum(added) / len(added)

    def tokens_per_char(self, texts: Sequence[str]) -> float:
        """Tokens per character over `texts` (a sample of `SAMPLE_PROMPTS` when there are more, spread evenly)."""
        step = max(1, len(texts) // SAMPLE_PROMPTS)
        sample = [text for text in texts[::step] if text]
        chars = sum(map(len, sample))
        if not chars:
            return 0.0
        if self.encode is not None:
            return sum(len(self.encode(text)) for text in sample) / chars
        joined = "".join(sample)
        cjk = len(joined) - len(_CJK.sub("", joined))
        return (cjk * CJK_TOKENS_PER_CHAR + (chars - cjk) / OTHER_CHARS_PER_TOKEN) / chars


SCRIPT_RULE = TokenCounter(f"characters: {CJK_TOKENS_PER_CHAR:g} token per CJK character, "
                           f"1 per {OTHER_CHARS_PER_TOKEN:g} others")


# Tokenizers loaded once per process (a tiktoken encoding, a `tokenizer.json` path), None where loading failed.
_LOADED: dict[str, TokenCounter | None] = {}


def _loaded(key: str, load: Callable[[], TokenCounter | None]) -> TokenCounter | None:
    if key not in _LOADED:
        _LOADED[key] = load()
    return _LOADED[key]


def tiktoken_counter(model: str) -> TokenCounter | None:
    """The tokenizer of an OpenAI model (also behind an `openai/…` router prefix) when tiktoken maps its name to an
    encoding whose copy the tokenizer registry holds on this machine (a plan never downloads); else None."""
    try:
        from tiktoken.model import encoding_name_for_model

        encoding = encoding_name_for_model(model.removeprefix("openai/"))
    except (ImportError, KeyError):
        return None
    return _loaded(f"tiktoken:{encoding}", lambda: _registry_tiktoken(encoding))


def _registry_tiktoken(encoding: str) -> TokenCounter | None:
    # imported here: the tokenizer registry needs pandas, which the rest of this module does not
    from sctc_assets.lib.name.tokenization import (TokenizerIntegrityError, TokenizerRegistryError,
                                                   TokenizerUnavailable, default_files_dir, load_registry,
                                                   load_tokenizer)
    from sctc_assets.lib.paths import default_tokenizers_path

    try:
        entries = load_registry(default_tokenizers_path())
    except (OSError, TokenizerRegistryError):
        return None
    for entry in entries.values():
        # Only a copy already on this machine: a plan never downloads.
        if entry.kind == "tiktoken" and entry.settings.get("encoding") == encoding \
                and "offline_copy" in entry.settings and "package" in entry.settings["offline_copy"]:
            try:
                return TokenCounter(f"tiktoken {encoding}", load_tokenizer(entry, default_files_dir()))
            except (TokenizerUnavailable, TokenizerIntegrityError, OSError, ValueError):
                return None
    return None


# Why a registry tokenizer could not be loaded (its key → the reason), for the entries `_LOADED` holds None for.
_UNAVAILABLE: dict[str, str] = {}


def registry_counter(entry) -> tuple[TokenCounter | None, str]:
    """A tokenizer registry entry's tokenizer (`lib.name.tokenization.TokenizerEntry`), loaded once per process
    (downloads into the machine's download cache, as `tokenization_counts` does; a hub entry fails at once where
    the hub is off and its files are not cached); (None, why) where it cannot be loaded here."""
    from sctc_assets.lib.name.tokenization import (TokenizerIntegrityError, TokenizerUnavailable, default_files_dir,
                                                   load_tokenizer)

    def load() -> TokenCounter | None:
        try:
            return TokenCounter(entry.key, load_tokenizer(entry, default_files_dir()))
        except (TokenizerUnavailable, TokenizerIntegrityError, OSError, ValueError) as exc:
            _UNAVAILABLE[entry.key] = str(exc)
            return None

    counter = _loaded(f"registry:{entry.key}", load)
    return counter, "" if counter is not None else _UNAVAILABLE.get(entry.key, "cannot be loaded")


def json_counter(path: str, name: str, render: Render | None = None) -> TokenCounter | None:
    """A local model's `tokenizer.json` at `path`, loaded with the `tokenizers` library (no transformers) once per
    file, named `name`, with `render` (the model's chat template) when there is one; None when the file cannot be
    read."""
    loaded = _loaded(f"tokenizer.json:{path}", lambda: _json_tokenizer(path))
    return None if loaded is None else TokenCounter(name, loaded.encode, render)


def _json_tokenizer(path: str) -> TokenCounter | None:
    from sctc_assets.lib.name.tokenization import json_tokenizer

    try:
        return TokenCounter(path, json_tokenizer(path))
    except Exception:  # the tokenizers library raises its own Exception for a file it cannot read
        return None


@dataclass
class EstimateRow:
    """One partition of one model: `calls` requests (the answers the partition gets), `cached` of them already
    answered, `to_ask` distinct requests to send (repeats of one request are asked once; 0 for a replay), with their
    estimated tokens and cost: `output_tokens` and `cost_usd` expected (`output_by` says from what), `max_cost_usd`
    with every answer as long as the ceiling allows."""

    benchmark: str
    model: str
    partition: str
    calls: int
    cached: int | None  # None: the backend replays published answers and uses no cache
    to_ask: int
    input_tokens: int = 0
    output_tokens: int | None = None
    output_ceiling: bool = False  # output_tokens is max_tokens × calls, not a measured mean or an expectation
    cost_usd: float | None = None
    tokens_by: str = ""
    note: str = ""
    output_by: str = ""  # "cached answers", "expected", "ceiling" (or "" when nothing is asked)
    max_output_tokens: int | None = None  # the ceiling: max_tokens × calls (None: the backend has none)
    max_cost_usd: float | None = None  # the cost with every answer at the ceiling (None: no ceiling or no price)
    batch_factor: float | None = None  # the model goes by batch, priced at this factor of its prices (None: it does not)


@dataclass
class Estimate:
    rows: list[EstimateRow] = field(default_factory=list)
    # Extra lines per benchmark (judges, power figures…), printed under its table.
    notes: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # Each benchmark's expected answer length (its spec's), printed under its table where a row used it.
    expected_answers: dict[str, ExpectedAnswer] = field(default_factory=dict)

    def add_note(self, benchmark: str, line: str) -> None:
        self.notes.setdefault(benchmark, []).append(line)


KeyedRequest = Callable[[GenerationRequest], GenerationRequest]


def cache_keys(identity: Mapping[str, Any], requests: Sequence[GenerationRequest],
               keyed: KeyedRequest | None = None) -> list[str]:
    """The keys `ModelBackend.generate` looks up for `requests`: `cache_key` of the backend's identity and of each
    request as `generate` sends it (`keyed`: e.g. with the per-trial seed the backend adds)."""
    if keyed is not None:
        requests = [keyed(request) for request in requests]
    return [cache_key(identity, request) for request in requests]


def _signature(request: GenerationRequest) -> tuple:
    messages = request.messages
    if len(messages) == 1:  # the common case, without building a tuple per message
        return messages[0].get("role"), messages[0].get("content"), request.trial
    return tuple([(message.get("role"), message.get("content")) for message in messages]), request.trial


class RequestSet:
    """One partition's requests with what the plan derives from them, computed once however many models (with the
    same settings) ask them: the distinct requests, characters per request, tokens per character per counter."""

    def __init__(self, requests: Sequence[GenerationRequest]):
        self.requests = list(requests)
        self._distinct: list[int] | None = None
        self._ratios: dict[str, float] = {}
        self._templates: dict[TokenCounter, float | None] = {}
        self._by_prompt: dict[tuple[str, Any], list[int]] | None = None
        self._size_lists: tuple[list[int], list[int]] | None = None
        self._signatures: list[tuple] | None = None

    def __len__(self) -> int:
        return len(self.requests)

    def distinct(self) -> list[int]:
        """The first index of each distinct (messages, trial): what `generate` asks when nothing is cached."""
        if self._distinct is None:
            seen: dict[tuple, int] = {}
            for index, signature in enumerate(self.signatures()):
                seen.setdefault(signature, index)
            self._distinct = list(seen.values())
        return self._distinct

    def signatures(self) -> list[tuple]:
        """What tells two requests of one backend apart in the cache, per request: their messages and trial. Built
        once: a plan of three models at paper scale asks for them about a million times."""
        if self._signatures is None:
            self._signatures = [_signature(request) for request in self.requests]
        return self._signatures

    def tokens_per_char(self, counter: TokenCounter) -> float:
        if counter.name not in self._ratios:
            step = max(1, len(self.requests) // SAMPLE_PROMPTS)
            texts = [message.get("content") or "" for request in self.requests[::step] for message in request.messages]
            self._ratios[counter.name] = counter.tokens_per_char(texts)
        return self._ratios[counter.name]

    def _sizes(self) -> tuple[list[int], list[int]]:
        """Characters and messages of each request."""
        if self._size_lists is None:
            self._size_lists = ([sum(len(message.get("content") or "") for message in request.messages)
                                 for request in self.requests], [len(request.messages) for request in self.requests])
        return self._size_lists

    def by_prompt(self) -> dict[tuple[str, Any], list[int]]:
        """(last user message, trial) → the indices of the requests that have them."""
        if self._by_prompt is None:
            self._by_prompt = {}
            for index, request in enumerate(self.requests):
                self._by_prompt.setdefault((request.prompt, request.trial), []).append(index)
        return self._by_prompt

    def template_tokens(self, counter: TokenCounter) -> float | None:
        if counter not in self._templates:
            step = max(1, len(self.requests) // SAMPLE_TEMPLATES)
            try:
                self._templates[counter] = counter.template_tokens([request.messages
                                                                    for request in self.requests[::step]])
            except Exception:  # a template that fails on these messages: the chat format's flat rate instead
                self._templates[counter] = None
        return self._templates[counter]

    def input_tokens(self, indices: Sequence[int], counter: TokenCounter) -> int:
        chars, messages = self._sizes()
        template = self.template_tokens(counter)
        chat = MESSAGE_OVERHEAD * sum(messages[index] for index in indices) if template is None \
            else template * len(indices)
        return round(sum(chars[index] for index in indices) * self.tokens_per_char(counter) + chat)


def _candidates(requests: RequestSet, stored: Sequence[str]) -> list[int] | None:
    """The requests that can be among `stored` (the cache's request identities of this model): those with the
    messages' last user text and trial of a stored one. None when a stored identity lacks either field."""
    found: set[int] = set()
    index = requests.by_prompt()
    for text in stored:
        identity = json.loads(text)
        messages, trial = identity.get("messages"), identity.get("trial", _MISSING)
        if not isinstance(messages, list) or trial is _MISSING:
            return None
        users = [message.get("content", "") for message in messages if message.get("role") == "user"]
        found.update(index.get((users[-1] if users else "", trial), ()))
    return sorted(found)


def cached_answers(identity: Mapping[str, Any], requests: RequestSet, cache: Cache,
                   stored_count: int, keyed: KeyedRequest | None = None) -> dict[int, GenerationResult]:
    """Index → cached answer, for every request `generate` would find in the cache.

    Keys are computed as `generate` computes them. When the cache holds few answers of this model compared with
    the requests, only the requests that share a stored answer's prompt and trial are keyed (a key covers the
    messages and trial, so no other request can match); otherwise every request is."""
    candidates = None
    if stored_count * 4 < len(requests):
        candidates = _candidates(requests, cache.stored_requests(str(identity.get("model", ""))))
    chosen = candidates if candidates is not None else list(range(len(requests)))
    keys = cache_keys(identity, [requests.requests[index] for index in chosen], keyed)
    hits = cache.get_many(list(dict.fromkeys(keys)))
    return {index: hits[key] for index, key in zip(chosen, keys) if key in hits}


class SharedRequests:
    """Builds each (settings, partition) once: models with the same settings ask the same requests. `build(*args)`
    returns the selected prompt rows and their requests; `shared(key, *args)` returns them as a `RequestSet`."""

    def __init__(self, build: Callable[..., tuple[pd.DataFrame, list[GenerationRequest]]]):
        self._build = build
        self._built: dict[Any, tuple[pd.DataFrame, RequestSet]] = {}

    def __call__(self, key: Any, *args: Any) -> tuple[pd.DataFrame, RequestSet]:
        if key not in self._built:
            selected, requests = self._build(*args)
            self._built[key] = (selected, RequestSet(requests))
        return self._built[key]


@dataclass
class PartitionDesign:
    """What one model answers in one partition: the prompt rows (as the response asset selects them), their
    requests (shared by the models with the same settings), and the model's run settings for the benchmark."""

    model: str
    partition: str
    selected: pd.DataFrame
    request_set: RequestSet
    settings: Any
    overrides: dict | None = None  # backend settings the benchmark replaces (they are part of the cache key)

    @property
    def requests(self) -> list[GenerationRequest]:
        return self.request_set.requests


@dataclass
class BenchmarkDesign:
    benchmark: str
    options: Mapping[str, Any]
    partitions: list[PartitionDesign] = field(default_factory=list)



def estimate_partition(benchmark: str, model: str, partition: str, requests: RequestSet, *,
                   identity: Mapping[str, Any] | None, cache: Cache | None, counter: TokenCounter,
                   max_output_tokens: int | None, pricing: tuple[float | None, float | None],
                   stored_count: int = 0, asked_before: set | None = None,
                   keyed: KeyedRequest | None = None, expected: ExpectedAnswer | None = None,
                   batch_factor: float | None = None) -> EstimateRow:
    """Count one partition's requests against the cache and estimate the tokens and cost of the rest.

    `identity` None: a replay backend (nothing is asked). `stored_count`: the cache's answers of this backend's
    model (`ResponseCache.count`); 0 means no request can be cached, and no key is computed. `asked_before`: the
    signatures of the requests the same backend asks in earlier partitions of the run (updated here): a request
    asked there is cached by the time this partition runs (a review whose shuffled parts keep the plain order).
    `expected`: the benchmark's expected answer length, used when no answer of the model is cached. `batch_factor`:
    the model goes by batch, and `pricing` is already its batch price (this factor × the registry's prices)."""
    if identity is None:
        return EstimateRow(benchmark, model, partition, len(requests), None, 0, note="replays published answers")
    outputs: list[int] = []
    pending = requests.distinct()
    cached = 0
    if cache is not None and stored_count and len(requests):
        hits = cached_answers(identity, requests, cache, stored_count, keyed)
        cached = len(hits)
        # Distinct requests share a key with their repeats, so a request is pending unless its first copy is cached.
        pending = [index for index in pending if index not in hits]
        outputs = [result.output_tokens for result in hits.values() if result.output_tokens]
    earlier = 0
    if asked_before is not None:
        signatures = requests.signatures()
        fresh = [index for index in pending if signatures[index] not in asked_before]
        earlier, pending = len(pending) - len(fresh), fresh
        asked_before.update([signatures[index] for index in pending])
    input_tokens = requests.input_tokens(pending, counter)
    bound = None if max_output_tokens is None else len(pending) * max_output_tokens
    if outputs:
        output_tokens, output_by = round(len(pending) * sum(outputs) / len(outputs)), "cached answers"
    elif expected is not None:
        per_answer = expected.tokens if max_output_tokens is None else min(expected.tokens, max_output_tokens)
        output_tokens, output_by = len(pending) * per_answer, "expected"
    else:
        output_tokens, output_by = bound, "ceiling" if bound is not None else ""
    price_in, price_out = pricing
    cost = _priced(input_tokens, output_tokens, price_in, price_out)
    notes = [f"{earlier:,} asked in an earlier partition" if earlier else "",
             f"by batch, × {batch_factor:g} the price" if batch_factor is not None else ""]
    return EstimateRow(benchmark, model, partition, len(requests), cached, len(pending), input_tokens, output_tokens,
                       output_by == "ceiling", cost, counter.name, "; ".join(note for note in notes if note),
                       output_by if pending else "", bound, _priced(input_tokens, bound, price_in, price_out),
                       batch_factor)


def _priced(input_tokens: int, output_tokens: int | None, price_in: float | None,
            price_out: float | None) -> float | None:
    """Tokens × prices in USD; None without a price, or when the output is unknown at a price (no honest figure)."""
    if price_in is None and price_out is None:
        return None
    if output_tokens is None and price_out:
        return None
    return (input_tokens * (price_in or 0.0) + (output_tokens or 0) * (price_out or 0.0)) / 1e6


def _number(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _cost(row: EstimateRow) -> str:
    if row.cost_usd is None:
        return "–" if row.to_ask == 0 or row.cached is None else "no price"
    return f"{'≤ ' if row.output_ceiling else ''}{row.cost_usd:,.4f}"


def _output(expected: int | None, bound: int | None, ceiling: bool) -> str:
    """Expected output tokens, with the ceiling beside them where that is another number."""
    if ceiling:
        return f"≤ {_number(expected)}"
    if bound is None or bound == expected:
        return _number(expected)
    return f"{_number(expected)} (≤ {bound:,})"


def _bound(row: EstimateRow) -> str:
    if row.to_ask == 0:
        return "0" if row.cost_usd is not None else "–"
    return "–" if row.max_cost_usd is None else f"{row.max_cost_usd:,.4f}"


def render(plan: Estimate) -> str:
    """The plan as one table per benchmark, its notes under it, and the totals per model."""
    from tabulate import tabulate

    lines: list[str] = []
    for benchmark in dict.fromkeys([row.benchmark for row in plan.rows] + list(plan.notes)):
        rows = [row for row in plan.rows if row.benchmark == benchmark]
        lines.append(f"{benchmark}:")
        if rows:
            table = [{"model": row.model, "partition": row.partition, "answers": _number(row.calls),
                      "cached": _number(row.cached), "calls": _number(row.to_ask),
                      "input tokens": _number(row.input_tokens if row.to_ask else 0),
                      "output tokens": _output(row.output_tokens, row.max_output_tokens, row.output_ceiling)
                      if row.to_ask else "0",
                      "cost USD": _cost(row), "at most USD": _bound(row), "note": row.note} for row in rows]
            lines.append(tabulate(table, headers="keys", tablefmt="github", disable_numparse=True))
        expected = plan.expected_answers.get(benchmark)
        if expected is not None and any(row.output_by == "expected" for row in rows):
            lines.append(f"  output tokens expected: {expected.what}, about {expected.tokens} per answer (before any "
                         "answer of the model is cached; max_tokens bounds it)")
        lines += [f"  {note}" for note in plan.notes.get(benchmark, [])]
        lines.append("")
    totals: dict[str, dict[str, Any]] = {}
    for row in plan.rows:
        total = totals.setdefault(row.model, {"calls": 0, "cached": 0, "to_ask": 0, "input": 0, "output": 0,
                                              "cost": 0.0, "priced": False, "ceiling": False, "tokens_by": set(),
                                              "bound": 0.0, "unbounded": False, "max_output": 0})
        total["calls"] += row.calls
        total["cached"] += row.cached or 0
        total["to_ask"] += row.to_ask
        total["input"] += row.input_tokens if row.to_ask else 0
        total["output"] += row.output_tokens or 0
        total["max_output"] = None if total["max_output"] is None or (row.to_ask and row.max_output_tokens is None) \
            else total["max_output"] + (row.max_output_tokens or 0)
        total["ceiling"] |= row.output_ceiling and row.to_ask > 0
        if row.cost_usd is not None:
            total["cost"] += row.cost_usd
            total["priced"] = True
            if row.to_ask:
                total["bound"] += row.max_cost_usd or 0.0
                total["unbounded"] |= row.max_cost_usd is None
        if row.tokens_by and row.to_ask:
            total["tokens_by"].add(row.tokens_by)
    if totals:
        lines.append("total per model:")
        lines.append(tabulate([{
            "model": model, "answers": f"{t['calls']:,}", "cached": f"{t['cached']:,}", "calls": f"{t['to_ask']:,}",
            "input tokens": f"{t['input']:,}",
            "output tokens": _output(t["output"], t["max_output"],
                                     t["ceiling"] and t["max_output"] in (None, t["output"])),
            "cost USD": f"{'≤ ' if t['ceiling'] else ''}{t['cost']:,.4f}" if t["priced"] else "–",
            "at most USD": "–" if not t["priced"] or t["unbounded"] else f"{t['bound']:,.4f}",
            "input tokens counted by": "; ".join(sorted(t["tokens_by"])) or "–"}
            for model, t in totals.items()], headers="keys", tablefmt="github", disable_numparse=True))
        lines.append("")
    batched = {row.model: row.batch_factor for row in plan.rows if row.batch_factor is not None}
    lines += [f"{model} goes by batch: its calls are sent as provider batches and priced at {factor:g} × its registry "
              "prices (`batch_price_factor`)" for model, factor in batched.items()]
    lines.append("Estimates: answers are what each partition gets, calls the paid requests that get them (cached "
                 "answers and replays of published answers cost none; repeats of one request are asked once). Input "
                 "tokens by the model's tokenizer where known offline, else 1 token per CJK character and 1 per 4 "
                 "other characters, plus the chat format; output tokens are the mean of the model's cached answers "
                 "to these prompts, else the benchmark's expected answer length, else the max_tokens ceiling (≤). "
                 "`cost USD` is the expected cost; `at most USD` has every answer as long as max_tokens allows.")
    lines += [f"warning: {warning}" for warning in plan.warnings]
    return "\n".join(lines)
