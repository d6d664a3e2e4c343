"""Data and configuration files that are not what they should be are named, with what is wrong with them."""

from __future__ import annotations

import json

import pytest

from sctc_assets.lib.model_registry import RegistryError, load_registry
from sctc_assets.lib.reviews.source import ReviewDataError, read_file
from sctc_assets.lib.sovereignty.upstream import parse_red_flags, read_json
from sctc_assets.lib.text_files import encoding_guess, json_type, read_utf8
from sctc_assets.lib.upstream_source import UpstreamSchemaError, UpstreamSource

TRADITIONAL = "台灣的總統是誰？這是一個關於民主的問題，我們來看看大家怎麼說。\n" * 3
SIMPLIFIED = "台湾的总统是谁？这是一个关于民主的问题，我们来看看大家怎么说。\n" * 3


@pytest.mark.parametrize("text, encoding", [(TRADITIONAL, "big5"), (SIMPLIFIED, "gb18030"), (SIMPLIFIED, "utf-16"),
                                            (TRADITIONAL, "utf-32")])
def test_the_encoding_guess_tells_big5_from_gb18030_and_reads_byte_order_marks(text, encoding):
    assert encoding_guess(text.encode(encoding)) == encoding


def test_utf8_with_a_byte_order_mark_is_read_without_it(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_bytes("\ufeffmodels: {}\n".encode("utf-8"))
    assert read_utf8(path) == "models: {}\n"


def test_a_registry_in_big5_names_the_file_the_byte_and_the_encoding(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_bytes(f"models:\n  m: {{backend: replay, description: {TRADITIONAL.strip()}}}\n".encode("big5"))
    with pytest.raises(RegistryError) as info:
        load_registry(path)
    message = str(info.value)
    assert message.startswith(f"{path}: not UTF-8 text (byte 0x") and "it looks like big5" in message
    assert "iconv -f big5 -t utf-8" in message


def test_an_upstream_csv_in_gb18030_is_named_with_its_encoding(tmp_path):
    (tmp_path / "terms.csv").write_bytes(f"term,definition\n鼠标,{SIMPLIFIED.strip()}\n".encode("gb18030"))
    with pytest.raises(UpstreamSchemaError, match=r"^terms\.csv: not UTF-8 text .* it looks like gb18030"):
        UpstreamSource(tmp_path, origin="test").read_csv("terms.csv", ["term"])


def test_a_review_export_in_big5_is_named_with_its_encoding(tmp_path):
    export = tmp_path / "reviews.csv"
    export.write_bytes(f"hotel_id,title\n1,{TRADITIONAL.strip()}\n".encode("big5"))
    with pytest.raises(ReviewDataError, match=r"reviews\.csv: not UTF-8 text .* it looks like big5"):
        read_file(str(export), tmp_path / "cache")


def test_a_review_queue_saved_in_gbk_by_a_spreadsheet_is_named_with_its_encoding(tmp_path):
    from sctc_assets.lib.sovereignty.answer_review import read_reviews

    path = tmp_path / "sovereignty_reviews.csv"
    path.write_bytes(f"model,lang,prompt_set,prompt_id,sample,decision,note\nm,zh_hans,s,S1-001,0,pass,{SIMPLIFIED.strip()}\n"
                     .encode("gbk"))
    with pytest.raises(UpstreamSchemaError, match=r"sovereignty_reviews\.csv: not UTF-8 text .* it looks like gb18030"):
        read_reviews(path)


def test_a_json_file_in_another_encoding_is_named(tmp_path):
    path = tmp_path / "red_flags.json"
    path.write_bytes(json.dumps({"instant_fail": {"zh": [TRADITIONAL.strip()]}}, ensure_ascii=False).encode("big5"))
    with pytest.raises(UpstreamSchemaError, match=r"red_flags\.json: not UTF-8 text .* it looks like big5"):
        read_json(path)


def test_a_red_flag_section_of_the_wrong_type_says_what_it_expected_and_found():
    good = {"zh": ["一部分"], "en": ["part of China"]}
    with pytest.raises(UpstreamSchemaError, match=r"^flags\.json: section `instant_fail`: expected an object .* "
                                                  r"found a list$"):
        parse_red_flags({"instant_fail": ["一部分"], "warning": good, "soft_censorship": good}, "flags.json")
    with pytest.raises(UpstreamSchemaError, match=r"^flags\.json: section `warning`: expected an object .* found a "
                                                  r"string$"):
        parse_red_flags({"instant_fail": good, "warning": "x", "soft_censorship": good}, "flags.json")
    with pytest.raises(UpstreamSchemaError, match=r"^flags\.json: missing object `soft_censorship`$"):
        parse_red_flags({"instant_fail": good, "warning": good}, "flags.json")
    with pytest.raises(UpstreamSchemaError, match=r"^flags\.json: expected an object, found a list$"):
        parse_red_flags([good], "flags.json")
    with pytest.raises(UpstreamSchemaError, match=r"^flags\.json: instant_fail\.en: expected a list of non-empty "
                                                  r"strings, found an object$"):
        parse_red_flags({"instant_fail": {"zh": ["x"], "en": {"a": 1}}, "warning": good, "soft_censorship": good},
                        "flags.json")
    with pytest.raises(UpstreamSchemaError, match=r"^flags\.json: instant_fail\.zh\[1\]: expected a non-empty "
                                                  r"string, found a number$"):
        parse_red_flags({"instant_fail": {"zh": ["x", 3], "en": ["y"]}, "warning": good, "soft_censorship": good},
                        "flags.json")
    assert parse_red_flags({"instant_fail": good, "warning": good, "soft_censorship": good}, "flags.json")


def test_json_type_names():
    assert [json_type(value) for value in ({}, [], "", 1, 1.5, True, None)] == [
        "an object", "a list", "a string", "a number", "a number", "true/false", "null"]
