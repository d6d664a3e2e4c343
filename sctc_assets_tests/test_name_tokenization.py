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
from sctc_assets.lib.conversion import convert
from sctc_assets.lib.name import tokenization as tk
from sctc_assets.lib.name.names import NAME_COLUMNS, NAMES_FILE, parse_names
from sctc_assets.resources.io_manager import ParquetIOManager
from sctc_assets.resources.upstream import SCTCUpstreamResource

REPO = Path(__file__).resolve().parents[1]
REGISTRY = REPO / "data" / "tokenizers.yaml"
# Shared by the tests (and by `sctc run` on this checkout): downloads happen once.
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


def test_gguf_vocabulary_gives_llama_cpps_reference_ids():
    """llama.cpp ships, next to each vocab GGUF, test strings and the ids the original tokenizer gives them."""
    archive = tk.download_distribution(SDIST, FILES_DIR / "downloads", sdist=True)
    member = "vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf"
    texts = tk.extract_member(archive, member + ".inp", FILES_DIR / "extracted").read_text(encoding="utf-8")
    ids = tk.extract_member(archive, member + ".out", FILES_DIR / "extracted").read_text(encoding="utf-8")
    pairs = list(zip(texts.split("\n__ggml_vocab_test__\n"), ids.split("\n")))
    encode = tk.load_tokenizer(tk.TokenizerEntry(key="llama-2", kind="transformers", settings={
        "file": {"pypi": SDIST, "sdist": True, "member": member}}), FILES_DIR)
    # transformers' GGUF conversion treats a leading space differently from llama.cpp; names never start with one.
    checked = [(text, expected) for text, expected in pairs if text and not text[0].isspace()]
    assert len(checked) >= 20 and any("我想在apple工作" in text for text, _ in checked)
    for text, expected in checked:
        assert encode(text) == [int(token) for token in expected.split()], text


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
