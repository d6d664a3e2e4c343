"""Limits on new model calls: counted per budget scope in the response cache's ledger, checked before each call.

A scope is what shares one budget: `sctc run` gives all its partitions and processes one scope
(`$SCTC_BUDGET_SCOPE`); without one, each Dagster run (a UI backfill: each partition) or, outside Dagster, each
process counts on its own. Two kinds of limits apply at once: the run's (`max_calls`, `max_cost_usd` of
`ModelRegistryResource`, over every model of the scope) and a model's own (its registry entry's
`budget: {max_calls: N, max_cost_usd: X}`, over that model's calls in the scope).

A call counts when it starts, so processes cannot overdraw `max_calls` between them; answers served from the cache
are free. Cost is added when the answer arrives, from the token usage the API returned and the registry's prices;
where a price is set but the API returned no usage, the tokens are estimated (`estimate_tokens`) and the ledger
counts the call as estimated. Calls already in flight when a cost limit is reached still complete, so the spend
can exceed `max_cost_usd` by the cost of at most `concurrency` calls.
"""

from __future__ import annotations

import math
import os
import re
import socket
import time
from dataclasses import dataclass
from typing import Any, Mapping

from sctc_assets.lib.cache import LedgerTotals, Cache
from sctc_assets.lib.generation import (CACHEABLE_OUTCOMES, GenerationRequest, GenerationResult, strip_reasoning,
                                        think_blocks)

MAX_CALLS_ENV = "SCTC_MAX_CALLS"
MAX_COST_ENV = "SCTC_MAX_COST_USD"
SCOPE_ENV = "SCTC_BUDGET_SCOPE"
BUDGET_KEYS = ("max_calls", "max_cost_usd")
# Outside Dagster and without $SCTC_BUDGET_SCOPE, a process is its own scope; the start time keeps a later process
# that reuses the process id from inheriting its ledger.
PROCESS_SCOPE = f"process:{socket.gethostname()}:{os.getpid()}:{time.time():.0f}"

# Han characters, kana and Hangul are about one token each in the tokenizers of current models; other text about
# four characters per token. Used only where the API returned no usage.
_WIDE = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]")
_TOKENS_PER_MESSAGE = 4  # role markers and separators of a chat template


class BudgetError(ValueError):
    """A budget setting that is not a limit (negative, not a number, an unknown key)."""


@dataclass(frozen=True)
class BudgetLimits:
    max_calls: int | None = None
    max_cost_usd: float | None = None

    @property
    def limited(self) -> bool:
        return self.max_calls is not None or self.max_cost_usd is not None

    @classmethod
    def parse(cls, settings: Mapping[str, Any] | None, *, where: str) -> "BudgetLimits":
        """Limits from a mapping such as a registry entry's `budget:`; errors name `where` and the key."""
        if settings is None:
            return cls()
        if not isinstance(settings, Mapping):
            raise BudgetError(f"{where}: `budget` must be a mapping such as {{max_calls: 1000, max_cost_usd: 5}}, "
                              f"found {type(settings).__name__}")
        unknown = sorted(set(settings) - set(BUDGET_KEYS))
        if unknown:
            raise BudgetError(f"{where}: unknown budget key(s) {', '.join(map(repr, unknown))} "
                              f"(known: {', '.join(BUDGET_KEYS)})")
        return cls(max_calls=_limit(settings.get("max_calls"), f"{where}: budget.max_calls", integer=True),
                   max_cost_usd=_limit(settings.get("max_cost_usd"), f"{where}: budget.max_cost_usd", integer=False))

    @classmethod
    def from_environment(cls) -> "BudgetLimits":
        return cls(max_calls=_limit(os.environ.get(MAX_CALLS_ENV) or None, f"${MAX_CALLS_ENV}", integer=True),
                   max_cost_usd=_limit(os.environ.get(MAX_COST_ENV) or None, f"${MAX_COST_ENV}", integer=False))


def _limit(value: Any, where: str, *, integer: bool) -> Any:
    if value is None:
        return None
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0 or (integer and number != int(number)):
        kind = "a whole number of calls" if integer else "an amount in USD"
        raise BudgetError(f"{where}: expected {kind} ≥ 0, found {value!r}")
    return int(number) if integer else number


def estimate_tokens(text: str | None) -> int:
    """A rough token count: one per Han/kana/Hangul character, one per four other characters."""
    if not text:
        return 0
    wide = len(_WIDE.findall(text))
    return wide + math.ceil((len(text) - wide) / 4)


def estimate_request_tokens(request: GenerationRequest) -> int:
    return sum(estimate_tokens(message.get("content", "")) + _TOKENS_PER_MESSAGE for message in request.messages)


def estimate_output_tokens(result: GenerationResult) -> int:
    """The output tokens of an answer whose API reported none: its text and its reasoning, which is billed as
    output too (the reasoning tokens the API reported, else its text when it came apart from the answer; `<think>`
    blocks are in the text already)."""
    if result.reasoning_tokens is not None:
        return estimate_tokens(strip_reasoning(result.text)) + result.reasoning_tokens
    apart = result.reasoning if result.reasoning and think_blocks(result.text) is None else None
    return estimate_tokens(result.text) + estimate_tokens(apart)


def call_cost(request: GenerationRequest, result: GenerationResult,
              pricing: tuple[float | None, float | None], *, price_factor: float = 1.0) -> tuple[float, bool]:
    """USD one answered call cost, and whether its tokens had to be estimated (the API returned no usage).

    `price_factor`: the batch price over the synchronous one (`batch_price_factor`, 0.5 for the providers' batch
    APIs) for an answer that came through a provider batch (`result.batch_id`); 1 for a synchronous call."""
    price_in, price_out = pricing
    if price_in is None and price_out is None:
        return 0.0, False
    estimated = False
    input_tokens, output_tokens = result.input_tokens, result.output_tokens
    if input_tokens is None:
        input_tokens, estimated = estimate_request_tokens(request), True
    if output_tokens is None:
        output_tokens, estimated = estimate_output_tokens(result), True
    return (input_tokens * (price_in or 0.0) + output_tokens * (price_out or 0.0)) / 1e6 * price_factor, estimated


class Budget:
    """The limits one backend's calls draw on, counted in `ledger` (a response cache) under `scope`."""

    def __init__(self, ledger: Cache, *, scope: str, model: str, run: BudgetLimits, own: BudgetLimits,
                 pricing: tuple[float | None, float | None] = (None, None), where: str = ""):
        self.ledger, self.scope, self.model = ledger, scope, model
        self.run, self.own, self.pricing = run, own, pricing
        self.where = where or f"model {model!r}"

    def allowance(self, scope_totals: LedgerTotals, model_totals: LedgerTotals) -> int:
        """How many more calls the limits allow now."""
        allowed = math.inf
        for limits, totals in ((self.run, scope_totals), (self.own, model_totals)):
            if limits.max_cost_usd is not None and totals.cost_usd >= limits.max_cost_usd:
                return 0
            if limits.max_calls is not None:
                allowed = min(allowed, limits.max_calls - totals.calls)
        return int(allowed) if allowed != math.inf else 1 << 30

    def reserve(self, wanted: int) -> int:
        """Count up to `wanted` calls about to start; returns how many may start."""
        return self.ledger.reserve_calls(self.scope, self.model, wanted, self.allowance)

    def refund(self, calls: int) -> None:
        self.ledger.refund_calls(self.scope, self.model, calls)

    def record(self, request: GenerationRequest, result: GenerationResult, *, price_factor: float = 1.0) -> float:
        """Add an answered call's cost (nothing when the backend has no prices, or for an error): a truncated
        answer is paid for too, its reasoning tokens most of all. `price_factor`: the batch price factor for an
        answer that came through a provider batch. Returns the cost added."""
        if result.outcome not in CACHEABLE_OUTCOMES:
            return 0.0
        cost, estimated = call_cost(request, result, self.pricing, price_factor=price_factor)
        if cost or estimated:
            self.ledger.record_cost(self.scope, self.model, cost, estimated=estimated)
        return cost

    def exhausted(self) -> str | None:
        """Why no further call may start, or None."""
        totals = self.ledger.ledger(self.scope)
        scope_totals = LedgerTotals(sum(t.calls for t in totals.values()), sum(t.cost_usd for t in totals.values()),
                                    sum(t.estimated_calls for t in totals.values()))
        model_totals = totals.get(self.model, LedgerTotals())
        checks = ((self.run, scope_totals, f"the run's budget (scope {self.scope!r})"),
                  (self.own, model_totals, f"the registry budget of {self.where}"))
        for limits, spent, whose in checks:
            if limits.max_calls is not None and spent.calls >= limits.max_calls:
                return f"{whose} is spent: {spent.calls} new calls of max_calls {limits.max_calls}"
            if limits.max_cost_usd is not None and spent.cost_usd >= limits.max_cost_usd:
                note = f", {spent.estimated_calls} of them estimated (no usage returned)" if spent.estimated_calls else ""
                return (f"{whose} is spent: ${spent.cost_usd:.4f} of max_cost_usd ${limits.max_cost_usd:g}"
                        f"{note}")
        return None

    def notes(self) -> list[str]:
        """What a user should know about how this budget counts this model."""
        notes = []
        priced = any(price is not None for price in self.pricing)
        if (self.run.max_cost_usd is not None or self.own.max_cost_usd is not None) and not priced:
            notes.append(f"{self.where} has no prices (price_input_per_mtok/price_output_per_mtok): the cost limit "
                         "does not limit its calls")
        estimated = self.ledger.ledger(self.scope).get(self.model, LedgerTotals()).estimated_calls
        if estimated and priced:
            notes.append(f"{estimated} calls returned no token usage; their cost in the budget is estimated "
                         "from the text (1 token per Han character, 4 other characters per token)")
        return notes

