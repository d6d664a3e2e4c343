"""Script composition (Appendix G, Table 8) and the length measures of the pairing."""

from __future__ import annotations

import pytest

from sctc_assets.lib.reviews.scripts import character_count, composition, composition_elements, token_count


@pytest.mark.parametrize("text, label", [
    ("房間乾淨，服務親切。", "Only Traditional"),
    ("房间干净，服务热情。", "Only Simplified"),
    ("很好", "Only Shared Chinese"),           # 很 and 好 are written the same in both scripts
    ("Great location!", "Only English"),
    ("👍👍", "Only Emoji"),
    ("★★★", "Only Symbol"),
    ("ㄅㄧˋ", "Only Bopomofo"),
    ("ありがとう", "Only JP/KR"),
    ("감사합니다", "Only JP/KR"),
    ("。。。", "Only Punctuation"),
    ("ｎｉｃｅ", "Only Unknown"),             # fullwidth Latin letters, as in the paper's Table 7 (B)
    ("10/10", "Punctuation + Number"),
    ("房間很nice", "Traditional + English"),
    ("服務很好👍🏻", "Traditional + Emoji"),   # an emoji with a skin-tone modifier is one emoji
    ("讚ㄉ", "Traditional + Bopomofo"),
    ("房间很大，location不错", "Simplified + English"),
    ("酒店不错❤️", "Simplified + Emoji"),
    ("房間乾淨 房间干净", "Traditional + Simplified"),
    ("这里很好 ありがとう", "Simplified + JP/KR"),
    ("很乾淨，CP值高，100分👍", "Traditional + English + Emoji"),  # numbers and punctuation decide nothing here
    ("", ""),
])
def test_composition_labels(text, label):
    assert composition(text) == label
    assert composition_elements(label) == (frozenset(label.removeprefix("Only ").split(" + ")) if label else frozenset())


def test_tokens_count_han_characters_and_english_words():
    assert token_count("房間很乾淨") == 5
    assert token_count("staff 都很 nice") == 4
    assert token_count("check-in 等了 30 分鐘👨‍👩‍👧!") == 1 + 1 + 1 + 2 + 1 + 2 + 1 + 1
    assert token_count(" \n ") == 0


def test_characters_count_visible_graphemes():
    assert character_count("房間 很乾淨") == 5
    assert character_count("nice👍🏻") == 5
    assert character_count("") == 0
