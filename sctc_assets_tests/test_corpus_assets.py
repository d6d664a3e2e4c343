"""Corpus counts through Dagster: shard partitions from the registry, a local-file corpus and a `datasets`
streaming corpus through the same asset, a backfill interrupted mid-way and resumed, and the totals."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.benchmarks import CORPUS
from sctc_assets.definitions import defs, every_asset, shared_resources
from sctc_assets.lib.corpus.corpus_registry import CorpusRegistryError
from sctc_assets.lib.corpus.tables import PAPER_CORPORA
from sctc_assets.lib.name.names import NAME_COLUMNS, NAMES_FILE, parse_names
from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
from sctc_assets.lib.term.terms import parse_terms
from sctc_assets.assets.partitions import CORPUS_SHARDS_PARTITION_NAME

REPO = Path(__file__).resolve().parents[1]


def _texts(source) -> list[str]:
    """Records built from the real term and name lists: several forms per record, repeated, in both scripts."""
    terms = parse_terms(source.read_csv(TERMS_FILE, TERM_COLUMNS))
    names = parse_names(source.read_csv(NAMES_FILE, NAME_COLUMNS))
    texts = []
    for number in range(90):
        term = terms.iloc[number % len(terms)]
        name = names.iloc[(7 * number) % len(names)]
        pieces = [f"第{number}条", term["mainland_alternatives"][0] * (1 + number % 3)]
        if number % 2:
            pieces.append(term["taiwan_alternatives"][-1])
        if number % 5 == 0:
            pieces.append(name["name"])
        texts.append("，".join(pieces))
    return texts


def _write_jsonl(path: Path, texts: list[str]) -> None:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as handle:
        for text in texts:
            handle.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")


@pytest.fixture
def corpora(isolated_data_dir, extracted_upstream, sctc_source, tmp_path, monkeypatch):
    texts = _texts(sctc_source)
    local = tmp_path / "local"
    local.mkdir()
    _write_jsonl(local / "a.jsonl", texts[:50])
    _write_jsonl(local / "b.jsonl.gz", texts[50:70])   # unit 0 → shard 0
    _write_jsonl(local / "c.jsonl.gz", texts[70:])     # unit 1 → shard 1
    streamed = tmp_path / "streamed"
    streamed.mkdir()
    for part in range(2):
        _write_jsonl(streamed / f"part{part}.jsonl", texts[part::2])
    registry = tmp_path / "corpora.yaml"
    registry.write_text(
        "corpora:\n"
        "  local: {script: mixed, shards: 3, files: ['local/*.jsonl', 'local/*.jsonl.gz']}\n"
        "  streamed: {script: mixed, shards: 2, hub: {path: json, data_files: ['streamed/part*.jsonl']}}\n",
        encoding="utf-8")
    monkeypatch.setenv("SCTC_CORPORA", str(registry))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    return texts, local, registry


def _naive(forms: pd.DataFrame, texts: list[str]) -> list[int]:
    return [sum(any(pattern in text for pattern in alternatives) for text in texts)
            for alternatives in forms["alternatives"]]


def _count_shards(instance, keys) -> dict[str, bool]:
    job = defs.resolve_job_def("corpus_count_shards")
    return {key: job.execute_in_process(partition_key=key, instance=instance, resources=shared_resources(),
                                        raise_on_error=False).success for key in keys}


def _materialize(instance, names) -> None:
    """The corpus plan's stages, as `sctc run --benchmarks corpus` runs them, but without model partitions."""
    result = dg.materialize(every_asset(defs), selection=list(names), instance=instance,
                            resources=shared_resources())
    assert result.success


def _tables(instance) -> None:
    _materialize(instance, CORPUS.inputs)
    _materialize(instance, CORPUS.cross_model)


def _read(name: str) -> pd.DataFrame:
    return pd.read_parquet(shared_resources()["io_manager"].path_for(dg.AssetKey(name)))


def test_interrupted_backfill_resumes_without_losing_or_double_counting(corpora):
    texts, local, _ = corpora
    intact = (local / "c.jsonl.gz").read_bytes()
    (local / "c.jsonl.gz").write_bytes(intact[: len(intact) // 2])  # shard 1 of `local` dies half-way
    with dg.DagsterInstance.ephemeral() as instance:
        _tables(instance)
        keys = sorted(instance.get_dynamic_partitions(CORPUS_SHARDS_PARTITION_NAME))
        assert keys == ["local.000-of-003", "local.001-of-003", "local.002-of-003",
                        "streamed.000-of-002", "streamed.001-of-002"]

        results = _count_shards(instance, keys)
        assert [key for key, ok in results.items() if not ok] == ["local.001-of-003"]
        _tables(instance)
        counts = _read("corpus_term_counts")
        project = counts[counts.count_source == "project"].drop_duplicates("corpus").set_index("corpus")
        assert project.loc["local", ["shards_counted", "complete"]].tolist() == [2, False]
        assert project.loc["streamed", ["shards_counted", "complete", "records_scanned"]].tolist() == [2, True, 90]
        tables = _read("corpus_term_frequency_tables")
        assert set(tables.loc[tables.count_source == "project", "corpus"]) == {"streamed"}  # complete corpora only

        (local / "c.jsonl.gz").write_bytes(intact)
        assert _count_shards(instance, ["local.001-of-003", "local.000-of-003"]) == {
            "local.001-of-003": True, "local.000-of-003": True}  # the failed shard, and one counted twice
        _tables(instance)

    forms = _read("corpus_patterns")
    expected = _naive(forms, texts)
    shard_files = sorted(Path(shared_resources()["io_manager"].path_for(dg.AssetKey("corpus_counts"))).parent
                         .joinpath("corpus_counts").glob("*.parquet"))
    shards = pd.concat(pd.read_parquet(path) for path in shard_files)
    for corpus in ("local", "streamed"):
        summed = shards[shards.corpus == corpus].groupby("form_id")["records_containing"].sum()
        assert summed.tolist() == expected
        assert shards[shards.corpus == corpus].drop_duplicates("shard")["records_scanned"].sum() == len(texts)

    counts = _read("corpus_term_counts")
    project = counts[counts.count_source == "project"]
    assert set(project.corpus) == {"local", "streamed"} and project.complete.all()
    mainland = forms[(forms.kind == "term") & (forms.region == "mainland") & forms.as_written]
    by_term = dict(zip(mainland.item_id, (expected[i] for i in mainland.form_id)))
    local_counts = project[project.corpus == "local"].set_index("term_id")
    assert local_counts["mainland"].to_dict() == by_term
    assert (local_counts["mainland_any"] >= local_counts["mainland"]).all()
    assert set(counts.loc[counts.count_source == "upstream", "corpus"]) == set(PAPER_CORPORA)

    names = _read("corpus_name_counts")
    assert {"name", "region", "corpus", "records_containing", "count_source", "complete"} <= set(names.columns)
    written = forms[(forms.kind == "name") & forms.as_written]
    ours = names[(names.count_source == "project") & (names.corpus == "streamed")].set_index("name")
    assert ours["records_containing"].to_dict() == dict(zip(written.item, (expected[i] for i in written.form_id)))
    assert len(names[names.count_source == "upstream"]) == 352

    tables = _read("corpus_term_frequency_tables")
    assert set(tables.loc[tables.count_source == "project", "corpus"]) == {"local", "streamed"}


def test_a_new_shard_layout_replaces_the_old_one(corpora):
    _, _, registry = corpora
    with dg.DagsterInstance.ephemeral() as instance:
        _tables(instance)
        assert all(_count_shards(instance, ["streamed.000-of-002", "streamed.001-of-002"]).values())
        registry.write_text(registry.read_text(encoding="utf-8").replace("shards: 2", "shards: 3"), encoding="utf-8")
        _tables(instance)
        coverage = _read("corpus_term_counts")
        assert "streamed" not in set(coverage.loc[coverage.count_source == "project", "corpus"])
        job = defs.resolve_job_def("corpus_count_shards")
        with pytest.raises(CorpusRegistryError, match="now has 3 shards; partition streamed.001-of-002"):
            job.execute_in_process(partition_key="streamed.001-of-002", instance=instance,
                                   resources=shared_resources())
        assert "streamed.002-of-003" in instance.get_dynamic_partitions(CORPUS_SHARDS_PARTITION_NAME)


def test_a_single_uncounted_shard_leaves_the_upstream_counts(corpora):
    _, _, registry = corpora
    registry.write_text("corpora:\n  local: {script: mixed, files: ['local/*.jsonl']}\n", encoding="utf-8")
    with dg.DagsterInstance.ephemeral() as instance:
        _tables(instance)
        assert instance.get_dynamic_partitions(CORPUS_SHARDS_PARTITION_NAME) == ["local.000-of-001"]
    counts = _read("corpus_term_counts")
    assert set(counts.count_source) == {"upstream"} and set(counts.corpus) == set(PAPER_CORPORA)
    assert set(_read("corpus_name_counts").count_source) == {"upstream"}


def test_local_deployment_config_spreads_runs_over_processes(tmp_path, monkeypatch):
    shutil.copy(REPO / "sctc_assets" / "deploy" / "local" / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with dg.DagsterInstance.get() as instance:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        # Dagster 1.13 takes the queue's limits from `concurrency.runs` (with pools, not from run_coordinator.config)
        assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 2
        # the model-calling assets' pools (sctc_generation, sctc_judge) get the default limit
        assert instance.event_log_storage.get_pool_config().default_pool_limit == 4


def test_sctc_run_counts_the_chosen_corpora(corpora, tmp_path, capsys):
    from sctc_assets.cli import main

    texts, _, _ = corpora
    out = tmp_path / "out"
    assert main(["run", "--benchmarks", "corpus", "--corpora", "local", "--out", str(out)]) == 0
    totals = pd.read_parquet(out / "corpus_term_counts.parquet")
    local = totals[(totals["count_source"] == "project") & (totals["corpus"] == "local")]
    assert len(local) == 110 and local["complete"].all()
    assert set(totals.loc[totals["count_source"] == "project", "corpus"]) == {"local"}  # `streamed` was not asked for
    shards = pd.concat(pd.read_parquet(path) for path in
                       Path(shared_resources()["io_manager"]._root(), "corpus_counts").rglob("*.parquet"))
    assert sorted(shards["shard"].unique()) == ["local.000-of-003", "local.001-of-003", "local.002-of-003"]
    assert shards.drop_duplicates("shard")["records_scanned"].sum() == len(texts)
    assert "corpus: models (none: model-independent assets only)" in capsys.readouterr().out
    assert main(["run", "--benchmarks", "corpus", "--corpora", "nowhere"]) == 2
    assert "no corpus 'nowhere'" in capsys.readouterr().err
