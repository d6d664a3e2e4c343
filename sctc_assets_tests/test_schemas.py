"""The column schemas are the one source: the UI's schema, docs/tables.md and the benchmark pages' asset tables
agree with them, and the tables the assets store match them (name, reviews and corpus here; term and sovereignty in
test_freshness)."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.benchmarks import CORPUS
from sctc_assets.benchmarks import NAME
from sctc_assets.benchmarks import REVIEWS
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.benchmarks import BUILT_IN_SCHEMAS as TABLE_SCHEMAS
from sctc_assets.benchmarks.tables import reference
from sctc_assets.lib.schemas import Column, TableSchemaSpec, frame_problems
from sctc_assets.running.runner import Runner
from sctc_assets_tests.schema_check import stored_table_problems

REPO = Path(__file__).resolve().parents[1]
# The asset tables of the benchmark pages (docs/benchmarks/*.md: `| `asset` | partitions | contents |`).
BENCHMARK_PAGES = "\n".join(page.read_text(encoding="utf-8")
                            for page in sorted((REPO / "docs" / "benchmarks").glob("*.md")))
GRAPH = defs.resolve_asset_graph()


def test_docs_tables_md_is_generated_from_the_schemas():
    """Regenerate with `python -m sctc_assets.benchmarks.tables > docs/tables.md`."""
    assert (REPO / "docs" / "tables.md").read_text(encoding="utf-8") == reference()


def test_the_ui_shows_the_declared_schema_before_any_materialization():
    for name, spec in TABLE_SCHEMAS.items():
        shown = GRAPH.get(dg.AssetKey(name)).metadata["dagster/column_schema"]
        assert [(c.name, c.type, c.description) for c in shown.columns] == \
               [(c.name, c.type, c.description) for c in spec.columns]


def _page_rows() -> dict[str, list[str]]:
    rows = {}
    for line in BENCHMARK_PAGES.splitlines():
        match = re.match(r"^\| `([a-z_0-9]+)` \| (.*) \|$", line)
        if match and match.group(1) in TABLE_SCHEMAS:
            rows[match.group(1)] = [match.group(1), *match.group(2).split(" | ")]
    return rows


def _partitioning(name: str) -> str:
    partitions = GRAPH.get(dg.AssetKey(name)).partitions_def
    if partitions is None:
        return "–"
    if isinstance(partitions, dg.MultiPartitionsDefinition):
        return "model × " + next(d.name for d in partitions.partitions_defs if d.name != "model")
    return "model" if partitions.name == "models" else "corpus shard"


def test_the_benchmark_pages_name_every_asset_its_partitions_and_only_declared_columns():
    rows = _page_rows()
    assert sorted(rows) == sorted(TABLE_SCHEMAS)
    for name, (_, partitions, contents) in rows.items():
        assert partitions.startswith(_partitioning(name)), f"docs/benchmarks row {name}: partitions {partitions!r}"
        # A backticked list of identifiers ("`model, lang, prompt_variant`") lists columns of the table.
        for span in re.findall(r"`([^`]+)`", contents):
            items = [item.strip() for item in span.split(",")]
            if len(items) > 1 and all(re.fullmatch(r"[a-z][a-z0-9_]*", item) for item in items):
                unknown = [item for item in items if item not in TABLE_SCHEMAS[name].names]
                assert not unknown, f"docs/benchmarks row {name} names columns its schema lacks: {unknown}"


def test_a_stored_table_is_checked_column_by_column():
    spec = TableSchemaSpec("t", (Column("model", "string", "m"), Column("n", "int", "n"),
                                 Column("rate", "float", "r"), Column("names", "list<string>", "l"),
                                 Column("seed", "int", "s", optional=True)))
    good = pd.DataFrame({"model": ["a", None], "n": [1, 2], "rate": [0.5, 1], "names": [["x"], []]})
    assert frame_problems(good, spec) == []
    assert frame_problems(good.astype({"n": "float64"}), spec) == []  # NaN-widened ints that are whole
    bad = good.assign(n=["1", "2"], rate=[True, False], extra=1).drop(columns="names")
    assert sorted(frame_problems(bad, spec)) == ["missing column names", "n: declared int, stored as str",
                                                 "rate: declared float, stored as bool", "undeclared column extra"]
    assert frame_problems(good.assign(n=[1.5, 2.0]), spec) == ["n: declared int, stored as float64"]
    assert frame_problems(pd.DataFrame(), spec) == []  # written empty: nothing to report


def test_a_column_needs_a_known_type_and_a_description():
    with pytest.raises(ValueError, match="unknown type"):
        Column("x", "integer", "x")
    with pytest.raises(ValueError, match="description"):
        Column("x", "int", " ")


@pytest.fixture
def small_run(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch):
    registry = tmp_path / "models.yaml"
    # 王秀梅 is on the seeded `main` list, so the answers are usable (asset check `usable_answers`); fake-r rates
    # every review 8, a valid prediction.
    registry.write_text(
        "models:\n"
        "  fake-a: {backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: a, default_answer: '我选王秀梅',"
        " benchmarks: {name: {experiments: [main, same_name_script], lists: 2, shuffles: 2}}}\n"
        "  fake-r: {backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: r, default_answer: '8',"
        " benchmarks: {reviews: {max_pairs: 4}}}\n",
        encoding="utf-8")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(f'{{"text": "{text}"}}\n' for text in ["复印件和影本", "王秀英", "滑鼠"] * 3),
                      encoding="utf-8")
    corpora = tmp_path / "corpora.yaml"
    corpora.write_text(f"corpora:\n  local: {{script: mixed, shards: 2, files: ['{corpus}']}}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    monkeypatch.setenv("SCTC_CORPORA", str(corpora))
    monkeypatch.delenv("SCTC_REVIEWS", raising=False)
    return isolated_data_dir


@pytest.mark.slow
def test_stored_name_review_and_corpus_tables_match_their_schemas(small_run):
    resources = shared_resources()
    with dg.instance_for_test() as instance:
        runner = Runner(defs, instance, resources, log=lambda line: None)
        # tokenization_counts loads real tokenizers (minutes); its table is checked by the tokenization tests' run
        name_plan = NAME.with_stages(inputs=tuple(n for n in NAME.inputs if n != "tokenization_counts"))
        for plan, options in ((name_plan, {}), (REVIEWS, {}), (CORPUS, {"corpora": ["local"]})):
            models = {REVIEWS.name: ["fake-r"], CORPUS.name: []}.get(plan.name, ["fake-a"])
            report = runner.run(plan, models, options)
            assert report.ok, report.failures
    problems = stored_table_problems(resources["io_manager"])
    checked = set(problems)
    assert {"name_responses", "name_selections", "name_choice_rates", "name_list_clustered_rates",
            "name_significance_robustness", "name_explanation_words", "name_talent_examples",
            "name_invalid_class_validation", "review_predictions", "review_metrics", "review_paired_cis",
            "review_significance_robustness", "corpus_counts", "corpus_term_frequency_tables"} <= checked
    assert {table: found for table, found in problems.items() if found} == {}
    root = resources["io_manager"]._root()  # the right-unit tables hold rows, so their columns were checked
    assert all(len(pd.read_parquet(root / f"{name}.parquet")) for name in ("name_significance_robustness",
                                                                           "review_significance_robustness"))
