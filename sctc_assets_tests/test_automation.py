"""Opt-in declarative automation over successive ticks: materializing one model's answers requests that model's
judgements and labels, its per-model tables and the cross-model tables, and nothing of the other model; the answers
themselves (model calls) are never requested."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from sctc_assets.benchmarks import TERM
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
from sctc_assets_tests.fakes import count_calls, write_two_term_fakes
from sctc_assets.definitions import every_asset

# Every cross-model table of the term benchmark, unpartitioned (the corpus-backed one is in the corpus plan).
CROSS_MODEL = {name: {None} for name in TERM.cross_model}
# The sensor evaluates every asset; the test evaluates the term benchmark and the corpus tables that read it (the
# other benchmarks share no asset with them, and evaluating them would only cost time).
EVALUATED = dg.AssetSelection.groups("term", "corpus")
EVERY_ASSET = every_asset(defs)


@pytest.fixture
def registry(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch) -> Path:
    path, calls = write_two_term_fakes(tmp_path)
    monkeypatch.setenv("SCTC_MODELS", str(path))
    return calls


def _materialize(instance, names, partition_key=None) -> None:
    result = dg.materialize(EVERY_ASSET, selection=list(names), partition_key=partition_key, instance=instance,
                            resources=shared_resources())
    assert result.success


def _requested(result) -> dict[str, set]:
    graph = defs.resolve_asset_graph()
    requested = {key.to_user_string(): result.get_requested_partitions(key)
                 for key in EVALUATED.resolve(graph)}
    return {name: partitions for name, partitions in requested.items() if partitions}


def _launch(instance, requested: dict[str, set]) -> None:
    """What the daemon's runs do with one tick's requests: each partition's assets together, stage by stage."""
    for stage in (TERM.per_model_lang, TERM.per_model, TERM.cross_model):
        by_partition: dict = {}
        for name in stage:
            for partition in requested.get(name, ()):
                by_partition.setdefault(partition, []).append(name)
        for partition, names in by_partition.items():
            _materialize(instance, names, partition)


def _settle(instance, cursor) -> tuple[dict[str, set], object, int]:
    """Tick, launch what was requested, and tick again until a tick requests nothing (a partition of another
    partitioning waits for the tick after its parents ran, as with the daemon). All requests, the cursor, ticks."""
    seen: dict[str, set] = {}
    for ticks in range(1, 8):
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor, asset_selection=EVALUATED)
        cursor = tick.cursor
        requested = _requested(tick)
        if not requested:
            return seen, cursor, ticks
        for name, partitions in requested.items():
            assert not seen.get(name, set()) & partitions, f"{name} requested twice"
            seen.setdefault(name, set()).update(partitions)
        _launch(instance, requested)
    raise AssertionError(f"automation did not settle: {seen}")


@pytest.mark.slow
def test_answers_of_one_model_bring_its_tables_and_the_cross_model_tables_up_to_date(registry):
    calls = registry
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, ["fake-a", "fake-b"])
        _materialize(instance, TERM.inputs)
        requested, cursor, _ = _settle(instance, None)
        assert requested == {}  # nothing has answers yet, and inputs are never automated

        for lang in ("zh_hans", "zh_hant"):
            _materialize(instance, ["term_responses"], dg.MultiPartitionKey({"model": "fake-a", "lang": lang}))
        answered = count_calls(calls)
        requested, cursor, ticks = _settle(instance, cursor)
        model_a = {"zh_hans|fake-a", "zh_hant|fake-a"}
        assert requested == {
            "term_judgements": model_a, "term_labels": model_a, "term_incorrect_type_judgements": model_a,
            "term_choice_rates": {"fake-a"}, "term_misalignment_by_term": {"fake-a"}, **CROSS_MODEL,
        }  # corpus_term_frequency_tables waits for the corpus counts it also reads
        assert ticks == 4  # model × lang, then per model, then cross-model, then nothing
        assert count_calls(calls) == answered  # automation asked no model

        # fake-b answers one language: its labels follow; its per-model tables wait for the other language. The one
        # cross-model table that reads the labels themselves (the judge against the published labels) follows them.
        _materialize(instance, ["term_responses"], dg.MultiPartitionKey({"model": "fake-b", "lang": "zh_hans"}))
        requested, cursor, _ = _settle(instance, cursor)
        assert requested == {"term_judgements": {"zh_hans|fake-b"}, "term_labels": {"zh_hans|fake-b"},
                             "term_incorrect_type_judgements": {"zh_hans|fake-b"},
                             "term_incorrect_types": {None}, "term_label_source_agreement": {None}}

        _materialize(instance, ["term_responses"], dg.MultiPartitionKey({"model": "fake-b", "lang": "zh_hant"}))
        requested, cursor, _ = _settle(instance, cursor)
        assert requested == {
            "term_judgements": {"zh_hant|fake-b"}, "term_labels": {"zh_hant|fake-b"},
            "term_incorrect_type_judgements": {"zh_hant|fake-b"}, "term_choice_rates": {"fake-b"}, "term_misalignment_by_term": {"fake-b"}, **CROSS_MODEL,
        }  # and nothing of fake-a
