"""Tables on shared or object storage (`lib/table_store.py`): the Parquet IO manager and the exports write through
any fsspec URL (here fsspec's in-memory filesystem, and `file://`) whole or not at all, read back what they wrote,
and a table store whose filesystem package is missing is one line before any stage runs."""

import importlib.util
import uuid
from types import SimpleNamespace

import dagster as dg
import fsspec
import pandas as pd
import pytest

import sctc_assets.lib.table_store as table_store
import sctc_assets.resources.io_manager as io
from sctc_assets.cli import main
from sctc_assets.assets.partitions import models_partitions
from sctc_assets.resources.io_manager import ParquetIOManager, _write, read_table
from sctc_assets.running.runner import export_tables

SHARDS = dg.StaticPartitionsDefinition(["a", "b"])


@dg.asset(partitions_def=SHARDS)
def store_rows(context: dg.AssetExecutionContext) -> pd.DataFrame:
    shard = context.partition_key
    return pd.DataFrame({"shard": [shard] * 3, "n": [1, 2, 3], "text": ["甲", None, ""]})


@dg.asset
def store_total(store_rows: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"rows": [len(store_rows)], "n": [int(store_rows["n"].sum())]})


ASSETS = [store_rows, store_total]


@pytest.fixture
def memory_root():
    """A fresh folder of fsspec's in-memory filesystem (one per test: that filesystem is global to the process)."""
    root = f"memory://sctc-{uuid.uuid4().hex[:8]}/tables"
    yield root
    fs = fsspec.filesystem("memory")
    bucket = root.split("://", 1)[1].split("/", 1)[0]
    if fs.exists(f"/{bucket}"):
        fs.rm(f"/{bucket}", recursive=True)
    io.forget_reads()


def _materialize(io_manager: ParquetIOManager) -> None:
    for shard in ("a", "b"):
        assert dg.materialize(ASSETS, selection=["store_rows"], partition_key=shard,
                              resources={"io_manager": io_manager}).success
    assert dg.materialize(ASSETS, selection=["store_total"], resources={"io_manager": io_manager}).success


def _files(root: str) -> dict[str, bytes]:
    """Every file under a memory:// folder, by its path below it."""
    fs = fsspec.filesystem("memory")
    base = root.split("://", 1)[1]
    return {path.split(base, 1)[1].lstrip("/"): fs.cat_file(path) for path in fs.find(base)}


def test_the_io_manager_writes_and_reads_tables_on_an_object_store_as_it_does_on_disk(memory_root, tmp_path):
    _materialize(ParquetIOManager(base_dir=memory_root))
    _materialize(ParquetIOManager(base_dir=str(tmp_path)))

    stored = _files(memory_root)
    assert sorted(stored) == ["store_rows/partition=a.parquet", "store_rows/partition=b.parquet",
                              "store_total.parquet"]
    for name, data in stored.items():
        assert data == (tmp_path / name).read_bytes(), name  # the same bytes as the local store
    total = read_table(f"{memory_root}/store_total.parquet")
    assert total.to_dict("list") == {"rows": [6], "n": [12]}
    rows = read_table(f"{memory_root}/store_rows/partition=b.parquet")
    assert rows["shard"].tolist() == ["b"] * 3 and rows["text"].dtype == pd.StringDtype()
    assert rows["text"].isna().tolist() == [False, True, False] and rows["text"].iloc[2] == ""


def test_a_file_url_in_the_table_store_setting_is_the_local_folder(tmp_path, monkeypatch):
    folder = tmp_path / "shared mount"
    monkeypatch.setenv("SCTC_TABLE_STORE", folder.as_uri())
    io_manager = ParquetIOManager()
    assert io_manager._root() == folder and table_store.is_local(io_manager._root())
    _materialize(io_manager)
    assert sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file()) == [
        "store_rows/partition=a.parquet", "store_rows/partition=b.parquet", "store_total.parquet"]
    assert pd.read_parquet(folder / "store_total.parquet").to_dict("list") == {"rows": [6], "n": [12]}


def test_a_remote_table_read_twice_is_read_once_until_it_is_replaced(memory_root, monkeypatch):
    if not io._COPY_ON_WRITE:
        pytest.skip("the memo is kept only where pandas copies on write (pandas 3)")
    path = table_store.location(f"{memory_root}/t.parquet")
    _write(pd.DataFrame({"n": [1]}), path, "t")
    reads = []
    real = io.read_table
    monkeypatch.setattr(io, "read_table", lambda p: reads.append(p) or real(p))
    io.forget_reads()
    assert io._read_stored(path)["n"].tolist() == [1] and io._read_stored(path)["n"].tolist() == [1]
    assert len(reads) == 1
    _write(pd.DataFrame({"n": [2]}), path, "t")
    assert io._read_stored(path)["n"].tolist() == [2] and len(reads) == 2


_TO_PARQUET = pd.DataFrame.to_parquet


class _Killed(Exception):
    pass


def _half_written(frame: pd.DataFrame, target, **kwargs) -> None:
    """A writer killed halfway: the first half of the file's bytes reach `target`, then it stops."""
    import io as stdio

    whole = stdio.BytesIO()
    _TO_PARQUET(frame, whole, **kwargs)
    data = whole.getvalue()
    if hasattr(target, "write"):
        target.write(data[: len(data) // 2])
    else:
        target.write_bytes(data[: len(data) // 2])
    raise _Killed("killed mid-write")


@pytest.mark.parametrize("atomic_put", [True, False], ids=["one-put", "staging-and-move"])
def test_a_write_killed_midway_keeps_the_previous_table_and_leaves_no_partial_file(
        memory_root, monkeypatch, atomic_put):
    if not atomic_put:  # the path of filesystems without an atomic put (SFTP, SMB...): staging key, then move
        monkeypatch.setattr(table_store, "ATOMIC_PUT_PROTOCOLS", frozenset())
    path = table_store.location(f"{memory_root}/answers/model=m.parquet")
    _write(pd.DataFrame({"answer": ["old"] * 100}), path, "answers")
    before = _files(memory_root)

    monkeypatch.setattr(pd.DataFrame, "to_parquet", _half_written)
    with pytest.raises(_Killed):
        _write(pd.DataFrame({"answer": ["new"] * 100}), path, "answers")
    assert _files(memory_root) == before  # the old table, and nothing else (no staging key left behind)
    io.forget_reads()
    assert read_table(path)["answer"].tolist() == ["old"] * 100


def test_an_upload_failing_midway_leaves_no_staging_key(memory_root, monkeypatch):
    """Filesystems without an atomic put: the bytes sent to the staging key before the failure are removed."""
    monkeypatch.setattr(table_store, "ATOMIC_PUT_PROTOCOLS", frozenset())
    path = table_store.location(f"{memory_root}/t.parquet")
    _write(pd.DataFrame({"n": [1]}), path, "t")
    before = _files(memory_root)
    fs = path.fs
    real = type(fs).pipe_file

    def broken(self, key, data, **kwargs):
        real(self, key, data[: len(data) // 2], **kwargs)
        raise ConnectionError("connection reset")

    monkeypatch.setattr(type(fs), "pipe_file", broken)
    with pytest.raises(ConnectionError):
        _write(pd.DataFrame({"n": [2]}), path, "t")
    monkeypatch.undo()
    assert _files(memory_root) == before


def test_exports_go_to_an_object_store_folder_whole_and_are_not_written_twice(memory_root, tmp_path):
    store = ParquetIOManager(base_dir=memory_root)
    plain_key, per_model_key = dg.AssetKey("ex_plain"), dg.AssetKey("ex_answers")

    @dg.asset(name="ex_plain")
    def ex_plain() -> pd.DataFrame:
        return pd.DataFrame()

    @dg.asset(name="ex_answers", partitions_def=models_partitions)
    def ex_answers() -> pd.DataFrame:
        return pd.DataFrame()

    defs = dg.Definitions(assets=[ex_plain, ex_answers])
    _write(pd.DataFrame({"k": [1, 2]}), store.path_for(plain_key), "ex_plain")
    for model, answer in (("m-a", "好"), ("m-b", "壞"), ("m-c", "不")):
        _write(pd.DataFrame({"model": [model], "answer": [answer]}),
               store.path_for(per_model_key, models_partitions, model), "ex_answers")
    spec = SimpleNamespace(tables=["ex_plain", "ex_answers"], dimension="lang", langs=())
    out = memory_root.rsplit("/", 1)[0] + "/exports"

    written = export_tables(spec, ["m-a", "m-b"], store, out, defs)
    assert sorted(written) == ["ex_answers", "ex_plain"]
    assert read_table(written["ex_answers"]).to_dict("list") == {"model": ["m-a", "m-b"], "answer": ["好", "壞"]}
    assert read_table(written["ex_plain"])["k"].tolist() == [1, 2]
    exported = _files(out)
    assert sorted(exported) == [".sctc-export.json", "ex_answers.parquet", "ex_plain.parquet"]

    again = export_tables(spec, ["m-a", "m-b"], store, out, defs)  # unchanged sources: nothing rewritten
    assert again.keys() == written.keys() and _files(out) == exported
    local = export_tables(spec, ["m-a", "m-b"], store, tmp_path / "out", defs)  # remote store, local folder
    assert (tmp_path / "out" / "ex_answers.parquet").read_bytes() == exported["ex_answers.parquet"]
    assert sorted(local) == sorted(written)


@pytest.mark.parametrize(("url", "package"), [("s3://AKIAEXAMPLE:s3cr3t@bucket/tables", "s3fs"),
                                              ("gs://bucket/tables", "gcsfs")])
def test_a_table_store_whose_filesystem_package_is_missing_is_one_line_before_any_stage(
        url, package, isolated_data_dir, capsys, monkeypatch):
    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"{package} is installed here")
    stored = isolated_data_dir / "storage" / "plain.parquet"
    stored.parent.mkdir(parents=True)
    pd.DataFrame({"n": [1]}).to_parquet(stored, index=False)
    before = (stored.read_bytes(), stored.stat().st_mtime_ns)
    monkeypatch.setenv("SCTC_TABLE_STORE", url)

    assert main(["run", "--benchmarks", "term", "--models", "anything"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 1, errors
    assert errors[0].startswith("error: $SCTC_TABLE_STORE=") and f"pip install {package}" in errors[0]
    assert "s3cr3t" not in errors[0] and "Traceback" not in errors[0]
    assert (stored.read_bytes(), stored.stat().st_mtime_ns) == before
    assert sorted(path.name for path in stored.parent.iterdir()) == ["plain.parquet"]


def test_an_unknown_scheme_and_the_url_shown_without_credentials():
    assert table_store.store_problem("nosuchfs://x/y", "$SCTC_TABLE_STORE") == (
        "$SCTC_TABLE_STORE=nosuchfs://x/y: nosuchfs:// is no filesystem fsspec knows")
    assert table_store.store_problem("memory://x/y", "$SCTC_TABLE_STORE") is None
    assert table_store.store_problem("/a/local/folder", "$SCTC_TABLE_STORE") is None
    assert table_store.shown("s3://key:secret@bucket/t") == "s3://bucket/t"
    assert table_store.shown("/tmp/x") == "/tmp/x"


def test_the_report_reads_its_tables_from_an_object_store(memory_root):
    from sctc_assets.lib.report.inputs import interval_tables
    from sctc_assets.lib.report.inputs import read_table as report_table

    store = ParquetIOManager(base_dir=memory_root)
    key = dg.AssetKey("sovereignty_rates")
    for model, rate in (("m-a", 0.25), ("m-b", 0.5)):
        _write(pd.DataFrame({"model": [model], "rate": [rate], "rate_ci_low": [rate - 0.1]}),
               store.path_for(key, models_partitions, model), "sovereignty_rates")
    root = store._root()
    assert report_table(root, "sovereignty_rates", columns=["model", "rate", "absent"]).to_dict("list") == {
        "model": ["m-a", "m-b"], "rate": [0.25, 0.5]}
    found = interval_tables(root)
    assert list(found) == ["sovereignty_rates"] and found["sovereignty_rates"]["model"].tolist() == ["m-a", "m-b"]
