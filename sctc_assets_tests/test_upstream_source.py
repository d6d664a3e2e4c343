"""Opening upstream data from a directory, archives and a URL, and the error cases."""

from __future__ import annotations

import io
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from sctc_assets.lib import upstream_source
from sctc_assets.lib.file_lock import file_lock
from sctc_assets.lib.sctc_upstream import SCTC_COMMIT, SCTC_MARKERS, TERM_COLUMNS, TERMS_FILE, commit_of
from sctc_assets.lib.upstream_source import (UpstreamArchiveError, UpstreamError, UpstreamFileMissing,
                                             UpstreamSchemaError, UpstreamSource, extract_once)
from sctc_assets_tests.servers import serve_bodies

TOP = f"SC-TC-Bench-{SCTC_COMMIT}"
TERMS_CSV = ("\ufeffconceptId,Mainland China,Taiwan,definition_simplified,definition_traditional,category,"
             "definition_source\n0,鼠标,滑鼠,电脑输入设备,電腦輸入設備,consumption,wiki\n")


def _make_tree(root: Path) -> Path:
    data = root / TOP
    (data / "source_data").mkdir(parents=True)
    (data / TERMS_FILE).write_text(TERMS_CSV, encoding="utf-8")
    (data / "source_data" / "broken.csv").write_text("conceptId,Taiwan\n0,滑鼠\n", encoding="utf-8")
    return data


def _tar(folder: Path, target: Path, mode: str) -> Path:
    with tarfile.open(target, mode) as archive:
        archive.add(folder, arcname=folder.name)
    return target


def _zip(folder: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w") as archive:
        for path in folder.rglob("*"):
            archive.write(path, path.relative_to(folder.parent))
    return target


def _open(location, cache: Path) -> UpstreamSource:
    return UpstreamSource.open(location, cache_dir=cache, markers=SCTC_MARKERS)


@pytest.mark.parametrize("kind", ["directory", "tar.gz", "tar.xz", "zip"])
def test_opens_directory_and_archives(tmp_path, kind):
    tree = _make_tree(tmp_path / "src")
    location = {
        "directory": lambda: tmp_path / "src",
        "tar.gz": lambda: _tar(tree, tmp_path / "a.tar.gz", "w:gz"),
        "tar.xz": lambda: _tar(tree, tmp_path / "a.tar.xz", "w:xz"),
        "zip": lambda: _zip(tree, tmp_path / "a.zip"),
    }[kind]()
    source = _open(location, tmp_path / "cache")
    frame = source.read_csv(TERMS_FILE, TERM_COLUMNS)
    assert frame.loc[0, "Taiwan"] == "滑鼠"
    assert list(frame.columns)[0] == "conceptId"  # the byte-order mark is gone
    assert commit_of(source.root) == SCTC_COMMIT
    if kind != "directory":  # extracted once, reused afterwards
        again = _open(location, tmp_path / "cache")
        assert again.root == source.root


def test_opens_a_url_and_caches_the_download(tmp_path, monkeypatch):
    monkeypatch.setenv("SCTC_DOWNLOAD_CACHE", str(tmp_path / "downloads"))
    archive = _tar(_make_tree(tmp_path / "src"), tmp_path / "served.tar.gz", "w:gz")
    requests = []
    server = serve_bodies([archive.read_bytes()] * 2, requests=requests)
    try:
        url = f"http://127.0.0.1:{server.server_port}/archive/{SCTC_COMMIT}.tar.gz"
        first = _open(url, tmp_path / "cache")
        second = _open(url, tmp_path / "cache")
    finally:
        server.shutdown()
    assert first.read_csv(TERMS_FILE).shape == (1, 7)
    assert second.root == first.root
    assert requests == [f"/archive/{SCTC_COMMIT}.tar.gz"]
    assert list((tmp_path / "downloads" / "upstream").iterdir())


def test_truncated_download_is_an_error_and_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("SCTC_DOWNLOAD_CACHE", str(tmp_path / "downloads"))
    body = _tar(_make_tree(tmp_path / "src"), tmp_path / "served.tar.gz", "w:gz").read_bytes()
    server = serve_bodies([body[:-100], body[:-100]], announced_extra=100)  # the connection drops 100 bytes short
    url = f"http://127.0.0.1:{server.server_port}/archive/{SCTC_COMMIT}.tar.gz"
    try:
        expected = rf"{url}: incomplete transfer \({len(body) - 100} of {len(body)} bytes"
        with pytest.raises(UpstreamError, match=expected):
            _open(url, tmp_path / "cache")
        with pytest.raises(UpstreamError, match="incomplete transfer"):  # asked again, not served from the cache
            _open(url, tmp_path / "cache")
    finally:
        server.shutdown()
    assert not list((tmp_path / "downloads" / "upstream").iterdir())


def test_download_that_cannot_be_extracted_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("SCTC_DOWNLOAD_CACHE", str(tmp_path / "downloads"))
    body = _tar(_make_tree(tmp_path / "src"), tmp_path / "served.tar.gz", "w:gz").read_bytes()
    server = serve_bodies([body[: len(body) // 2], body])  # a broken archive first, then the real one
    url = f"http://127.0.0.1:{server.server_port}/archive/{SCTC_COMMIT}.tar.gz"
    try:
        with pytest.raises(UpstreamArchiveError, match=rf"downloaded from {url}"):
            _open(url, tmp_path / "cache")
        assert not list((tmp_path / "downloads" / "upstream").iterdir())
        assert _open(url, tmp_path / "cache").read_csv(TERMS_FILE).shape == (1, 7)
    finally:
        server.shutdown()


def test_missing_file_is_named(tmp_path):
    source = _open(_make_tree(tmp_path / "src").parent, tmp_path / "cache")
    with pytest.raises(UpstreamFileMissing, match=r"prompt/regional_term/simplified_1\.csv"):
        source.read_csv("prompt/regional_term/simplified_1.csv")
    assert source.missing(["prompt/x.csv", TERMS_FILE]) == ["prompt/x.csv"]


def test_missing_column_names_file_and_column(tmp_path):
    source = _open(_make_tree(tmp_path / "src").parent, tmp_path / "cache")
    with pytest.raises(UpstreamSchemaError, match=r"source_data/broken\.csv: missing required column\(s\) 'Mainland China'"):
        source.read_csv("source_data/broken.csv", ["conceptId", "Mainland China"])


def test_corrupt_archive_names_the_file(tmp_path):
    good = _tar(_make_tree(tmp_path / "src"), tmp_path / "good.tar.xz", "w:xz").read_bytes()
    corrupt = tmp_path / "corrupt.tar.xz"
    corrupt.write_bytes(good[: len(good) // 2])
    with pytest.raises(UpstreamArchiveError, match=r"corrupt\.tar\.xz: not a readable archive"):
        _open(corrupt, tmp_path / "cache")
    garbage = tmp_path / "garbage.zip"
    garbage.write_bytes(b"PK\x03\x04 definitely not a zip" + bytes(100))
    with pytest.raises(UpstreamArchiveError, match="garbage.zip"):
        _open(garbage, tmp_path / "cache")
    # a failed extraction leaves nothing that a later run would mistake for a finished one
    assert not any((tmp_path / "cache" / "extracted").glob("*/.complete"))


def _many_members(target: Path, mode: str) -> bytes:
    """A small archive of 200 CSV-like members, so that a flipped stretch in the middle hits later headers."""
    with tarfile.open(target, mode) as archive:
        for index in range(200):
            payload = "".join(f"{index},{row},term{row * index % 97},定义{row}\n" for row in range(20)).encode()
            info = tarfile.TarInfo(f"{TOP}/source_data/f{index:03d}.csv")
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    return target.read_bytes()


@pytest.mark.parametrize("kind, mode", [("tar.gz", "w:gz"), ("tar.xz", "w:xz"), ("tar", "w")])
@pytest.mark.parametrize("where", [0.3, 0.4, 0.5, 0.6, 0.7])
def test_bytes_flipped_mid_archive_are_an_error_not_a_shorter_archive(tmp_path, kind, mode, where):
    good = _many_members(tmp_path / f"good.{kind}", mode)
    flipped = bytearray(good)
    start = int(len(good) * where)
    flipped[start : start + 64] = bytes(byte ^ 0xFF for byte in good[start : start + 64])
    corrupt = tmp_path / f"flipped.{kind}"
    corrupt.write_bytes(bytes(flipped))

    with pytest.raises(UpstreamArchiveError, match=rf"flipped\.{kind.replace('.', '[.]')}: (corrupt|not a readable)"):
        extract_once(corrupt, tmp_path / "cache")
    assert not any((tmp_path / "cache" / "extracted").glob("*/.complete"))
    assert len(list(Path(extract_once(tmp_path / f"good.{kind}", tmp_path / "cache")).rglob("*.csv"))) == 200


def test_extraction_finished_by_another_process_meanwhile_is_kept(tmp_path, monkeypatch):
    archive = _tar(_make_tree(tmp_path / "src"), tmp_path / "a.tar.gz", "w:gz")
    real_extract = upstream_source._extract

    def peer_finishes_first(path: Path, destination: Path) -> None:
        # As if a process without the lock completed the target, and others already read it, while this one worked.
        target = destination.parent / upstream_source._file_digest(path)[:16]
        target.mkdir()
        (target / "peer-was-here").write_text("")
        (target / ".complete").write_text(str(path))
        real_extract(path, destination)

    monkeypatch.setattr(upstream_source, "_extract", peer_finishes_first)
    target = extract_once(archive, tmp_path / "cache")

    assert (target / "peer-was-here").exists()
    assert not list(target.parent.glob(".staging-*"))


def test_a_process_waits_for_the_one_extracting_and_reuses_its_work(tmp_path, monkeypatch):
    archive = _tar(_make_tree(tmp_path / "src"), tmp_path / "a.tar.gz", "w:gz")
    target = tmp_path / "cache" / "extracted" / upstream_source._file_digest(archive)[:16]
    calls = []
    monkeypatch.setattr(upstream_source, "_extract", lambda *args: calls.append(args))
    results = []
    with file_lock(target.parent / f".{target.name}.lock"):  # the other process, mid-extraction
        waiter = threading.Thread(target=lambda: results.append(extract_once(archive, tmp_path / "cache")))
        waiter.start()
        time.sleep(0.5)
        target.mkdir()
        (target / ".complete").write_text(str(archive))
    waiter.join(timeout=10)

    assert results == [target] and calls == []


def test_unknown_location_and_wrong_layout(tmp_path):
    with pytest.raises(UpstreamError, match="does not exist"):
        _open(tmp_path / "nowhere", tmp_path / "cache")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UpstreamError, match="none of"):
        _open(tmp_path / "empty", tmp_path / "cache")


def test_opens_the_shared_archive(sctc_source):
    assert commit_of(sctc_source.root) == SCTC_COMMIT
    assert sctc_source.read_csv(TERMS_FILE, TERM_COLUMNS).shape == (110, 7)
    # Files of 4 MiB or more are absent from the shared copy; the loader reports them instead of failing.
    assert sctc_source.missing(["source_data/candidate_name_list/prompt_id_0.csv"]) == [
        "source_data/candidate_name_list/prompt_id_0.csv"]


def test_tar_members_cannot_escape_the_cache(tmp_path):
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as archive:
        payload = b"x"
        info = tarfile.TarInfo("../../escaped.txt")
        info.size = len(payload)
        archive.addfile(info, io.BytesIO(payload))
    with pytest.raises(UpstreamError):
        _open(evil, tmp_path / "cache")
    assert not (tmp_path / "escaped.txt").exists()


def test_default_location_reuses_an_extracted_copy_of_the_pinned_commit(tmp_path, monkeypatch):
    from sctc_assets.lib.sctc_upstream import SCTC_DEFAULT_URL, SCTC_ENV_VAR
    from sctc_assets.resources.upstream import SCTCUpstreamResource

    monkeypatch.delenv(SCTC_ENV_VAR, raising=False)
    resource = SCTCUpstreamResource(cache_dir=str(tmp_path / "cache"))
    assert resource.resolved_location() == SCTC_DEFAULT_URL
    staging = tmp_path / "cache" / "extracted" / ".staging-x"  # another process's copy, about to be renamed
    _make_tree(staging)
    (staging / ".complete").write_text("")
    assert resource.resolved_location() == SCTC_DEFAULT_URL
    archive = _tar(_make_tree(tmp_path / "src"), tmp_path / "a.tar.gz", "w:gz")
    _open(archive, tmp_path / "cache")
    assert resource.resolved_location().endswith(TOP)
    assert resource.open().read_csv(TERMS_FILE).shape == (1, 7)
    monkeypatch.setenv(SCTC_ENV_VAR, str(archive))
    assert resource.resolved_location() == str(archive)


def test_an_unopenable_location_says_how_to_point_at_a_copy(tmp_path):
    from sctc_assets.resources.upstream import SCTCUpstreamResource

    resource = SCTCUpstreamResource(location=str(tmp_path / "nowhere.tar.xz"), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(UpstreamError, match=r"does not exist: .*nowhere\.tar\.xz \(point --upstream or "
                                            r"\$SCTC_UPSTREAM at a copy"):
        resource.open()
