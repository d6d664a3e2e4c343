"""The Parquet IO manager's missing inputs: skipped when read across partitions, errors where a run needs them."""

from __future__ import annotations

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.resources.io_manager import ParquetIOManager

SHARDS = dg.StaticPartitionsDefinition(["only"])


@dg.asset(partitions_def=SHARDS)
def shard_rows() -> pd.DataFrame:
    return pd.DataFrame({"n": [1]})


@dg.asset
def all_rows(shard_rows: pd.DataFrame) -> pd.DataFrame:
    return shard_rows.assign(rows=len(shard_rows))


@dg.asset(partitions_def=SHARDS)
def rows_per_shard(shard_rows: pd.DataFrame) -> pd.DataFrame:
    return shard_rows


@dg.asset
def plain() -> pd.DataFrame:
    return pd.DataFrame({"n": [1]})


@dg.asset
def after_plain(plain: pd.DataFrame) -> pd.DataFrame:
    return plain


ASSETS = [shard_rows, all_rows, rows_per_shard, plain, after_plain]


def _run(tmp_path, selection, **kwargs):
    return dg.materialize(ASSETS, selection=selection, resources={"io_manager": ParquetIOManager(
        base_dir=str(tmp_path))}, raise_on_error=False, **kwargs)


def test_the_one_partition_of_an_input_missing_is_skipped_like_several(tmp_path):
    with dg.DagsterInstance.ephemeral() as instance:
        result = _run(tmp_path, ["all_rows"], instance=instance)
        assert result.success
        messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert pd.read_parquet(tmp_path / "all_rows.parquet").empty
    assert "shard_rows: skipping 1 partition(s) never materialized: only" in messages
    assert _run(tmp_path, ["shard_rows"], partition_key="only").success
    assert _run(tmp_path, ["all_rows"]).success
    assert pd.read_parquet(tmp_path / "all_rows.parquet")["rows"].tolist() == [1]


@pytest.mark.parametrize(("selection", "partition_key", "message"), [
    (["rows_per_shard"], "only", "shard_rows partition only has not been materialized yet"),
    (["after_plain"], None, "plain has not been materialized yet"),
])
def test_an_input_a_run_cannot_do_without_is_still_an_error(tmp_path, selection, partition_key, message):
    result = _run(tmp_path, selection, partition_key=partition_key)
    assert not result.success
    failure = next(event for event in result.all_events if event.is_step_failure)
    assert message in str(failure.step_failure_data.error)


def test_a_run_reads_each_unchanged_file_once_and_no_asset_changes_another_s_input(tmp_path, monkeypatch):
    import sctc_assets.resources.io_manager as io

    if not io._COPY_ON_WRITE:
        pytest.skip("the memo is kept only where pandas copies on write (pandas 3)")
    path = tmp_path / "table.parquet"
    pd.DataFrame({"model": ["a", "b"], "n": [1, 2]}).to_parquet(path, index=False)
    reads = []
    monkeypatch.setattr(io, "read_table", lambda p: reads.append(p) or pd.read_parquet(p))
    io.forget_reads()

    first = io._read_stored(path)
    first["n"] = first["n"] * 10  # an asset changing its input in place
    first.loc[0, "model"] = "changed"
    second = io._read_stored(path)
    assert reads == [path]
    assert second["n"].tolist() == [1, 2] and second["model"].tolist() == ["a", "b"]

    pd.DataFrame({"model": ["c"], "n": [3]}).to_parquet(path, index=False)  # written again: read again
    assert io._read_stored(path)["model"].tolist() == ["c"] and len(reads) == 2
    io.forget_reads()
    io._read_stored(path)
    assert len(reads) == 3
    io.forget_reads()


def test_model_independent_tables_stay_read_across_runs_of_model_partitions(tmp_path, monkeypatch):
    """The runner keeps the unpartitioned tables read (`lasting`) after a run of model partitions, which writes
    none: the next model's run takes them from the memo. A run that could have written one drops them, and a
    file written again is read again in any case."""
    import sctc_assets.resources.io_manager as io

    if not io._COPY_ON_WRITE:
        pytest.skip("the memo is kept only where pandas copies on write (pandas 3)")
    inputs, partition = tmp_path / "prompts.parquet", tmp_path / "answers.parquet"
    pd.DataFrame({"prompt": ["p"]}).to_parquet(inputs, index=False)
    pd.DataFrame({"answer": ["a"]}).to_parquet(partition, index=False)
    reads = []
    monkeypatch.setattr(io, "read_table", lambda p: reads.append(p) or pd.read_parquet(p))
    io.forget_reads()
    try:
        io._read_stored(inputs, lasting=True)
        io._read_stored(partition)
        io.forget_reads(keep_lasting=True)
        io._read_stored(inputs, lasting=True)
        io._read_stored(partition)
        assert reads == [inputs, partition, partition]

        pd.DataFrame({"prompt": ["changed", "rows"]}).to_parquet(inputs, index=False)
        assert io._read_stored(inputs, lasting=True)["prompt"].tolist() == ["changed", "rows"]
        assert reads[-1] == inputs and len(reads) == 4

        io.forget_reads()
        io._read_stored(inputs, lasting=True)
        assert len(reads) == 5
    finally:
        io.forget_reads()

