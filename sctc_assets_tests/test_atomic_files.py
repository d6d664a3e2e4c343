"""Files written by two processes at once: each writer stages a file of its own, so both finish and the file is
always whole (P6, point 1: two `sctc run` on one data folder renamed each other's `<name>.tmp` away)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from sctc_assets.lib.atomic_files import replacing, write_text  # noqa: E402
from sctc_assets.resources.io_manager import _write  # noqa: E402

WRITES = 25


def _store_tables(path: str, seed: int, errors) -> None:
    frame = pd.DataFrame({"value": range(seed, seed + 2000), "text": [f"row {i}" for i in range(2000)]})
    try:
        for _ in range(WRITES):
            _write(frame, Path(path), "test table")
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which asserts there was none
        errors.put(f"{type(exc).__name__}: {exc}")


def _draw_figures(folder: str, errors) -> None:
    from sctc_assets.assets.metadata import figure_file

    try:
        for _ in range(WRITES):
            figure, axes = plt.subplots()
            axes.plot([1, 2, 3])
            figure_file(figure, "concurrent", "chart")
    except Exception as exc:  # noqa: BLE001
        errors.put(f"{type(exc).__name__}: {exc}")


def _two_processes(target, *args) -> list[str]:
    context = multiprocessing.get_context("fork")
    errors = context.Queue()
    processes = [context.Process(target=target, args=(*args[index], errors)) for index in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    for process in processes:
        if process.is_alive():
            process.kill()
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert all(process.exitcode == 0 for process in processes)
    return found


def test_two_processes_storing_one_table_both_finish_and_the_table_is_whole(tmp_path):
    path = tmp_path / "storage" / "term_prompts.parquet"
    assert _two_processes(_store_tables, (str(path), 0), (str(path), 10_000)) == []
    table = pd.read_parquet(path)
    assert len(table) == 2000 and table["value"].iloc[0] in (0, 10_000)
    assert [item.name for item in path.parent.iterdir()] == [path.name]  # no temporary file left behind


def test_two_processes_drawing_one_figure_both_finish(tmp_path, monkeypatch):
    monkeypatch.setenv("SCTC_DATA_DIR", str(tmp_path))
    assert _two_processes(_draw_figures, (str(tmp_path),), (str(tmp_path),)) == []
    folder = tmp_path / "figures" / "concurrent"
    assert [item.name for item in folder.iterdir()] == ["chart.png"]
    assert (folder / "chart.png").read_bytes().startswith(b"\x89PNG")


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing_behind(tmp_path):
    target = write_text(tmp_path / "report.md", "old")
    with pytest.raises(RuntimeError):
        with replacing(target) as staging:
            staging.write_text("half")
            raise RuntimeError("killed mid-write")
    assert target.read_text() == "old"
    assert [item.name for item in tmp_path.iterdir()] == ["report.md"]


def test_an_unstorable_table_names_the_table_and_keeps_the_stored_one(tmp_path):
    path = tmp_path / "t.parquet"
    _write(pd.DataFrame({"a": [1]}), path, "t")
    with pytest.raises(TypeError, match="t: cannot store the table"):
        _write(pd.DataFrame({"a": [object()]}), path, "t")
    assert pd.read_parquet(path)["a"].tolist() == [1]
    assert [item.name for item in tmp_path.iterdir()] == ["t.parquet"]
