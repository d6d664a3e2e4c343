"""Opening upstream data from a directory, archives and a URL, and the error cases."""

from __future__ import annotations

import http.server
import io
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from sctc_assets.lib.sctc_upstream import SCTC_COMMIT, SCTC_MARKERS, TERM_COLUMNS, TERMS_FILE, commit_of
from sctc_assets.lib.upstream_source import (UpstreamArchiveError, UpstreamError, UpstreamFileMissing,
                                             UpstreamSchemaError, UpstreamSource)

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


def test_opens_a_url_and_caches_the_download(tmp_path):
    archive = _tar(_make_tree(tmp_path / "src"), tmp_path / "served.tar.gz", "w:gz")
    requests = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            requests.append(self.path)
            body = archive.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/archive/{SCTC_COMMIT}.tar.gz"
        first = _open(url, tmp_path / "cache")
        second = _open(url, tmp_path / "cache")
    finally:
        server.shutdown()
    assert first.read_csv(TERMS_FILE).shape == (1, 7)
    assert second.root == first.root
    assert requests == [f"/archive/{SCTC_COMMIT}.tar.gz"]
    assert list((tmp_path / "cache" / "downloads").iterdir())


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
    archive = _tar(_make_tree(tmp_path / "src"), tmp_path / "a.tar.gz", "w:gz")
    _open(archive, tmp_path / "cache")
    assert resource.resolved_location().endswith(TOP)
    assert resource.open().read_csv(TERMS_FILE).shape == (1, 7)
    monkeypatch.setenv(SCTC_ENV_VAR, str(archive))
    assert resource.resolved_location() == str(archive)
