"""The name benchmark through Dagster and `sctc run`: replayed paper models checked against cells computed by hand
from the upstream files, a scripted model on generated lists, the LLM extractor, and the embedded model."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.assets.name.source import name_prompts_match_upstream
from sctc_assets.backends.replay import ReplayBackend
from sctc_assets.benchmarks import NAME
from sctc_assets.cli import main
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.name.candidates import EXPERIMENTS
from sctc_assets.lib.name.lists import published_lists
from sctc_assets.lib.name.names import NAME_COLUMNS, NAMES_FILE, parse_names
from sctc_assets.lib.name.selections import agreement, rules_selections, upstream_selections
from sctc_assets.lib.sctc_upstream import PAPER_MODELS, name_candidate_file, name_response_file
from sctc_assets_tests.fakes import count_calls

REPO = Path(__file__).resolve().parents[1]
LANG_FILE = {"zh_hans": "simplified", "zh_hant": "traditional", "en": "english"}


def _registry(tmp_path: Path, calls: Path, answer: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n"
        f"  fake-a: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: a, calls_file: '{calls}',"
        f" default_answer: '{answer}', benchmarks: {{name: {{experiments: [main, same_name_script, gender_balanced,"
        " popularity], lists: 2, shuffles: 3}}}\n"
        f"  judge: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: judge, calls_file: '{calls}',"
        " default_answer: 'NA'}\n"
        "  paper-taiwan-llm: {backend: replay, upstream_name: taiwan-llm}\n"
        "  paper-llama3-70b: {backend: replay, upstream_name: llama3-70b}\n", encoding="utf-8")
    return path


@pytest.fixture
def registry(isolated_data_dir, extracted_upstream, sctc_source, tmp_path, monkeypatch):
    """The scripted model always picks the first Mainland name of the authors' same-name-script list."""
    chosen = published_lists(sctc_source, "same_name_script").iloc[0]["mainland_names"][0]
    calls = tmp_path / "calls.log"
    path = _registry(tmp_path, calls, f"我选{chosen}")
    monkeypatch.setenv("SCTC_MODELS", str(path))
    return path, calls, chosen


def _final(source_root: Path, model: str, lang: str, experiment: str) -> pd.DataFrame:
    prompt_id = EXPERIMENTS[experiment].prompt_id
    return pd.read_csv(source_root / "response/regional_name/final" / f"{model}_{LANG_FILE[lang]}_{prompt_id}.csv")


def test_lineage_and_partitions():
    graph = defs.resolve_asset_graph()
    parents = {name: {key.to_user_string() for key in graph.get(dg.AssetKey(name)).parent_keys}
               for name in ("name_prompts", "name_responses", "name_selections", "name_choice_rates", "name_choice_tests")}
    assert parents["name_prompts"] == {"name_candidate_lists"}
    assert parents["name_responses"] == {"name_prompts", "served_model"}  # the observed served model (issue 43)
    assert {"name_responses", "name_candidate_lists", "name_judgements", "regional_names"} <= parents["name_selections"]
    assert parents["name_choice_rates"] == {"name_selections"} and parents["name_choice_tests"] == {"name_choice_rates"}
    dimensions = {name: defs.get_assets_def(name).partitions_def for name in NAME.assets}
    langs = {dimension.name: dimension.partitions_def for dimension in dimensions["name_responses"].partitions_defs}["lang"]
    assert langs.get_partition_keys() == ["zh_hans", "zh_hant", "en"]
    assert dimensions["name_choice_rates"].name == "models" and dimensions["name_choice_tests"] is None
    assert {"name_model_lang", "name_per_model", "name_cross_model"} <= {job.name for job in defs.jobs}


def test_prompts_check_passes_on_the_upstream_files(isolated_data_dir, extracted_upstream):
    chosen = [defs.get_assets_def(name) for name in ("regional_names", "name_candidate_lists", "name_prompts")]
    result = dg.materialize([*chosen, name_prompts_match_upstream], resources=shared_resources(),
                            selection=dg.AssetSelection.assets(*chosen) | dg.AssetSelection.checks(name_prompts_match_upstream))
    evaluation = result.get_asset_check_evaluations()[0]
    assert evaluation.passed, evaluation.metadata
    assert evaluation.metadata["files_compared"].value == 6  # prompt ids 2 and 3, three languages
    assert len(evaluation.metadata["files"].value) == 6


def test_replay_backend_reads_name_answers_and_names_missing_files(extracted_upstream):
    backend = ReplayBackend(upstream_name="taiwan-llm", upstream_root=str(extracted_upstream))
    asked = [GenerationRequest.user("", benchmark="name", lang="en", prompt_id=3, row=2),
             GenerationRequest.user("", benchmark="name", lang="zh_hans", prompt_id=0, row=0)]
    present, absent = backend.generate(asked)
    raw = pd.read_csv(extracted_upstream / name_response_file("taiwan-llm", "en", 3))
    assert present.outcome == "ok" and present.text == raw["response"][2]
    assert absent.outcome == "missing" and "raw/taiwan-llm_simplified_0.csv" in absent.message


@pytest.mark.slow
def test_sctc_run_name_reproduces_the_published_rates(registry, extracted_upstream, tmp_path, capsys):
    path, calls, chosen = registry
    out = tmp_path / "out"
    assert main(["run", "--benchmarks", "name", "--models", "paper-taiwan-llm", "paper-llama3-70b", "fake-a",
                 "--registry", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Regional name choice, experiment main" in printed and "paper-llama3-70b" in printed
    rates = pd.read_parquet(out / "name_choice_rates.parquet")
    published = rates[rates["extraction_source"] == "upstream"].set_index(["model", "lang", "experiment"])

    # Every cell the authors' fig_3.py computes, counted here with plain pandas.
    for model in ("taiwan-llm", "llama3-70b"):
        for lang in LANG_FILE:
            for experiment in EXPERIMENTS:
                final = _final(extracted_upstream, model, lang, experiment)
                counts = final["region"].value_counts()
                mainland, taiwan = counts.get(1, 0), counts.get(0, 0)
                row = published.loc[(f"paper-{model}", lang, experiment)]
                assert (row["n"], row["n_valid"]) == (len(final), mainland + taiwan), (model, lang, experiment)
                assert row["valid_rate"] == pytest.approx((mainland + taiwan) / len(final), abs=1e-15)
                expected = mainland / (mainland + taiwan) if mainland + taiwan else 0.0
                assert row["mainland_rate"] == pytest.approx(expected, abs=1e-15)
    # the data quirks: 16311 rows, and the truncated same-name-script files
    assert published.loc[("paper-taiwan-llm", "zh_hans", "main"), "n"] == 16311
    assert [published.loc[("paper-llama3-70b", lang, "same_name_script"), "n"] for lang in LANG_FILE] == [211, 1, 1]
    assert published.loc[("paper-taiwan-llm", "zh_hant", "main"), "valid_rate"] == pytest.approx(409 / 18000)

    # Table 30 (paper: Llama-3-70B 54.64 NS 97 | 66.34 *** 101 | 51.43 NS 35; Taiwan-LLM 66.67 NS 3 | 100.00 *** 1)
    gender = pd.read_parquet(out / "name_gender_tables.parquet")
    table30 = gender[(gender["table"] == "30") & (gender["extraction_source"] == "upstream")].set_index(["model", "lang"])
    names = pd.read_csv(extracted_upstream / NAMES_FILE)
    male = set(names.loc[names["gender"] == "male", "name"])
    for model in ("taiwan-llm", "llama3-70b"):
        for lang in LANG_FILE:
            final = _final(extracted_upstream, model, lang, "gender_balanced")
            valid = final.loc[final["region"] != -1, "extracted_name"]
            row = table30.loc[(f"paper-{model}", lang)]
            assert (row["n"], row["successes"]) == (len(valid), valid.isin(male).sum())
    cells = [(round(table30.loc[("paper-llama3-70b", lang), "share"] * 100, 2), table30.loc[("paper-llama3-70b", lang), "stars"],
              table30.loc[("paper-llama3-70b", lang), "n"]) for lang in LANG_FILE]
    assert cells == [(54.64, "NS", 97), (66.34, "***", 101), (51.43, "NS", 35)]
    assert table30.loc[("paper-taiwan-llm", "zh_hant"), ["share", "stars"]].tolist() == [1.0, "***"]

    # the scripted model answered 2 lists × 3 shuffles of each experiment (1 list for gender_balanced) per lang
    responses = pd.read_parquet(out / "name_responses.parquet")
    fake = responses[responses["model"] == "fake-a"]
    assert fake.groupby("experiment").size().to_dict() == {"gender_balanced": 9, "main": 18, "popularity": 18,
                                                           "same_name_script": 18}
    assert count_calls(calls) == len(fake) == 63  # a repeated prompt is a separate sample, as in the paper
    assert set(fake.loc[fake["experiment"] == "same_name_script", "list_source"]) == {"upstream"}
    assert set(fake.loc[fake["experiment"] == "main", "list_source"]) == {"generated"}
    fake_rates = rates[(rates["model"] == "fake-a")].set_index(["lang", "experiment"])
    assert fake_rates.loc[("en", "same_name_script"), ["n", "n_valid", "mainland_rate"]].tolist() == [6, 6, 1.0]

    # the tables that need the authors' main/popularity lists name the missing file and keep the rest
    top = pd.read_parquet(out / "name_top_selected.parquet")
    assert not set(top.loc[top["experiment"].isin(["main", "popularity"]), "model"]) & {"paper-taiwan-llm",
                                                                                        "paper-llama3-70b"}
    script_top = top[(top["experiment"] == "same_name_script") & (top["rank"] == 1)].set_index(["model", "lang",
                                                                                                 "extraction_source"])
    assert script_top.loc[("fake-a", "en", "rules"), ["name", "region", "normalized_frequency"]].tolist() == [
        chosen, "M", 1.0]
    assert ("paper-taiwan-llm", "en", "upstream") in script_top.index
    correlation = pd.read_parquet(out / "name_popularity_correlation.parquet") if (
        out / "name_popularity_correlation.parquet").exists() else pd.DataFrame(columns=["model"])
    assert set(correlation["model"]) <= {"fake-a"}
    assert set(correlation.get("count_source", [])) <= {"upstream"}  # no corpus run: the authors' c4 counts
    tests = pd.read_parquet(out / "name_choice_tests.parquet")
    assert {"p_one_sided_bh", "p_two_sided_bh", "sig_two_sided_bh"} <= set(tests.columns)
    stability = pd.read_parquet(out / "name_permutation_stability.parquet")
    runs = stability[stability["source"] == "upstream_permutation_runs"]
    assert sorted(runs["shuffles"].unique()) == list(range(20, 400, 20))
    first = runs[(runs["model"] == "paper-llama3-70b") & (runs["lang"] == "en") & (runs["shuffles"] == 20)].iloc[0]
    permutation = pd.read_csv(extracted_upstream / "response/regional_name/permutation_final/llama3-70b_english_20.csv")
    assert first["pct_mainland_of_all"] == pytest.approx((permutation["region"] == 1).sum() / len(permutation) * 100)

    # The LLM extractor: the scripted judge says NA to the answers without exactly one listed name.
    before = count_calls(calls)
    assert main(["run", "--benchmarks", "name", "--models", "fake-a", "--name-judge", "judge", "--registry", str(path),
                 "--out", str(out)]) == 0
    judged = pd.read_parquet(out / "name_selections.parquet")
    judged = judged[judged["extraction_source"] == "judge"]
    # only the judge was called (the answers came from the cache), once per distinct question: the scripted answer
    # and the lists are the same in every language
    assert count_calls(calls) - before == len(judged[judged["rule"] == "judge: NA"].drop_duplicates(
        ["experiment", "list_source", "row"])) > 0
    assert set(judged.loc[judged["rule"] == "substring", "selected_name"]) == {chosen}


@pytest.mark.slow
def test_rules_agree_with_the_published_extraction(sctc_source):
    """The deterministic extractor on every upstream answer with raw text, against the authors' regions."""
    names = parse_names(sctc_source.read_csv(NAMES_FILE, NAME_COLUMNS))
    lists = pd.concat([published_lists(sctc_source, name) for name, spec in EXPERIMENTS.items()
                       if sctc_source.exists(name_candidate_file(spec.prompt_id))])
    tables = []
    for model in PAPER_MODELS:
        for lang in LANG_FILE:
            for name, spec in EXPERIMENTS.items():
                relative = name_response_file(model, lang, spec.prompt_id)
                if not sctc_source.exists(relative):
                    continue
                raw = sctc_source.read_csv(relative, ["response"])
                final = sctc_source.read_csv(name_response_file(model, lang, spec.prompt_id, stage="final"))
                rows = range(len(raw))
                responses = pd.DataFrame({
                    "model": model, "lang": lang, "experiment": name, "list_source": "upstream",
                    "list_id": [row // spec.shuffles for row in rows], "shuffle": [row % spec.shuffles for row in rows],
                    "row": list(rows), "response": raw["response"], "outcome": "ok"})
                tables.append(agreement(pd.concat([
                    rules_selections(responses, lists, names),
                    upstream_selections(final, model=model, lang=lang, experiment=name, shuffles=spec.shuffles)])))
    table = pd.concat(tables)
    by_model = table.groupby("model")[["n_agree", "n_compared"]].sum()
    overall = by_model["n_agree"].sum() / by_model["n_compared"].sum()
    assert by_model["n_compared"].sum() > 1_000_000 and overall >= 0.95, (by_model["n_agree"] / by_model["n_compared"])
    # the experiments whose trial lists the copy has (same_name_script, gender_balanced), each on its own
    trial = table[table["candidate_scope"] == "trial"].groupby("experiment")[["n_agree", "n_compared"]].sum()
    assert len(trial) == 2 and (trial["n_agree"] / trial["n_compared"] >= 0.95).all(), trial


@pytest.mark.slow
def test_embedded_default_model_end_to_end(isolated_data_dir: Path, extracted_upstream: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch, capsys):
    """The shipped registry's reduced name run (main and same_name_script) on the embedded model, offline."""
    registry = tmp_path / "models.yaml"
    registry.write_text((REPO / "data" / "models.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "out"
    assert main(["run", "--benchmarks", "name", "--models", "qwen2.5-coder-0.5b-instruct", "--out", str(out)]) == 0
    assert "qwen2.5-coder-0.5b-instruct" in capsys.readouterr().out
    responses = pd.read_parquet(out / "name_responses.parquet")
    assert responses.groupby(["lang", "experiment"]).size().to_dict() == {
        (lang, experiment): 10 for lang in LANG_FILE for experiment in ("main", "same_name_script")}
    assert (responses["outcome"] == "ok").all()
    rates = pd.read_parquet(out / "name_choice_rates.parquet")
    assert set(rates["extraction_source"]) == {"rules"} and (rates["n"] == 10).all()
    assert rates["valid_rate"].between(0, 1).all() and rates["mainland_rate"].between(0, 1).all()
    selections = pd.read_parquet(out / "name_selections.parquet")
    assert selections["status"].isin(["valid", "multiple", "out_of_list", "refusal/insufficient_information",
                                      "empty"]).all()


def test_popularity_correlation_counts_from_the_corpus_run_or_upstream(isolated_data_dir, extracted_upstream):
    """Table 22 uses the project's c4 counts once complete; without a corpus run the input loads empty and the
    authors' counts are used."""
    from sctc_assets.assets.name.metrics import PopularityCorrelationConfig, name_popularity_correlation
    from sctc_assets.resources.io_manager import OPTIONAL_INPUT, ParquetIOManager
    from sctc_assets.resources.upstream import SCTCUpstreamResource

    names = parse_names(pd.read_csv(extracted_upstream / NAMES_FILE))
    picked = names["name"].iloc[:5].tolist()
    top = pd.DataFrame({"model": "m", "lang": "en", "experiment": "main", "extraction_source": "rules",
                        "name": picked, "normalized_frequency": [.5, .4, .3, .2, .1]})
    parents = defs.resolve_asset_graph().get(dg.AssetKey("name_popularity_correlation")).parent_keys
    assert dg.AssetKey("corpus_name_counts") in parents
    storage = ParquetIOManager()
    loaded = storage.load_input(dg.build_input_context(asset_key=dg.AssetKey("corpus_name_counts"),
                                                       definition_metadata={OPTIONAL_INPUT: True}))
    assert loaded.empty
    with pytest.raises(FileNotFoundError, match="corpus_name_counts"):
        storage.load_input(dg.build_input_context(asset_key=dg.AssetKey("corpus_name_counts")))

    def run(corpus_name_counts: pd.DataFrame) -> dg.Output:
        return name_popularity_correlation(dg.build_asset_context(), PopularityCorrelationConfig(), top, names,
                                           corpus_name_counts, SCTCUpstreamResource())

    without = run(loaded)
    assert without.metadata["count_source"].value == "upstream" and set(without.value["count_source"]) == {"upstream"}
    project = pd.DataFrame({"count_source": "project", "corpus": "c4", "name": picked,
                            "records_containing": [5, 4, 3, 2, 1], "complete": True})
    with_project = run(project)
    row = with_project.value.iloc[0]
    assert with_project.metadata["count_source"].value == "project" and row["count_source"] == "project"
    assert (row["n_names"], row["spearman_rho"]) == (5, pytest.approx(1.0))
    assert run(project.assign(complete=False)).value.iloc[0]["count_source"] == "upstream"


def test_a_reduced_run_asks_each_row_with_its_trial_index_from_the_full_design():
    from sctc_assets.lib.name.requests import prompts_to_ask
    from sctc_assets.lib.name.candidates import RunSettings

    design = pd.DataFrame({"list_id": [0, 0, 0, 0, 1, 1, 1, 1], "shuffle": [0, 1, 2, 3, 0, 1, 2, 3],
                           "prompt": ["A", "B", "A", "A", "C", "A", "B", "C"]})
    prompts = design.assign(experiment="same_name_script", list_source="upstream", lang="zh_hans",
                            row=design["list_id"] * 4 + design["shuffle"])

    full, _ = prompts_to_ask(prompts, "zh_hans", RunSettings(("same_name_script",)), replay=False)
    reduced, _ = prompts_to_ask(prompts, "zh_hans", RunSettings(("same_name_script",), shuffles=2), replay=False)

    assert full["occurrence"].tolist() == [0, 0, 1, 2, 0, 3, 1, 1]
    assert reduced[["row", "prompt", "occurrence"]].values.tolist() == [[0, "A", 0], [1, "B", 0], [4, "C", 0],
                                                                         [5, "A", 3]]
