"""Name tokenization (Section 4.6.2, Table 37): the tokenizer registry and its file sources, independent sources of
the same vocabulary agreeing, a GGUF vocabulary against llama.cpp's reference ids, and the Dagster asset on the
default tokenizer set against the paper's Table 37."""

from __future__ import annotations

import gzip
import hashlib
import inspect
import math
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest
from scipy.stats import ttest_ind

from sctc_assets.assets.name.tokenization import TOKENIZATION_ASSETS
from sctc_assets.lib import gguf_reading
from sctc_assets.lib.conversion import convert
from sctc_assets.lib.name import tokenization as tk
from sctc_assets.lib.name.names import NAME_COLUMNS, NAMES_FILE, parse_names
from sctc_assets.resources.io_manager import ParquetIOManager
from sctc_assets.resources.upstream import SCTCUpstreamResource
from sctc_assets_tests.fakes import write_vocab_gguf

REPO = Path(__file__).resolve().parents[1]
REGISTRY = REPO / "data" / "tokenizers.yaml"
# Converted vocabularies, shared by the tests (and by `sctc run` on this checkout); downloads go to the session's
# download cache (conftest), once per session.
FILES_DIR = REPO / "data" / "cache" / "tokenizers"
SDIST = "llama-cpp-python==0.3.36"
# The paper's Table 37 as printed: Mainland mean, SD, converted mean, SD, stars; Taiwanese the same.
PAPER_TABLE_37 = {
    "qwen-1.5": (2.88, 0.33, 2.99, 0.11, "***", 3.10, 0.37, 2.96, 0.20, "***"),
    "deepseek-r1": (3.83, 0.38, 3.92, 0.27, "*", 4.00, 0.24, 3.96, 0.25, "NS"),
    "gpt-4o": (3.06, 0.33, 3.54, 0.69, "***", 4.04, 0.75, 3.35, 0.56, "***"),
    "gpt-4": (5.47, 0.95, 6.15, 0.89, "***", 5.89, 0.86, 5.61, 0.87, "**"),
    "llama-3": (4.12, 0.33, 4.22, 0.41, "*", 4.55, 0.64, 4.45, 0.60, "NS"),
    "llama-2": (7.08, 1.62, 6.91, 1.51, "NS", 7.74, 1.51, 7.72, 1.55, "NS"),
}
ROW_COLUMNS = ["mainland_mean", "mainland_sd", "mainland_to_traditional_mean", "mainland_to_traditional_sd",
               "mainland_sig", "taiwan_mean", "taiwan_sd", "taiwan_to_simplified_mean", "taiwan_to_simplified_sd",
               "taiwan_sig"]


@pytest.fixture(scope="module")
def names(sctc_source) -> pd.DataFrame:
    return parse_names(sctc_source.read_csv(NAMES_FILE, NAME_COLUMNS))


@pytest.fixture(scope="module")
def registry() -> dict[str, tk.TokenizerEntry]:
    return tk.load_registry(REGISTRY)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tokenizers.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("body, message", [
    ("tokenizers:\n  a: {kind: sentencepiece}\n", "tokenizer 'a': `kind` must be one of"),
    ("tokenizers:\n  b: {kind: transformers}\n", "tokenizer 'b': a transformers tokenizer needs file"),
    ("tokenizers:\n  c: {kind: tiktoken, file: {path: x.tiktoken}}\n", "tokenizer 'c': a tiktoken `file` needs its"),
    ("tokenizers:\n  d: {kind: transformers, file: {member: x}}\n", "tokenizer 'd': `file` needs one of"),
    ("models: {}\n", "expected a top-level `tokenizers:` mapping"),
])
def test_registry_errors_name_the_file_and_the_tokenizer(tmp_path, body, message):
    path = _write(tmp_path, body)
    with pytest.raises(tk.TokenizerRegistryError) as error:
        tk.load_registry(path)
    assert str(path) in str(error.value) and message in str(error.value)


def test_the_shipped_registry_pins_and_hashes_its_default_files(registry):
    import tiktoken_ext.openai_public as openai_public

    defaults = {key: entry for key, entry in registry.items() if entry.default}
    assert len(defaults) >= 6
    sources = [value for entry in registry.values() for value in entry.settings.values() if isinstance(value, dict)]
    assert all("==" in source["pypi"] for source in sources if "pypi" in source)
    for entry in defaults.values():
        for source in (value for value in entry.settings.values() if isinstance(value, dict)):
            assert "sha256" in source or "embedded" in source, entry.key
    # The OpenAI encodings' copies must hash to what tiktoken itself expects of the official files.
    for key in ("gpt-4o", "gpt-4"):
        assert registry[key].settings["offline_copy"]["sha256"] in inspect.getsource(openai_public)


def test_file_sources_decompress_and_refuse_a_wrong_sha256(tmp_path):
    packed = tmp_path / "vocab.txt.gz"
    packed.write_bytes(gzip.compress("名字".encode()))
    wrong = hashlib.sha256(b"another file").hexdigest()
    with pytest.raises(tk.TokenizerIntegrityError, match="refusing to use it"):
        tk.resolve_source({"path": str(packed), "gzip": True, "sha256": wrong}, tmp_path / "files", where="t")
    actual = hashlib.sha256("名字".encode()).hexdigest()
    plain = tk.resolve_source({"path": str(packed), "gzip": True, "sha256": actual}, tmp_path / "files", where="t")
    assert Path(plain).read_text(encoding="utf-8") == "名字"
    with pytest.raises(tk.TokenizerUnavailable, match="not installed"):
        tk.resolve_source({"package": "no_such_package_here"}, tmp_path, where="t")


def test_count_rows_with_constant_counts():
    """Lists without spread: equal means prove nothing (t 0, p 1), different ones are certain (t ±inf, p 0)."""
    entry = tk.TokenizerEntry(key="chars", kind="quicktok", settings={"encoding": "x"})
    lists = {"mainland": ["王秀英", "李秀英"], "mainland_to_traditional": ["王秀英", "李秀英"],
             "taiwan": ["陳怡君", "陳建宏"], "taiwan_to_simplified": ["陈怡君", "陈建宏"]}
    row = tk.count_row(entry, tk.token_counts(lambda text: list(text.encode()) if "陳" in text else list(text),
                                              lists, added=1))
    assert (row["mainland_mean"], row["mainland_sd"], row["mainland_t"], row["mainland_p"]) == (4.0, 0.0, 0.0, 1.0)
    assert (row["taiwan_mean"], row["taiwan_to_simplified_mean"]) == (10.0, 4.0)
    assert (row["taiwan_t"], row["taiwan_p"], row["taiwan_sig"]) == (math.inf, 0.0, "***")


def test_two_independent_qwen_vocabularies_agree_on_every_name(registry, names):
    """qwen.tiktoken from the dashscope wheel and quicktok's Qwen 2.5/3 vocabulary give the same ids."""
    dashscope = tk.load_tokenizer(registry["qwen-1.5"], FILES_DIR)
    quicktok = tk.load_tokenizer(registry["qwen-3"], FILES_DIR)
    texts = [name for names_ in tk.name_lists(names).values() for name in names_]
    assert len(texts) == 704
    assert [dashscope(text) for text in texts] == [list(quicktok(text)) for text in texts]


def test_a_tokenizer_json_gives_the_ids_of_transformers_fast_tokenizer_without_importing_it(registry, names):
    """A `tokenizer.json` (DeepSeek's, from its package) is loaded with the tokenizers library: every name gets the
    ids `PreTrainedTokenizerFast` gives it, and a process that loads and uses it never imports transformers or
    torch."""
    import subprocess
    import sys

    from transformers import PreTrainedTokenizerFast

    entry = registry["deepseek-r1"]
    encode = tk.load_tokenizer(entry, FILES_DIR)
    reference = PreTrainedTokenizerFast(tokenizer_file=tk.resolve_source(entry.settings["file"], FILES_DIR, where="t"))
    texts = [name for names_ in tk.name_lists(names).values() for name in names_]
    assert [encode(text) for text in texts] == [reference(text, add_special_tokens=False)["input_ids"]
                                                for text in texts]
    probe = ("import sys\nfrom sctc_assets.lib.name import tokenization as tk\n"
             f"entry = tk.load_registry({str(REGISTRY)!r})['deepseek-r1']\n"
             f"assert tk.load_tokenizer(entry, tk.Path({str(FILES_DIR)!r}))('台灣')\n"
             "print(sorted(name for name in ('transformers', 'torch') if name in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


@pytest.mark.slow
def test_gguf_vocabulary_gives_llama_cpps_reference_ids():
    """llama.cpp ships, next to each vocab GGUF, test strings and the ids the original tokenizer gives them."""
    archive = tk.download_distribution(SDIST, tk.default_download_dir() / "downloads", sdist=True)
    member = "vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf"
    extracted = tk.default_download_dir() / "extracted"
    texts = tk.extract_member(archive, member + ".inp", extracted).read_text(encoding="utf-8")
    ids = tk.extract_member(archive, member + ".out", extracted).read_text(encoding="utf-8")
    pairs = list(zip(texts.split("\n__ggml_vocab_test__\n"), ids.split("\n")))
    encode = tk.load_tokenizer(tk.TokenizerEntry(key="llama-2", kind="transformers", settings={
        "file": {"pypi": SDIST, "sdist": True, "member": member}}), FILES_DIR)
    # transformers' GGUF conversion treats a leading space differently from llama.cpp; names never start with one.
    checked = [(text, expected) for text, expected in pairs if text and not text[0].isspace()]
    assert len(checked) >= 20 and any("我想在apple工作" in text for text, _ in checked)
    for text, expected in checked:
        assert encode(text) == [int(token) for token in expected.split()], text


# --- GGUF vocabularies: the header path writes the bytes AutoTokenizer's path writes ------------------------------

LLAMA_CPP_VOCABS = "vendor/llama.cpp/models"


def _auto_tokenizer_json(path: Path) -> bytes:
    """The `tokenizer.json` of AutoTokenizer's GGUF path, as `cached_gguf_vocabulary` wrote it before; the header
    path must pick the same tokenizer class, asserted on its own (in transformers 5.24 the class does not change the
    JSON)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    assert gguf_reading.header_tokenizer_class(path) in (type(tokenizer), None)
    return tokenizer.backend_tokenizer.to_str().encode("utf-8")


def _header_path_json(path: Path, files_dir: Path) -> bytes:
    """The `tokenizer.json` `cached_gguf_vocabulary` writes, the class taken from the header, the vocabulary read
    by `read_gguf_header`, which gives what transformers' own reader gives (values and their types)."""
    from transformers.integrations.gguf.reader import read_gguf_metadata

    assert gguf_reading.header_tokenizer_class(path) is not None, f"{path.name} would go through AutoTokenizer"
    vocabulary = ("tokenizer.ggml.tokens", "tokenizer.ggml.merges")
    for string_arrays in ((), vocabulary):
        assert repr(gguf_reading.read_gguf_header(path, string_arrays)) == repr(
            read_gguf_metadata(str(path), string_arrays))
    return tk.cached_gguf_vocabulary(path, files_dir).read_bytes()


@pytest.mark.parametrize("architecture, model", [
    ("llama", "llama"), ("llama", "gpt2"), ("qwen2", "gpt2"), ("gpt2", "gpt2"), ("phi3", "llama"),
    ("falcon", "gpt2"), ("starcoder2", "gpt2"),
])
def test_header_path_writes_the_vocabulary_autotokenizer_writes(tmp_path, architecture, model):
    assert architecture in gguf_reading.HEADER_TOKENIZER_ARCHITECTURES
    path = write_vocab_gguf(tmp_path / "models" / f"{architecture}-{model}.gguf", architecture, model)
    written = _header_path_json(path, tmp_path / "files")
    assert written == _auto_tokenizer_json(path)
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tk.cached_gguf_vocabulary(path, tmp_path / "files")))
    assert len(tokenizer("名字 ab<think>", add_special_tokens=False)["input_ids"]) >= 2


def test_other_gguf_files_go_through_autotokenizer(tmp_path, monkeypatch):
    """An architecture not listed, a llama file named Mistral (transformers reads it as one), a tokenizer config
    next to the file, or other arguments: the class is not taken from the header."""
    unlisted = write_vocab_gguf(tmp_path / "a" / "qwen3.gguf", "qwen3", "gpt2")
    mistral = write_vocab_gguf(tmp_path / "b" / "mistral.gguf", "llama", "llama", name="mistral")
    configured = write_vocab_gguf(tmp_path / "c" / "llama.gguf", "llama", "llama")
    (configured.parent / "tokenizer_config.json").write_text("{}", encoding="utf-8")
    for path in (unlisted, mistral, configured):
        assert gguf_reading.header_tokenizer_class(path) is None, path
    assert gguf_reading.header_tokenizer_class(configured, trust_remote_code=False) is None
    assert gguf_reading.header_tokenizer_class(mistral.parent / "absent.gguf") is None
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "truncated.gguf").write_bytes(mistral.read_bytes()[:100])
    assert gguf_reading.header_tokenizer_class(tmp_path / "e" / "truncated.gguf") is None
    plain = write_vocab_gguf(tmp_path / "d" / "llama.gguf", "llama", "llama")
    assert gguf_reading.header_tokenizer_class(plain, trust_remote_code=False) is not None
    assert gguf_reading.header_tokenizer_class(plain, revision="main") is None
    assert tk.cached_gguf_vocabulary(unlisted, tmp_path / "files").read_bytes() == _auto_tokenizer_json(unlisted)


def test_transformers_reads_gguf_headers_by_mmap_within_the_block_only(tmp_path):
    """A file `read_gguf_header` refuses goes to transformers' own reader, which raises its own error."""
    from transformers.integrations.gguf import reader

    original = reader.read_gguf_metadata
    not_gguf = tmp_path / "not.gguf"
    not_gguf.write_bytes(b"GGML" + bytes(100))
    with gguf_reading.gguf_headers_read_by_mmap():
        assert reader.read_gguf_metadata is not original
        with pytest.raises(ValueError, match="magic bytes, so it is not a GGUF file"):
            reader.read_gguf_metadata(str(not_gguf))
    assert reader.read_gguf_metadata is original


def _llama_cpp_vocab(member: str) -> Path:
    archive = tk.download_distribution(SDIST, tk.default_download_dir() / "downloads", sdist=True)
    return tk.extract_member(archive, f"{LLAMA_CPP_VOCABS}/{member}", tk.default_download_dir() / "extracted")


@pytest.mark.slow
def test_header_path_on_the_llama_spm_vocabulary(tmp_path):
    """The default registry's Llama-2 vocabulary (llama-cpp-python's sdist, as above)."""
    path = _llama_cpp_vocab("ggml-vocab-llama-spm.gguf")
    assert _header_path_json(path, tmp_path) == _auto_tokenizer_json(path)


@pytest.mark.slow
@pytest.mark.parametrize("member", [
    "ggml-vocab-aquila.gguf", "ggml-vocab-deepseek-coder.gguf", "ggml-vocab-deepseek-llm.gguf",
    "ggml-vocab-falcon.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-phi-3.gguf",
    "ggml-vocab-qwen2.gguf", "ggml-vocab-qwen35.gguf", "ggml-vocab-starcoder.gguf",
])
def test_header_path_on_llama_cpps_other_vocabularies(tmp_path, member):
    """Every other vocabulary of llama.cpp's models folder whose architecture is listed (the rest are not)."""
    path = _llama_cpp_vocab(member)
    assert _header_path_json(path, tmp_path) == _auto_tokenizer_json(path)


@pytest.mark.slow
def test_header_path_on_the_embedded_model(embedded_offline, registry, tmp_path):
    """The 491 MB embedded Qwen2.5 GGUF: its 151,936 tokens and 151,387 merges."""
    entry = registry["qwen2.5-coder-0.5b-instruct"]
    path = Path(tk.resolve_source(entry.settings["file"], tmp_path, where=entry.key))
    assert _header_path_json(path, tmp_path) == _auto_tokenizer_json(path)


@dg.asset(name="regional_names")
def names_for_tests(upstream: SCTCUpstreamResource) -> pd.DataFrame:
    return parse_names(upstream.open().read_csv(NAMES_FILE, NAME_COLUMNS))


def _materialize(config: dict) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [names_for_tests, *TOKENIZATION_ASSETS], raise_on_error=False,
        resources={"upstream": SCTCUpstreamResource(), "io_manager": ParquetIOManager()},
        run_config={"ops": {"tokenization_counts": {"config": {
            "registry": str(REGISTRY), "files_dir": str(FILES_DIR), **config}}}})


def test_unavailable_tokenizers_are_skipped_and_named(isolated_data_dir, extracted_upstream, tmp_path):
    registry = _write(tmp_path, "tokenizers:\n"
                      "  gpt-4o: {kind: quicktok, encoding: o200k_base}\n"
                      "  absent: {kind: transformers, file: {package: no_such_tokenizer_package, member: t.json}}\n")
    result = _materialize({"registry": str(registry), "tokenizers": ["gpt-4o", "absent"]})
    assert result.success
    metadata = result.asset_materializations_for_node("tokenization_counts")[0].metadata
    assert "no_such_tokenizer_package" in metadata["unavailable"].value["absent"]
    table = pd.read_parquet(isolated_data_dir / "storage" / "tokenization_counts.parquet")
    assert table["tokenizer"].tolist() == ["gpt-4o"]
    assert not _materialize({"registry": str(registry), "tokenizers": ["absent"]}).success
    assert not _materialize({"registry": str(registry), "tokenizers": ["no-such-tokenizer"]}).success


@pytest.mark.slow
def test_default_tokenizers_reproduce_table_37(isolated_data_dir, extracted_upstream, embedded_offline, names):
    result = _materialize({})
    assert result.success
    assert result.asset_materializations_for_node("tokenization_counts")[0].metadata["unavailable"].value == {}
    table = pd.read_parquet(isolated_data_dir / "storage" / "tokenization_counts.parquet").set_index("tokenizer")
    assert len(table) >= 6
    for key, printed in PAPER_TABLE_37.items():
        row = table.loc[key, ROW_COLUMNS].tolist()
        # formatted as tab_37.py prints them (numpy's round() sends 3.355 up, "%.2f" down)
        assert [f"{value:.2f}" if isinstance(value, float) else value for value in row] == [
            f"{value:.2f}" if isinstance(value, float) else value for value in printed], key
    # The embedded Qwen2.5 GGUF shares Qwen-1.5's BPE, so its row is the same.
    assert table.loc["qwen2.5-coder-0.5b-instruct", ROW_COLUMNS].tolist() == table.loc["qwen-1.5", ROW_COLUMNS].tolist()
    # GPT-4o's row again from quicktok's o200k_base, with numpy and scipy as tab_37.py uses them.
    import quicktok

    o200k = quicktok.get_encoding("o200k_base")
    mainland = names.loc[names["region"] == "mainland", "name"].tolist()
    original = [len(o200k.encode(name)) for name in mainland]
    converted = [len(o200k.encode(convert(name, "s2t"))) for name in mainland]
    row = table.loc["gpt-4o"]
    assert [row["mainland_mean"], row["mainland_sd"], row["mainland_to_traditional_sd"]] == pytest.approx(
        [np.mean(original), np.std(original), np.std(converted)])
    assert row["mainland_p"] == pytest.approx(ttest_ind(original, converted).pvalue, rel=1e-12)
