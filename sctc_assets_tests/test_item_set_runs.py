"""The term benchmark on any item set from `sctc run`/`sctc plan` (`--term-items`, `--varieties`, `--cue`,
`--extend-from`): a set becomes a benchmark of its own (`terms_<set>`, its own lineage, model × variety partitions),
bad input is refused before any model is asked (naming the file, row and column), a model that always answers one
region's form gives the exact prompted-variety × answered-region matrix, and the default set keeps its keys."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from sctc_assets.benchmarks import SPECS
from sctc_assets.cli import main
from sctc_assets.lib.term.item_sources import (ItemSetEntry, ItemSetError, load_entry, read_registry, registered_sets,
                                               remember)
from sctc_assets.lib.term.items import read_item_csv
from sctc_assets.lib.term.variety_prompts import build_variety_prompts
from sctc_assets.lib.varieties import load_catalog
from sctc_assets_tests.fakes import count_calls

# Made up for these tests: four concepts, regions cn/tw/hk; k3's Hong Kong form is Mainland's (shared), k2 has no
# Hong Kong form.
ITEMS = """concept_id,category,definition_zh_hans,definition_zh_hant,definition_source,term_cn,term_tw,term_hk
k1,交通,一种两人并排骑的车,,hand,双座车/并骑车,雙座車,孖座車
k2,,,用來裝書的布袋,hand,书布袋,書袋/書布袋,
k3,日用,用来擦桌子的布,用來擦桌子的布,,抹桌布,抹布,抹桌布
k4,日用,用来装垃圾的桶,,model:drafter,垃圾桶,垃圾筒,垃圾箱
"""
VARIETIES = ["zh-CN", "zh-TW", "zh-HK"]


@pytest.fixture
def items_file(tmp_path: Path) -> Path:
    path = tmp_path / "street_words.csv"
    path.write_text(ITEMS, encoding="utf-8")
    return path


def _taiwan_answers(items_file: Path, cue: str = "script") -> dict[str, str]:
    """prompt → the concept's first Taiwan form: a model that always answers Taiwan's word."""
    item_set = read_item_csv(items_file)
    prompts = build_variety_prompts(item_set, [load_catalog().variety(code) for code in VARIETIES], cue=cue)
    forms = {concept.concept_id: concept.forms_of("tw")[0] for concept in item_set.concepts}
    return dict(zip(prompts.prompt, prompts.concept_id.map(forms)))


@pytest.fixture
def taiwan_model(isolated_data_dir, items_file, tmp_path, monkeypatch) -> Path:
    calls = tmp_path / "calls.log"
    registry = tmp_path / "models.yaml"
    answers = json.dumps(_taiwan_answers(items_file), ensure_ascii=False)
    registry.write_text("models:\n  always-tw: {backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: tw, "
                        f"calls_file: '{calls}', default_answer: '不知道', answers: {answers}}}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    return calls


@pytest.mark.slow
def test_a_model_answering_taiwan_forms_gives_the_exact_matrix_for_every_variety(taiwan_model, items_file, tmp_path,
                                                                                 capfd):
    out = tmp_path / "out"
    command = ["run", "--benchmarks", "term", "--term-items", str(items_file), "--varieties", *VARIETIES,
               "--models", "always-tw", "--trials", "2", "--prompt-variants", "1", "--out", str(out)]
    assert main(command) == 0, capfd.readouterr()
    printed = capfd.readouterr()
    assert "varieties zh-TW, zh-HK receive identical prompts under the `script` region cue" in printed.err
    # the set's own lineage: terms_street_words_…, kept in the run registry for the UI and `sctc report`
    assert "street_words" in registered_sets()
    matrix = pd.read_parquet(out / "terms_street_words_matrix.parquet")
    cells = {(row.variety, row.answered_region): (row.k, row.n_answers)
             for row in matrix[matrix.prompt_variant == 1].itertuples()}
    # zh-CN: k1 雙座車 → tw; k2 書袋 → tw; k3 抹布 → tw; k4 垃圾筒 → tw; the 2 trials of 4 concepts = 8 answers
    assert {key: value for key, value in cells.items() if key[0] == "zh-CN"} == {
        ("zh-CN", "cn"): (0, 8), ("zh-CN", "tw"): (8, 8), ("zh-CN", "hk"): (0, 8), ("zh-CN", "none"): (0, 8)}
    # in Traditional script, Mainland's 双座车 is 雙座車: k1's answer is Mainland's form too (forms are compared across
    # scripts, and a shared form counts as each region's)
    assert {key: value for key, value in cells.items() if key[0] == "zh-TW"} == {
        ("zh-TW", "cn"): (2, 8), ("zh-TW", "tw"): (8, 8), ("zh-TW", "hk"): (0, 8), ("zh-TW", "none"): (0, 8)}
    # zh-HK asks only k1, k3, k4 (k2 has no Hong Kong form)
    assert {key: value for key, value in cells.items() if key[0] == "zh-HK"} == {
        ("zh-HK", "cn"): (2, 6), ("zh-HK", "tw"): (6, 6), ("zh-HK", "hk"): (0, 6), ("zh-HK", "none"): (0, 6)}
    rates = pd.read_parquet(out / "terms_street_words_rates.parquet")
    overall = rates[(rates.definitions == "all") & (rates.prompt_variant == 1)].set_index(["variety", "measure"])
    assert overall.loc[("zh-TW", "correct"), "pct"] == 100
    assert overall.loc[("zh-CN", "misaligned"), "pct"] == 100 and overall.loc[("zh-CN", "misaligned:tw"), "k"] == 8
    assert overall.loc[("zh-HK", "misaligned:tw"), "k"] == 6 and overall.loc[("zh-HK", "misaligned:cn"), "k"] == 2
    assert overall.loc[("zh-HK", "correct"), "k"] == 0
    # the model-written definition (k4) is reported apart
    assert {"all", "source", "model"} <= set(rates.definitions)
    contrasts = pd.read_parquet(out / "terms_street_words_contrasts.parquet")
    pair = contrasts[(contrasts.variety_a == "zh-CN") & (contrasts.variety_b == "zh-TW")
                     & (contrasts.measure == "correct")]
    assert len(pair) == 1 and float(pair.diff_pct_points.iloc[0]) == -100.0  # A, B in the run's order

    # zh-TW and zh-HK prompts are identical under `script`: asked once; 4 + 4 distinct prompts × 2 trials
    assert count_calls(taiwan_model) == 16
    assert main(command) == 0
    assert count_calls(taiwan_model) == 16  # everything from the response cache


def test_bad_item_files_are_refused_before_any_model_is_asked(taiwan_model, items_file, tmp_path, capfd):
    def refused(text: str | bytes, *extra: str) -> str:
        path = tmp_path / "bad.csv"
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        status = main(["run", "--benchmarks", "term", "--term-items", str(path), "--models", "always-tw",
                       "--trials", "1", *extra])
        err = capfd.readouterr().err
        assert status == 2, err
        return err

    lines = ITEMS.splitlines()
    duplicate = "\n".join([*lines, lines[1]]) + "\n"
    assert f"{tmp_path / 'bad.csv'}: row 6, column concept_id: duplicate concept_id 'k1' (first in row 2)" in \
        refused(duplicate)
    undeclared = ITEMS.replace("term_hk", "term_xx")
    assert "row 1, column term_xx: region 'xx' is not declared" in refused(undeclared)
    assert "row 1, column term_mo: missing, but variety zh-MO expects its region's forms there" in \
        refused(ITEMS, "--varieties", "zh-TW", "zh-MO")
    assert "row 3: not UTF-8" in refused(ITEMS.encode("utf-8")[:200] + "書".encode("big5") + b"\n")
    no_definition = ITEMS.replace("一种两人并排骑的车", "")
    assert (f"bad.csv: row 2, columns definition_zh_hans/definition_zh_hant: concept 'k1' has no definition (1 of 4 "
            f"concepts); `sctc terms define --items {tmp_path / 'bad.csv'} --model KEY` drafts them") in \
        refused(no_definition)
    assert "--varieties: unknown prompting variety 'zh-XX'" in refused(ITEMS, "--varieties", "zh-XX")
    assert count_calls(taiwan_model) == 0
    assert "bad" not in registered_sets()  # nothing kept of a refused set


def test_a_part_of_a_set_runs_under_its_own_name_and_is_kept_with_its_subset(taiwan_model, items_file, tmp_path,
                                                                             capfd):
    out = tmp_path / "out"
    assert main(["run", "--benchmarks", "term", "--term-items", str(items_file), "--concepts", "k4", "k2", "k1",
                 "--term-limit", "2", "--varieties", "zh-CN", "--models", "always-tw", "--trials", "1",
                 "--prompt-variants", "1", "--out", str(out), "--no-report"]) == 0, capfd.readouterr()
    name = next(name for name in registered_sets() if name.startswith("street_words_c"))
    assert name.endswith("_first2")
    entry = registered_sets()[name]
    assert (entry.concepts, entry.limit) == (("k4", "k2", "k1"), 2)
    responses = pd.read_parquet(out / f"terms_{name}_responses.parquet")
    assert sorted(responses.concept_id.unique()) == ["k1", "k2"]  # the set's order: k1, k2 of k1, k2, k4
    assert count_calls(taiwan_model) == 2
    assert [c.concept_id for c in load_entry(entry).item_set.concepts] == ["k1", "k2"]


@pytest.mark.parametrize("extra, message", [
    (["--trials", "0"], "error: --trials: must be in [1, 15], got 0"),
    (["--models", "nosuch"], "nosuch (see `sctc models`)"),
])
def test_a_run_rejected_for_its_options_says_so_once_and_keeps_nothing(taiwan_model, items_file, isolated_data_dir,
                                                                       capfd, extra, message):
    status = main(["run", "--benchmarks", "term", "--term-items", str(items_file), "--models", "always-tw", *extra])
    err = capfd.readouterr().err
    assert status == 2 and err.count(message) == 1, err
    assert "street_words" not in registered_sets()
    assert not (isolated_data_dir / "item_sets.yaml").exists()
    assert count_calls(taiwan_model) == 0


def test_the_set_is_a_benchmark_with_its_own_keys_and_the_default_set_keeps_its_own(items_file, tmp_path,
                                                                                  monkeypatch):
    registry = tmp_path / "sets.yaml"
    registry.write_text(f"item_sets:\n  street: {{source: '{items_file}', varieties: [zh-TW, zh-HK], cue: stated}}\n",
                        encoding="utf-8")
    entry = read_registry(registry)["street"]
    assert entry == ItemSetEntry("street", str(items_file), ("zh-TW", "zh-HK"), "stated")
    loaded = load_entry(entry)
    assert loaded.varieties == ("zh-TW", "zh-HK") and len(loaded.item_set) == 4
    from sctc_assets.benchmarks.item_sets import item_set_spec

    spec = item_set_spec(entry, loaded.varieties)
    assert spec.name == "terms_street" and spec.langs == ("zh-TW", "zh-HK") and spec.dimension == "variety"
    assert all(name.startswith("terms_street_") for name in spec.assets)
    assert spec.response_asset == "terms_street_responses"
    assert SPECS["term"].langs == ("zh_hans", "zh_hant") and "term_responses" in SPECS["term"].assets


@pytest.mark.parametrize("document, message", [
    ("item_sets:\n  Bad-Name: {source: x.csv}\n", "item set name 'Bad-Name'"),
    ("item_sets:\n  sctc: {source: x.csv}\n", "is the default set's"),
    ("item_sets:\n  ok: {source: x.csv, colour: red}\n", "item_sets.ok.colour: unknown key"),
    ("item_sets:\n  ok: {source: x.csv, cue: loud}\n", "item_sets.ok.cue: 'loud' is none of script, stated, both"),
    ("item_sets:\n  ok: {varieties: [zh-TW]}\n", "item_sets.ok.source: required"),
    ("sets: {}\n", "expected a top-level `item_sets:` mapping"),
])
def test_a_bad_registry_is_refused_naming_the_key(tmp_path, document, message):
    path = tmp_path / "sets.yaml"
    path.write_text(document, encoding="utf-8")
    with pytest.raises(ItemSetError, match=None) as error:
        read_registry(path)
    assert str(path) in str(error.value) and message in str(error.value)


def test_remember_keeps_one_entry_per_name_and_leaves_an_unchanged_file_alone(isolated_data_dir, items_file):
    entry = ItemSetEntry("street", str(items_file), ("zh-TW",))
    path = remember(entry)
    stamp = path.stat().st_mtime_ns
    assert remember(entry) == path and path.stat().st_mtime_ns == stamp
    remember(ItemSetEntry("street", str(items_file), ("zh-TW", "zh-HK")))
    assert read_registry(path)["street"].varieties == ("zh-TW", "zh-HK")


def test_a_registered_set_is_its_own_lineage_in_the_code_location(items_file, tmp_path):
    """Loaded as `dg`/`dagster dev` load the code location (a fresh process reading `$SCTC_ITEM_SETS`): the set's
    assets in a group of their own, partitioned by model × variety, none upstream of the default set's."""
    registry = tmp_path / "sets.yaml"
    registry.write_text(f"item_sets:\n  street: {{source: '{items_file}', varieties: [zh-TW, zh-HK]}}\n",
                        encoding="utf-8")
    script = (
        "import json\n"
        "import dagster as dg\n"
        "from sctc_assets.definitions import defs\n"
        "graph = defs.resolve_asset_graph()\n"
        "keys = sorted(k.to_user_string() for k in graph.get_all_asset_keys())\n"
        "responses = defs.resolve_assets_def(dg.AssetKey('terms_street_responses'))\n"
        "dims = {d.name: list(d.partitions_def.get_partition_keys()) if d.name != 'model' else None\n"
        "        for d in responses.partitions_def.partitions_defs}\n"
        "own = [k for k in graph.get_all_asset_keys() if k.to_user_string().startswith('terms_street_')]\n"
        "up = sorted({a.to_user_string() for k in own for a in graph.get_ancestor_asset_keys(k)})\n"
        "paper = graph.get_ancestor_asset_keys(dg.AssetKey('term_choice_tests'))\n"
        "down = sorted(a.to_user_string() for a in paper if a.to_user_string().startswith('terms_'))\n"
        "groups = {responses.group_names_by_key[dg.AssetKey('terms_street_responses')]}\n"
        "defs.resolve_job_def('terms_street_model_lang')\n"
        "print(json.dumps({'keys': keys, 'dims': dims, 'up': up, 'down': down, 'groups': sorted(groups)}))\n")
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SCTC_ITEM_SETS": str(registry)})
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    own = [key for key in found["keys"] if key.startswith("terms_street_")]
    assert {f"terms_street_{name}" for name in ("items", "prompts", "responses", "judgements", "labels",
                                                  "by_concept", "rates", "matrix", "contrasts", "power", "corpus_counts",
                                                  "corpus_term_counts")} == set(own)
    assert found["dims"] == {"model": None, "variety": ["zh-TW", "zh-HK"]} and found["groups"] == ["terms_street"]
    # its own lineage: nothing of another benchmark upstream of the set, nothing of the set upstream of the paper's
    # (but the observed served models, which every model's answers depend on)
    assert {key for key in found["up"] if not key.startswith("terms_street_")} == {"served_model"}
    assert found["down"] == []
    assert {"term_responses", "regional_terms"} <= set(found["keys"])


def test_extend_from_adds_hong_kong_and_macau_forms_to_the_default_set_and_says_how_many_matched(
        isolated_data_dir, extracted_upstream, csld_location, capfd):
    status = main(["plan", "--benchmarks", "term", "--extend-from", "csld", "--varieties", "zh-CN", "zh-TW", "zh-HK",
                   "zh-MO", "--trials", "1", "--prompt-variants", "1"])
    printed = capfd.readouterr()
    assert status == 0, printed.err
    # the upstream 110 with csld's forms, matched by their Taiwan form across scripts (docs/item-sets.md)
    assert "item set sctc_csld: 62 of 110 concepts matched csld" in printed.out
    assert "terms_sctc_csld" in printed.out and "zh-MO" in printed.out
    assert not (isolated_data_dir / "item_sets.yaml").exists()  # a plan writes nothing


# The judge's fixed verdicts per concept on the Taiwan forms `always-tw` answers: k1 Taiwan's, k2 none of the forms,
# k3 Taiwan's and Mainland's (as if it took 抹布 for both), k4 no verdict at all.
VERDICTS = {"k1": "判断：Taiwan", "k2": "这不是任何一个叫法。\n判断：无", "k3": "判断：Taiwan、Mainland",
            "k4": "我不确定。"}


def _judge_answers(items_file: Path) -> dict[str, str]:
    """judge prompt → the verdict for its concept, for every answer `always-tw` gives in every variety."""
    from sctc_assets.lib.term.judge import region_judge_prompt

    catalog = load_catalog()
    item_set = read_item_csv(items_file)
    concepts = {concept.concept_id: concept for concept in item_set.concepts}
    prompts = build_variety_prompts(item_set, [catalog.variety(code) for code in VARIETIES], cue="script")
    return {region_judge_prompt(row.prompt, concepts[row.concept_id].forms, row.variety,
                                concepts[row.concept_id].forms_of("tw")[0], catalog): VERDICTS[row.concept_id]
            for row in prompts.itertuples()}


@pytest.mark.slow
def test_a_judge_labels_an_item_set_by_the_region_it_names_and_is_asked_once(taiwan_model, items_file, tmp_path,
                                                                           isolated_data_dir, monkeypatch, capfd):
    judge_calls = tmp_path / "judge_calls.log"
    answers = json.dumps(_judge_answers(items_file), ensure_ascii=False)
    registry = Path(os.environ["SCTC_MODELS"])
    with registry.open("a", encoding="utf-8") as handle:
        handle.write(f"  judge-fake: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: judge, "
                     f"calls_file: '{judge_calls}', default_answer: '?', answers: {answers}}}\n")
    monkeypatch.delenv("SCTC_TERM_JUDGE", raising=False)
    command = ["run", "--benchmarks", "term", "--term-items", str(items_file), "--varieties", *VARIETIES,
               "--models", "always-tw", "--judge", "judge-fake", "--trials", "2", "--prompt-variants", "1",
               "--out", str(tmp_path / "out")]
    assert main(command) == 0, capfd.readouterr()
    capfd.readouterr()

    labels = pd.concat([pd.read_parquet(path) for path in
                        sorted((isolated_data_dir / "storage").rglob("*"))
                        if path.is_file() and "terms_street_words_labels" in str(path)], ignore_index=True)
    judged = labels[labels.label_source == "judge"]
    assert {(row.variety, row.concept_id): (row.label, row.regions_found)
            for row in judged.itertuples()} == {
        ("zh-CN", "k1"): ("misaligned", "tw"), ("zh-CN", "k2"): ("incorrect", ""),
        ("zh-CN", "k3"): ("correct", "cn,tw"),
        ("zh-TW", "k1"): ("correct", "tw"), ("zh-TW", "k2"): ("incorrect", ""), ("zh-TW", "k3"): ("correct", "tw,cn"),
        ("zh-HK", "k1"): ("misaligned", "tw"), ("zh-HK", "k3"): ("misaligned", "cn,tw"),
    }
    assert len(judged) == 2 * 8  # both trials of each; k4 (no verdict) left out
    rules = labels[labels.label_source == "rules"]
    assert len(rules) == 2 * 11  # the rules labels as they were, k4 included
    # the tables keep the sources apart
    rates = pd.read_parquet(tmp_path / "out" / "terms_street_words_rates.parquet")
    judge_rates = rates[(rates.label_source == "judge") & (rates.definitions == "all")].set_index(
        ["variety", "measure"])
    assert judge_rates.loc[("zh-CN", "correct"), ["k", "n"]].tolist() == [2, 6]
    assert judge_rates.loc[("zh-HK", "misaligned:cn"), ["k", "n"]].tolist() == [2, 4]
    rules_rates = rates[(rates.label_source == "rules") & (rates.definitions == "all")].set_index(
        ["variety", "measure"])
    assert rules_rates.loc[("zh-CN", "misaligned"), ["k", "n"]].tolist() == [8, 8]

    # one call per distinct judge prompt (the two trials' answers are the same): 4 + 4 + 3, then none
    assert count_calls(judge_calls) == 11
    assert main(command) == 0, capfd.readouterr()
    assert count_calls(judge_calls) == 11


def test_the_plan_builds_only_the_prompts_it_asks_and_selects_them_as_the_run_does(items_file, monkeypatch):
    """The design builds each variety's prompts for the trials and variants its models ask (not the 15 trials × 3
    variants of the prompts asset), and selects the same rows and requests as from the whole prompts table."""
    from sctc_assets.benchmarks import item_sets
    from sctc_assets.lib.model_registry import ModelEntry
    from sctc_assets.lib.term.requests import variety_requests

    entry = ItemSetEntry(name="street", source=str(items_file), varieties=tuple(VARIETIES), cue="both")
    spec = item_sets.item_set_spec(entry, entry.varieties)
    built: list[int] = []

    def counting(*args, **kwargs):
        table = build_variety_prompts(*args, **kwargs)
        built.append(len(table))
        return table

    monkeypatch.setattr(item_sets, "build_variety_prompts", counting)
    models = [ModelEntry("a", "openai", benchmarks={"term": {"trials": 2, "prompt_variants": [3, 1]}}),
              ModelEntry("b", "openai", benchmarks={"term": {"trials": 2, "prompt_variants": [1, 3]}}),
              ModelEntry("c", "openai", benchmarks={"term": {"trials": 1, "prompt_variants": [2]}})]
    designs = spec.design(models, {})
    whole = build_variety_prompts(read_item_csv(items_file), [load_catalog().variety(code) for code in VARIETIES],
                                  cue="both")
    assert [(design.model, design.partition) for design in designs] == [(m.key, v) for m in models for v in VARIETIES]
    for design in designs:
        trials, variants = design.settings
        selected, requests = variety_requests(whole, design.partition, trials, variants, benchmark=spec.name)
        pd.testing.assert_frame_equal(design.selected, selected)
        assert design.requests == requests and requests
    assert len(built) == 2 * len(VARIETIES)  # models a and b ask the same: built once
    assert sum(built) == sum(len(design.selected) for design in designs if design.model != "b") < len(whole) / 5


def test_a_set_read_from_a_local_file_is_read_once_per_process_until_the_file_changes(items_file, monkeypatch):
    from sctc_assets.lib.term import item_sources

    reads: list[str] = []
    real = item_sources.read_item_csv
    monkeypatch.setattr(item_sources, "read_item_csv", lambda path, **kwargs: reads.append(str(path)) or
                        real(path, **kwargs))
    entry = ItemSetEntry(name="street_once", source=str(items_file), varieties=("zh-CN", "zh-TW"))
    first = load_entry(entry)
    assert load_entry(entry) == first and load_entry(entry, require_definitions=False) == first
    assert len(reads) == 1
    items_file.write_text(ITEMS.replace("垃圾桶", "垃圾柜"), encoding="utf-8")  # the same size, maybe the same mtime
    changed = load_entry(entry)
    assert len(reads) == 2 and changed.item_set.concept("k4").forms_of("cn") == ("垃圾柜",)
    with pytest.raises(ItemSetError, match="zh-MO|term_mo"):  # the checks still run on a set read before
        load_entry(ItemSetEntry(name="street_once", source=str(items_file), varieties=("zh-CN", "zh-MO")))
    items_file.write_text(ITEMS.replace("用来装垃圾的桶,,", ",,"), encoding="utf-8")
    with pytest.raises(ItemSetError, match="k4"):
        load_entry(entry)
    assert load_entry(entry, require_definitions=False).item_set.concept("k4").definition_zh_hans is None
