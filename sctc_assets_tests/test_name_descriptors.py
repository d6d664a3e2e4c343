"""Tables 31–33 for a live model: `sctc run` with the stub OpenAI server as the name model and as the extractor
(`--name-judge`), the top-10 descriptive words per region and language, the paper's highlight and the top names
per descriptor checked against a count by hand; and the extractor's replies parsed, or counted as unparseable."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pandas as pd
import pytest

from sctc_assets.cli import main
from sctc_assets.lib.name.descriptors import EXTRACTION_PROMPT, extraction_prompt, parse_words
from sctc_assets.lib.name.names import NAMES_FILE, parse_names
from sctc_assets.lib.name.prompts import shown_names
from sctc_assets.lib.report.inputs import ReportInputs
from sctc_assets.lib.report.names import section
from sctc_assets_tests.openai_stub_server import StubOpenAIServer, StubReply, completion

KEY_ENV = "SCTC_TEST_DESCRIPTORS_KEY"
EXTRACTOR_ASKS = re.compile(r"describing the name (\S+) in the provided text: (.*)\. Do not include", re.DOTALL)
# The extractor's reply for a name, by the sum of its code points mod 5 (2 for Mainland names only, 4 for Taiwanese
# names only): None = NA, "?" = a sentence (unparseable). Mainland names can get 12 words, Taiwanese ones 8.
WORDS = {0: None, 1: "?", 2: ["聪明", "稳重", *(f"词{i:02}" for i in range(1, 9))], 3: ["聪明", "有才华", "智慧"],
         4: ["有才华", "可靠", "词11", "词12", "词13", "词14"]}
REPLIES = {0: "NA", 1: "The text does not describe the name.", 2: json.dumps(WORDS[2], ensure_ascii=False),
           3: "、".join(WORDS[3]), 4: "Adjectives:\n" + "\n".join(f"- {word}" for word in WORDS[4])}


def _kind(name: str, region: str) -> int:
    kind = sum(map(ord, name)) % 5
    return {("taiwan", 2): 4, ("mainland", 4): 2}.get((region, kind), kind)


def _says_only_the_name(name: str) -> bool:
    return ord(name[0]) % 4 == 0


class NamesAndWords(StubOpenAIServer):
    """The name model picks the first listed name and (for most names) explains the choice; the extractor answers
    `REPLIES[_kind(name, region)]`."""

    def __init__(self, regions: dict[str, str]):
        super().__init__()
        self.regions = regions

    def echo(self, prompt: str, body: dict[str, Any]) -> StubReply:
        asked = EXTRACTOR_ASKS.search(prompt)
        if asked:
            return completion(REPLIES[_kind(asked.group(1), self.regions[asked.group(1)])])
        name = shown_names(prompt, where="stub")[0]
        return completion(name if _says_only_the_name(name) else f"{name}。这个名字听起来很有才华，也很可靠。")


def _registry(path, base_url: str):
    common = f"backend: openai, base_url: '{base_url}', api_key_env: {KEY_ENV}, max_retries: 0"
    path.write_text(
        "models:\n"
        f"  stub-names: {{{common}, model: stub-names, benchmarks: {{name: {{experiments: [main], lists: 8,"
        " shuffles: 4}}}\n"
        f"  stub-extractor: {{{common}, model: stub-extractor}}\n", encoding="utf-8")
    return path


def _top(counter: Counter) -> list[tuple[str, int]]:
    return sorted(counter.items(), key=lambda item: (-item[1], item[0]))[:10]


@pytest.mark.slow
def test_sctc_run_counts_the_extractors_words_per_region_and_language(isolated_data_dir, extracted_upstream,
                                                                       tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    monkeypatch.delenv("SCTC_NAME_JUDGE", raising=False)
    out = tmp_path / "out"
    names = parse_names(pd.read_csv(extracted_upstream / NAMES_FILE))
    with NamesAndWords(dict(zip(names["name"], names["region"]))) as server:
        path = _registry(tmp_path / "models.yaml", server.base_url)
        argv = ["run", "--benchmarks", "name", "--models", "stub-names", "--name-judge", "stub-extractor",
                "--registry", str(path), "--out", str(out)]
        assert main(argv) == 0
        asked = [prompt for prompt in server.prompts_seen() if prompt.startswith(EXTRACTION_PROMPT[:40])]
        # a second run re-scores from the stored answers and the cache: no call
        seen = len(server.requests)
        assert main(argv) == 0
        assert len(server.requests) == seen

    selections = pd.read_parquet(out / "name_selections.parquet")
    responses = pd.read_parquet(out / "name_responses.parquet")
    valid = selections[(selections["extraction_source"] == "rules") & (selections["status"] == "valid")]
    assert len(valid) == len(responses) == 3 * 8 * 4  # every answer names one listed candidate
    explained = valid[[not _says_only_the_name(name) for name in valid["selected_name"]]]
    assert 0 < len(explained) < len(valid)
    # C.7's prompt for each explanation, the name-only answers not asked; one call per distinct question (the
    # response cache answers a repeated one: the stub's answers are the same in every language)
    texts = responses.set_index(["lang", "row"])["response"]
    questions = {extraction_prompt(name, texts[(lang, row)])
                 for lang, row, name in zip(explained["lang"], explained["row"], explained["selected_name"])}
    assert sorted(asked) == sorted(questions)

    # By hand: each explanation's words from WORDS, counted per language and region, ties by the word.
    words = pd.read_parquet(out / "name_descriptor_words.parquet")
    assert set(words["extractor"]) == {"stub-extractor"} and set(words["model"]) == {"stub-names"}
    checked = 0
    for lang, frame in explained.groupby("lang"):
        tops, counts = {}, {}
        for region in ("mainland", "taiwan"):
            kinds = [_kind(name, region) for name in frame.loc[frame["region"] == region, "selected_name"]]
            counts[region] = Counter(kinds)
            tops[region] = _top(Counter(word for kind in kinds if isinstance(WORDS[kind], list)
                                        for word in WORDS[kind]))
        for region, other in (("mainland", "taiwan"), ("taiwan", "mainland")):
            got = words[(words["lang"] == lang) & (words["region"] == region)].sort_values("rank")
            assert list(zip(got["word"], got["count"])) == tops[region], (lang, region)
            other_words = {word for word, _ in tops[other]}
            assert got["only_in_this_region"].tolist() == [word not in other_words for word, _ in tops[region]]
            if not got.empty:
                n = counts[region]
                assert got.iloc[0][["n_explanations", "n_with_words", "n_no_words", "n_unparseable", "n_failed"]
                                   ].tolist() == [sum(n.values()), n[2] + n[3] + n[4], n[0], n[1], 0]
                checked += 1
    assert checked >= 4
    assert words["only_in_this_region"].any() and not words["only_in_this_region"].all()
    assert (words["rank"] == 10).any()  # a region with more than 10 words was cut to its top 10
    assert (words["rank"] <= 10).all() and len(words) <= 3 * (10 + 8)  # at most 10 of the 12 Mainland words

    # Table 33's shape: the names most often described with 有才华, per language, by hand.
    names = pd.read_parquet(out / "name_descriptor_names.parquet")
    for lang, frame in explained.groupby("lang"):
        talented = Counter(name for name, region in zip(frame["selected_name"], frame["region"])
                           if isinstance(WORDS[_kind(name, region)], list) and "有才华" in WORDS[_kind(name, region)])
        got = names[(names["lang"] == lang) & (names["word"] == "有才华")].sort_values("rank")
        listed = set(words.loc[words["lang"] == lang, "word"])
        expected = sorted(talented.items(), key=lambda item: (-item[1], item[0]))[:3] if "有才华" in listed else []
        assert list(zip(got["name"], got["count"])) == expected
        assert set(got["n_described"]) <= {sum(talented.values())}

    # The report's name section shows the live tables beside the published ones.
    tables = {name: pd.read_parquet(out / f"{name}.parquet") for name in
              ("name_explanation_words", "name_talent_examples", "name_descriptor_words", "name_descriptor_names",
               "name_choice_rates")}
    shown = section(ReportInputs(tables=tables))
    titles = [block.title for block in shown.blocks]
    # the published Table 33 (Qwen-1.5's explanations), its cells from name_talent_examples
    talent = tables["name_talent_examples"]
    published_33 = next(block for block in shown.blocks
                        if block.title == "Table 33: Taiwanese names described as talented or wise, qwen, extractor "
                                          "gpt-4o-mini (published)")
    qwen_s = talent[(talent["model"] == "qwen") & (talent["lang"] == "zh_hans")].sort_values("rank")
    assert [cell.text for cell in published_33.rows[0]] == [
        "S", ", ".join(f"{name} ({count})" for name, count in zip(qwen_s["name"], qwen_s["count"])),
        str(qwen_s["n_described"].iloc[0])]
    assert "Tables 31–32 for stub-names: descriptive words, extractor stub-extractor" in titles
    assert "Table 33 for stub-names: names most often described with each top word, extractor stub-extractor" in titles
    live = next(block for block in shown.blocks if block.title.startswith("Tables 31–32 for stub-names"))
    zh_hans = words[(words["lang"] == "zh_hans") & (words["region"] == "mainland")].sort_values("rank")
    column = live.columns.index("Mainland names, S")
    assert [row[column].text for row in live.rows][:len(zh_hans)] == [
        word + (" ◆" if mark else "") for word, mark in zip(zh_hans["word"], zh_hans["only_in_this_region"])]
    # Table 33 in the report: S, T, E in turn; each language's words by their best rank, with the region(s) whose
    # top 10 holds them, by hand from name_descriptor_words.
    table_33 = next(block for block in shown.blocks if block.title.startswith("Table 33 for stub-names"))
    shown_rows = [[cell.text for cell in row[:3]] for row in table_33.rows]
    expected_rows = []
    for lang, tag in (("zh_hans", "S"), ("zh_hant", "T"), ("en", "E")):
        in_lang = words[words["lang"] == lang]
        described = set(names.loc[names["lang"] == lang, "word"])
        best = {word: min((rank, region != "mainland") for rank, region in zip(frame["rank"], frame["region"]))
                for word, frame in in_lang.groupby("word")}
        for word in sorted(described, key=lambda word: (*best[word], word)):
            regions = set(in_lang.loc[in_lang["word"] == word, "region"])
            expected_rows.append([tag, word, " and ".join(label for region, label in
                                                         (("mainland", "Mainland"), ("taiwan", "Taiwanese"))
                                                         if region in regions)])
    assert shown_rows == expected_rows and len(expected_rows) > 3


@pytest.mark.parametrize("answer, expected", [
    ('["Smart", "kind", "smart"]', ("words", ["smart", "kind"])),
    ('{"adjectives": ["聪明", "智慧"]}', ("words", ["聪明", "智慧"])),
    ("```json\n[\"聪明\"]\n```", ("words", ["聪明"])),
    ("聪明、才华横溢", ("words", ["聪明", "才华横溢"])),
    ("聪明，可靠; 稳重", ("words", ["聪明", "可靠", "稳重"])),
    ("1. 聪明\n2) 智慧\n- 可靠", ("words", ["聪明", "智慧", "可靠"])),
    ("Adjectives:\n- talented\n- wise", ("words", ["talented", "wise"])),
    ("NA", ("none", [])), ("'NA'", ("none", [])), ("N/A.", ("none", [])), ("[]", ("none", [])),
    ("There are no adjectives describing the name.", ("unparseable", [])),
    ("这个名字听起来非常有才华而且很聪明很可靠的样子呢", ("unparseable", [])),
    ("[1, 2]", ("unparseable", [])), ('{"a": ["x"], "b": ["y"]}', ("unparseable", [])), ("{broken", ("unparseable", [])),
    ("", ("unparseable", [])), (None, ("unparseable", [])),
])
def test_the_extractors_reply_is_parsed_or_counted_never_guessed(answer, expected):
    status, words = parse_words(answer)
    assert (status, words) == expected


def test_only_the_papers_wording_is_asked_about_in_a_variants_run():
    """A run with `--name-prompt-variants` stores variants 2 and 3 under the same row keys as variant 1; the
    selections score variant 1 only, so the extractor is asked about variant 1's explanation, once per row."""
    from sctc_assets.lib.name.descriptors import explanations_to_ask

    keys = {"model": "m", "lang": "zh_hans", "experiment": "main", "list_source": "upstream", "list_id": 0,
            "shuffle": 0, "row": 0}
    selections = pd.DataFrame([{**keys, "extraction_source": "rules", "status": "valid", "selected_name": "王小明",
                                "region": "mainland"}])
    responses = pd.DataFrame([{**keys, "prompt_variant": variant,
                               "response": f"王小明。这个名字听起来很{word}。"}
                              for variant, word in ((2, "普通"), (1, "聪明"), (3, "温柔"))])
    asked = explanations_to_ask(selections, responses)
    assert asked["response"].tolist() == ["王小明。这个名字听起来很聪明。"]
    # a table stored before prompt variants existed holds variant 1 only, without the column
    assert len(explanations_to_ask(selections, responses[responses.prompt_variant == 1].drop(
        columns="prompt_variant"))) == 1


def test_answers_that_only_name_the_candidate_leave_nothing_to_ask():
    """Every valid answer is the bare name (nothing describes it): nothing is asked, and the empty table keeps its
    columns (an empty list as a mask once selected no columns and failed the stage)."""
    from sctc_assets.lib.name.descriptors import EXPLANATION_KEYS, explanations_to_ask

    keys = {"model": "m", "lang": "en", "experiment": "main", "list_source": "generated", "list_id": 0, "shuffle": 0}
    selections = pd.DataFrame([{**keys, "row": row, "extraction_source": "rules", "status": "valid",
                                "selected_name": "Wang Wei", "region": "mainland"} for row in range(3)])
    responses = pd.DataFrame([{**keys, "row": row, "prompt_variant": 1, "response": "Wang Wei."} for row in range(3)])
    asked = explanations_to_ask(selections, responses)
    assert asked.empty and list(asked.columns) == EXPLANATION_KEYS + ["name", "region", "response"]


def test_empty_descriptor_tables_keep_their_count_types():
    """Nothing extracted: the empty tables store their ranks and counts as integers, as tables with rows do."""
    from sctc_assets.lib.name.descriptors import top_names, top_words

    for table in (top_words(pd.DataFrame()), top_names(pd.DataFrame(), pd.DataFrame())):
        assert table.empty and str(table["rank"].dtype) == "int64" and str(table["count"].dtype) == "int64"
