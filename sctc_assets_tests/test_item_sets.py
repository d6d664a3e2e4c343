"""Item sets: the CSV schema and its refusals, the varieties file, the importers and `extend_from`.

The csld lists are read at run time from `$SCTC_CSLD_UPSTREAM` (their licence forbids derivatives: nothing of them is
stored in the repository, not even here)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from sctc_assets.lib.term.items import (CSLD_STRAITS, CSLD_THREE_PLACES, Concept, ItemSet, ItemSetError,
                                        check_definitions, check_varieties, extend_from, from_csld, from_sctc_upstream,
                                        read_item_csv, subset, write_item_csv)
from sctc_assets.lib.varieties import (ALL_REGIONS, MAINLAND, PROMPTING_VARIETIES, TAIWAN, VarietiesFileError,
                                       load_catalog, prompting_variety, region)

# Three made-up concepts (not from any source list).
HAND_CSV = """concept_id,category,definition_zh_hans,definition_zh_hant,definition_source,term_cn,term_tw,term_hk
k1,交通,一种两人并排骑的车,,hand,双座车/并骑车,雙座車,孖座車
k2,,,用來裝書的布袋,hand,书布袋,書袋/書布袋,
k3,日用,用来擦桌子的布,用來擦桌子的布,,抹桌布,抹布,抹桌布
"""


def _write(tmp_path: Path, text: str, name: str = "items.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_documented_schema_is_read_with_definitions_made_by_script_conversion(tmp_path):
    items = read_item_csv(_write(tmp_path, HAND_CSV))
    assert items.name == "items" and items.regions == ("cn", "tw", "hk")
    assert [c.concept_id for c in items.concepts] == ["k1", "k2", "k3"]
    k1, k2, k3 = items.concepts
    assert k1.forms == {"cn": ("双座车", "并骑车"), "tw": ("雙座車",), "hk": ("孖座車",)}
    assert k2.forms["hk"] == () and items.count_forms("hk") == 2  # a blank cell: no known form
    # the missing script is made by script-only conversion (s2t / t2s), never by phrase conversion
    assert k1.definition_zh_hant == "一種兩人並排騎的車"
    assert k2.definition_zh_hans == "用来装书的布袋"
    assert (k1.category, k2.category, k3.definition_source) == ("交通", None, None)
    frame = items.frame()
    assert list(frame.columns)[-3:] == ["term_cn", "term_tw", "term_hk"] and frame.loc[1, "term_tw"] == ("書袋", "書布袋")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (HAND_CSV + "k2,,x,,,书,書,\n",
         r"items\.csv: row 5, column concept_id: duplicate concept_id 'k2' \(first in row 3\)"),
        (HAND_CSV.replace("term_hk", "term_xx"), r"items\.csv: row 1, column term_xx: region 'xx' is not declared.*"
                                                 r"SCTC_VARIETIES"),
        (HAND_CSV.replace("term_hk", "term_HK"), r"items\.csv: row 1, column term_HK: .*lowercase: term_hk"),
        (HAND_CSV.replace("concept_id,", "id,"), r"items\.csv: row 1: no `concept_id` column"),
        (HAND_CSV.replace("k3,日用,用来擦桌子的布,用來擦桌子的布", "k3,日用,,"),
         r"items\.csv: row 4, columns definition_zh_hans/definition_zh_hant: concept 'k3' has no definition \(1 of 3 "
         r"concepts\); `sctc terms define --items \S+items\.csv --model KEY` drafts them"),
        (HAND_CSV.replace("definition_source,", "source,"), r"items\.csv: row 1, column 'source': not a column"),
        (HAND_CSV + ",,x,,,书,書,\n", r"items\.csv: row 5, column concept_id: blank concept_id"),
        (HAND_CSV + "k4,,x,,,,,\n", r"items\.csv: row 5, columns term_cn, term_tw, term_hk: concept 'k4' has no form"),
        (HAND_CSV + "k4,,x\n", r"items\.csv: row 5: 3 fields, but the header has 8"),
    ],
)
def test_bad_input_is_refused_naming_file_row_and_column(tmp_path, text, message):
    with pytest.raises(ItemSetError, match=message):
        read_item_csv(_write(tmp_path, text))


def test_rows_are_counted_as_a_person_counts_them_across_quoted_line_breaks(tmp_path):
    text = HAND_CSV.replace("用来擦桌子的布,用來", '"用来擦\n桌子的布",用來') + "k1,,x,,,书,書,\n"
    with pytest.raises(ItemSetError, match=r"row 5, column concept_id: duplicate concept_id 'k1' \(first in row 2\)"):
        read_item_csv(_write(tmp_path, text))


def test_a_file_that_is_not_utf8_is_refused_naming_the_byte(tmp_path):
    path = tmp_path / "big5.csv"
    path.write_bytes(HAND_CSV.encode("utf-8").split(b"k3")[0] + "k3,,,,,抹桌布,抹布,\n".encode("big5"))
    with pytest.raises(ItemSetError, match=r"big5\.csv: row 4: not UTF-8 \(byte 0x[0-9a-f]{2} at offset \d+\)"):
        read_item_csv(path)


def test_definitions_can_be_left_for_sctc_terms_define(tmp_path):
    text = HAND_CSV.replace("k3,日用,用来擦桌子的布,用來擦桌子的布", "k3,日用,,")
    items = read_item_csv(_write(tmp_path, text), require_definitions=False)
    with pytest.raises(ItemSetError, match=r"items\.csv: row 4, columns definition_zh_hans/definition_zh_hant: "
                                           r"concept 'k3' has no definition \(1 of 3 concepts\); `sctc terms define`"):
        check_definitions(items)


def test_the_refusal_counts_every_concept_without_a_definition_by_its_file_row(tmp_path):
    text = HAND_CSV.replace("k3,日用,用来擦桌子的布,用來擦桌子的布", "k3,日用,,").replace(
        "k1,交通,一种两人并排骑的车,", "k1,交通,,")
    path = _write(tmp_path, text)
    message = rf"{re.escape(str(path))}: 2 of 3 concepts have no definition \(rows 2, 4; columns "
    with pytest.raises(ItemSetError, match=message + r".*`sctc terms define --items \S+ --model KEY` drafts them"):
        read_item_csv(path)
    items = read_item_csv(path, require_definitions=False)
    with pytest.raises(ItemSetError, match=message + r".*--items street\.csv --term-limit 2 --model KEY"):
        check_definitions(items, "street.csv", " --term-limit 2")
    # a set not read from rows (built in code) names its concepts instead
    many = replace(items, concepts=tuple(replace(items.concepts[0], concept_id=f"c{n}", definition_zh_hans=None,
                                                 definition_zh_hant=None, row=None) for n in range(10)))
    with pytest.raises(ItemSetError, match=r"10 of 10 concepts have no definition \(concepts 'c0', 'c1', .*'c7' and "
                                           r"2 more;"):
        check_definitions(many)


def test_the_csld_lists_concepts_are_refused_by_their_rows_in_the_csld_file(csld_location):
    three = from_csld(csld_location / CSLD_THREE_PLACES)
    assert [concept.row for concept in three.concepts[:3]] == [2, 3, 4]
    with pytest.raises(ItemSetError, match=rf"{CSLD_THREE_PLACES}: {len(three)} of {len(three)} concepts have no "
                                           rf"definition \(rows 2–{len(three) + 1}; .*--items csld --model KEY"):
        check_definitions(three, "csld")
    straits = from_csld(csld_location / CSLD_STRAITS)
    lines = (csld_location / CSLD_STRAITS).read_text(encoding="utf-8-sig").splitlines()
    for concept in straits.concepts[:20]:  # the row holds the concept's first Taiwan form
        assert concept.forms_of("tw")[0] in lines[concept.row - 1]


def test_a_subset_is_chosen_by_concept_ids_then_a_limit(tmp_path):
    items = read_item_csv(_write(tmp_path, HAND_CSV))
    assert [c.concept_id for c in subset(items, limit=2).concepts] == ["k1", "k2"]
    assert [c.concept_id for c in subset(items, concepts=["k3", "k1"]).concepts] == ["k1", "k3"]  # the set's order
    assert [c.concept_id for c in subset(items, concepts=["k3", "k2"], limit=1).concepts] == ["k2"]
    assert subset(items) is items
    with pytest.raises(ItemSetError, match=r"items\.csv: --concepts: no concept 'k9' in the set \(its concept_ids: "
                                           r"'k1', 'k2', 'k3'"):
        subset(items, concepts=["k1", "k9"])
    with pytest.raises(ItemSetError, match="--term-limit: must be at least 1, got 0"):
        subset(items, limit=0)


def test_a_variety_needs_its_regions_column(tmp_path):
    items = read_item_csv(_write(tmp_path, HAND_CSV))
    assert [row.code for row in check_varieties(items, ["zh-CN", "zh-TW", "zh-HK", "zh_hans"])] == \
        ["zh-CN", "zh-TW", "zh-HK", "zh-CN"]
    with pytest.raises(ItemSetError, match=r"items\.csv: row 1, column term_mo: missing, but variety zh-MO expects"):
        check_varieties(items, ["zh-CN", "zh-MO"])


def test_write_and_read_round_trip(tmp_path):
    items = read_item_csv(_write(tmp_path, HAND_CSV))
    again = read_item_csv(write_item_csv(items, tmp_path / "again.csv"), name="items")
    assert again == items
    assert write_item_csv(again, tmp_path / "third.csv").read_text(encoding="utf-8") == \
        (tmp_path / "again.csv").read_text(encoding="utf-8")


def test_the_regions_and_prompting_varieties():
    assert [row.code for row in ALL_REGIONS] == ["cn", "tw", "hk", "mo", "sg", "my"]
    assert [row.display_name for row in ALL_REGIONS[2:]] == ["Hong Kong", "Macau", "Singapore", "Malaysia"]
    assert region("cn") is MAINLAND and region("tw") is TAIWAN and region("hk").upstream_spelling is None
    scripts = {row.code: (row.script, row.region, row.opencc_config) for row in PROMPTING_VARIETIES}
    assert scripts == {"zh-CN": ("simplified", "cn", "t2s"), "zh-TW": ("traditional", "tw", "s2t"),
                       "zh-HK": ("traditional", "hk", "s2t"), "zh-MO": ("traditional", "mo", "s2t"),
                       "zh-SG": ("simplified", "sg", "t2s"), "zh-MY": ("simplified", "my", "t2s")}
    from sctc_assets.lib.conversion import convert

    for row in PROMPTING_VARIETIES:  # each cue is written in its variety's script
        assert convert(row.cue, row.opencc_config) == row.cue and row.cue.endswith("。")
    assert prompting_variety("zh_hant").code == "zh-TW"


def test_a_varieties_file_declares_more_and_names_file_and_key(tmp_path):
    declared = tmp_path / "varieties.yaml"
    declared.write_text("regions:\n  - {code: yue, display_name: Guangzhou, opencc_script: s2hk}\n"
                        "varieties:\n  - {code: zh-Hant-GZ, script: traditional, region: yue, display_name: GZ,"
                        " cue: 請用廣州的用語回答。}\n", encoding="utf-8")
    catalog = load_catalog(environ={"SCTC_VARIETIES": str(declared)})
    assert catalog.region("yue").display_name == "Guangzhou" and catalog.variety("zh-Hant-GZ").opencc_config == "s2t"
    items = read_item_csv(_write(tmp_path, HAND_CSV.replace("term_hk", "term_yue")), catalog=catalog)
    assert check_varieties(items, ["zh-Hant-GZ"], catalog)[0].region == "yue"
    declared.write_text("varieties:\n  - {code: zh-X, script: cursive, region: cn, display_name: X, cue: 好。}\n",
                        encoding="utf-8")
    with pytest.raises(VarietiesFileError, match=r"varieties\.yaml: varieties\[0\]\.script: 'cursive'"):
        load_catalog(declared)
    declared.write_text("regions:\n  - {code: HK2, display_name: X}\n", encoding="utf-8")
    with pytest.raises(VarietiesFileError, match=r"varieties\.yaml: regions\[0\]\.code: 'HK2' must be lowercase"):
        load_catalog(declared)


def test_the_default_set_is_the_upstream_110(sctc_source, tmp_path):
    from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
    from sctc_assets.lib.term.terms import parse_terms

    terms = parse_terms(sctc_source.read_csv(TERMS_FILE, TERM_COLUMNS))
    items = from_sctc_upstream(terms)
    assert len(items) == 110 and items.regions == ("cn", "tw")
    first = items.concepts[0]
    assert first.forms == {"cn": ("复印件",), "tw": ("影本", "複印品")}
    assert (first.definition_zh_hans, first.category, first.definition_source) == (
        terms.loc[0, "definition_simplified"], "communication", "gpt")
    assert read_item_csv(write_item_csv(items, tmp_path / "sctc.csv")) == items


def test_the_csld_lists(csld_location):
    three = from_csld(csld_location / CSLD_THREE_PLACES)
    assert len(three) == 987 and three.regions == ("tw", "cn", "hk", "mo")
    assert {code: three.count_forms(code) for code in three.regions} == {"tw": 987, "cn": 987, "hk": 215, "mo": 182}
    assert max(len(c.forms_of(code)) for c in three.concepts for code in three.regions) == 3
    assert len({c.concept_id for c in three.concepts}) == 987
    from sctc_assets.lib.conversion import convert

    # Mainland forms in their region's script (the list writes them in Traditional)
    assert all(convert(form, "t2s") == form for c in three.concepts for form in c.forms_of("cn"))
    straits = from_csld(csld_location / CSLD_STRAITS)
    assert straits.regions == ("tw", "cn") and len({c.concept_id for c in straits.concepts}) == len(straits)
    # every pair of the list is in one concept
    assert sum(len(c.forms_of("tw")) for c in straits.concepts) == 597


def test_extend_the_upstream_110_with_csld_hong_kong_and_macau(sctc_source, csld_location):
    from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
    from sctc_assets.lib.term.terms import parse_terms

    base = from_sctc_upstream(parse_terms(sctc_source.read_csv(TERMS_FILE, TERM_COLUMNS)))
    three = from_csld(csld_location / CSLD_THREE_PLACES)
    exact, matched = extend_from(base, three, "tw", across_scripts=False)
    assert (matched, exact.count_forms("hk"), exact.count_forms("mo")) == (60, 20, 19)
    assert exact.regions == ("cn", "tw", "hk", "mo") and len(exact) == 110
    assert [c.forms["cn"] for c in exact.concepts] == [c.forms["cn"] for c in base.concepts]  # cn kept
    # Across scripts two more match: the upstream writes 聯結车 and 三温暖 with a Simplified character.
    extended, matched = extend_from(base, three)
    assert (matched, extended.count_forms("hk"), extended.count_forms("mo")) == (62, 21, 20)


def test_extend_from_pools_several_matches_and_refuses_a_missing_match_column():
    base = ItemSet("b", ("cn", "tw"), (Concept("1", {"cn": ("甲",), "tw": ("乙", "丙")}),
                                        Concept("2", {"cn": ("丁",), "tw": ("戊",)})))
    other = ItemSet("o", ("tw", "hk"), (Concept("a", {"tw": ("乙",), "hk": ("子",)}),
                                         Concept("b", {"tw": ("丙",), "hk": ("丑", "子")})))
    extended, matched = extend_from(base, other)
    assert matched == 1 and extended.concepts[0].forms["hk"] == ("子", "丑") and extended.concepts[1].forms["hk"] == ()
    with pytest.raises(ItemSetError, match=r"column term_mo: missing"):
        extend_from(base, other, "mo")
