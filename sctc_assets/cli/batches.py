"""`sctc batches`: the provider batches recorded in the response cache (open ones, and those that ended in the last
day; `--all`: every one), as a table or `--json`, and `--cancel ID` to cancel one at its provider.

A batch is recorded before it is submitted (`lib/batches.py`, the cache's `batches` table), so this lists what every
process and host sharing the cache sent, whatever became of the process. Cancelling goes through the backend of the
registry entry that submitted the batch (its `batch_client().cancel`); the lines the provider had not answered are
asked again by the next run of that model (as the lines of an expired batch are), so cancelling stops the batch,
not the audit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any, Sequence

from tabulate import tabulate

from sctc_assets.backends.base import BackendUnavailable
from sctc_assets.lib.batches import ABANDONED, COLLECTED, BatchApiError, BatchRecord
from sctc_assets.lib.cache import Cache, CacheUnavailable, cache_exists, open_cache
from sctc_assets.lib.model_registry import RegistryError
from sctc_assets.resources.model_registry import ModelRegistryResource

RECENT_S = 24 * 3600  # without --all: open batches, and those updated in the last day


def is_open(record: BatchRecord) -> bool:
    """Not yet collected (or abandoned): its lines are claimed by the batch, and a run (or the sensor) collects it."""
    return record.state not in (COLLECTED, ABANDONED)


def age(seconds: float) -> str:
    """`seconds` in the largest unit that keeps it short: 45s, 12m, 5h, 3d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{max(seconds, 0):.0f}s"


def _counts(record: BatchRecord) -> str:
    counts = ", ".join(f"{name} {value:,}" for name, value in record.counts.items() if value)
    return f"{counts or '–'} (stored {record.stored:,}/{record.size:,})"


def _row(record: BatchRecord, now: float) -> dict[str, str]:
    return {"batch": record.local_id, "model": record.registry_key or record.model, "provider": record.provider,
            "provider id": record.provider_id or "(not confirmed)", "state": record.state,
            "lines": _counts(record), "age": age(now - record.created_at),
            "cost USD": "–" if record.estimated_cost_usd is None else
            f"{'≤ ' if is_open(record) else ''}{record.estimated_cost_usd:,.4f}",
            "partitions waiting": ", ".join(record.partitions) or "–"}


def shown(records: Sequence[BatchRecord], *, every: bool, now: float) -> list[BatchRecord]:
    """The batches `sctc batches` lists: every one with `every`, else the open ones and those updated lately."""
    return [record for record in records
            if every or is_open(record) or now - (record.updated_at or record.created_at) <= RECENT_S]


def find(cache: Cache, batch_id: str) -> BatchRecord | None:
    """The recorded batch whose local id (`sctc-…`) or provider id is `batch_id`."""
    record = cache.get_batch(batch_id)
    if record is not None:
        return record
    return next((record for record in cache.batches() if record.provider_id == batch_id), None)


def cancel(cache: Cache, batch_id: str) -> int:
    """Cancel a batch at its provider, through the registry entry that submitted it, and record what the provider
    then says of it. One line, and exit 2, when it cannot be (unknown id, ended, not confirmed, no entry)."""
    record = find(cache, batch_id)
    if record is None:
        return _error(f"--cancel: no recorded batch has the id {batch_id!r} (`sctc batches --all` lists them)")
    if not is_open(record) or record.ended:
        return _error(f"--cancel: batch {record.local_id} has ended ({record.state}): nothing to cancel")
    if record.provider_id is None:
        return _error(f"--cancel: batch {record.local_id} is not confirmed by {record.provider} yet (the next run "
                      "of its model resolves it): nothing to cancel")
    if record.registry_key is None:
        return _error(f"--cancel: batch {record.local_id} does not record the registry entry that sent it: cancel "
                      f"{record.provider_id} in {record.provider}'s console")
    try:
        backend = ModelRegistryResource().backend(record.registry_key)
        client = backend.batch_client()
        if client.provider != record.provider:
            return _error(f"--cancel: the registry entry {record.registry_key!r} now uses {client.provider}, not "
                          f"{record.provider}, which batch {record.local_id} went to")
        client.cancel(record.provider_id)
        status = client.status(record.provider_id)
    except (RegistryError, BackendUnavailable, BatchApiError) as exc:
        return _error(f"--cancel: {exc}")
    cache.update_batch(record.local_id, state=status.state, ended=status.ended, counts=dict(status.counts))
    print(f"cancel requested: {record.local_id} ({record.provider} {record.provider_id}) is {status.state}; the "
          "next run of its model collects what it answered and asks the rest again")
    return 0


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _listed(records: Sequence[BatchRecord], *, every: bool, as_json: bool) -> str:
    now = time.time()
    records = shown(records, every=every, now=now)
    if as_json:
        return json.dumps([{**describe(record), "age_s": round(now - record.created_at, 1)} for record in records],
                          indent=2)
    if not records:
        return "no open batches" + ("" if every else " (and none in the last day; --all lists every one)")
    opened = sum(map(is_open, records))
    return (tabulate([_row(record, now) for record in records], headers="keys", tablefmt="github")
            + f"\n{opened} open, {len(records) - opened} collected or abandoned"
            + ("" if every else " (in the last day; --all lists every one)"))


def main(args: argparse.Namespace) -> int:
    if not cache_exists():  # nothing was ever recorded, and nothing is created here
        if args.cancel:
            return _error(f"--cancel: no recorded batch has the id {args.cancel!r} (there is no response cache yet)")
        print("[]" if args.json else "no batches: the response cache does not exist yet")
        return 0
    try:
        cache = open_cache()
    except CacheUnavailable as exc:
        return _error(str(exc))
    try:
        if args.cancel:
            return cancel(cache, args.cancel)
        print(_listed(cache.batches(), every=args.all, as_json=args.json))
        return 0
    finally:
        cache.close()


def describe(record: BatchRecord) -> dict[str, Any]:
    """One batch as `--json` writes it (without the age)."""
    return {**dataclasses.asdict(record), "open": is_open(record)}
