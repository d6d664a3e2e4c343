"""Labels for N regions: the always-one-region model's exact matrix, the refinements carried over from `labels.py`,
and the default set's labels equal to today's `label_answer` on every published answer."""

from __future__ import annotations

import pandas as pd
import pytest

from sctc_assets.lib.conversion import convert, convert_chars
from sctc_assets.lib.term.items import CSLD_THREE_PLACES, Concept, ItemSet, from_csld
from sctc_assets.lib.term.region_labels import (ITEM_SET_RULE, PAPER_RULE, label_frame, label_regions, region_forms,
                                                region_script, rule_for)
from sctc_assets.lib.varieties import PROMPTING_VARIETIES, load_catalog

REGIONS = ("cn", "tw", "hk", "mo", "sg", "my")
# Three made-up concepts: forms shared by two regions (hk/mo, cn/sg), the same form across scripts (sg 书袋,
# mo 書袋), a form inside a longer one of another region (my 包袋 in cn 书包袋), blank cells (hk, concept 2).
HAND = ItemSet("hand", REGIONS, (
    Concept("1", {"cn": ("甲车",), "tw": ("乙車",), "hk": ("丙車",), "mo": ("丙車",), "sg": ("甲车",), "my": ("丁车",)}),
    Concept("2", {"cn": ("书包袋",), "tw": ("書囊",), "hk": (), "mo": ("書袋",), "sg": ("书袋",), "my": ("包袋",)}),
    Concept("3", {"cn": ("电脑",), "tw": ("電腦",), "hk": ("電腦",), "mo": ("電腦",), "sg": ("电脑",), "my": ("电脑",)}),
))
# Prompted variety × answered region → each concept's label: c(orrect), i(ncorrect), m:<regions found>, or None
# where the prompted region has no form (not asked, not counted). Worked out by hand from HAND.
c, i = "c", "i"
EXPECTED = {
    "zh-CN": {"cn": (c, c, c), "tw": ("m:tw", "m:tw", c), "hk": ("m:hk,mo", i, c), "mo": ("m:hk,mo", "m:mo,sg", c),
              "sg": (c, "m:mo,sg", c), "my": ("m:my", "m:my", c)},
    "zh-TW": {"cn": ("m:cn,sg", "m:cn", c), "tw": (c, c, c), "hk": ("m:hk,mo", i, c), "mo": ("m:hk,mo", "m:mo,sg", c),
              "sg": ("m:cn,sg", "m:mo,sg", c), "my": ("m:my", "m:my", c)},
    "zh-HK": {"cn": ("m:cn,sg", None, c), "tw": ("m:tw", None, c), "hk": (c, None, c), "mo": (c, None, c),
              "sg": ("m:cn,sg", None, c), "my": ("m:my", None, c)},
    "zh-MO": {"cn": ("m:cn,sg", "m:cn", c), "tw": ("m:tw", "m:tw", c), "hk": (c, i, c), "mo": (c, c, c),
              "sg": ("m:cn,sg", c, c), "my": ("m:my", "m:my", c)},
    "zh-SG": {"cn": (c, "m:cn", c), "tw": ("m:tw", "m:tw", c), "hk": ("m:hk,mo", i, c), "mo": ("m:hk,mo", c, c),
              "sg": (c, c, c), "my": ("m:my", "m:my", c)},
    "zh-MY": {"cn": ("m:cn,sg", "m:cn", c), "tw": ("m:tw", "m:tw", c), "hk": ("m:hk,mo", i, c),
              "mo": ("m:hk,mo", "m:mo,sg", c), "sg": ("m:cn,sg", "m:mo,sg", c), "my": (c, c, c)},
}


def _always_one_region(item_set: ItemSet, varieties, answered: str) -> pd.DataFrame:
    """A model that always answers `answered`'s first form ('不知道' without a form): as written when that region
    writes the prompting script, else converted into it with the prompted region's character variants (s2tw, s2hk,
    tw2s …)."""
    catalog = load_catalog()
    rows = []
    for variety in varieties:
        config = catalog.region(variety.region).opencc_script
        same_script = region_script(catalog, answered) == variety.script
        for concept in item_set.concepts:
            forms = concept.forms_of(answered)
            answer = (forms[0] if same_script else convert(forms[0], config)) if forms else "不知道"
            rows.append({"concept_id": concept.concept_id, "variety": variety.code, "response": answer})
    return pd.DataFrame(rows)


def _short(label: object, regions: str) -> str | None:
    if pd.isna(label):
        return None
    return {"correct": "c", "incorrect": "i"}.get(label) or f"m:{regions}"


def test_an_always_one_region_model_gives_the_expected_matrix_for_every_variety():
    observed = {}
    for answered in REGIONS:
        labelled = label_frame(_always_one_region(HAND, PROMPTING_VARIETIES, answered), HAND)
        for variety, group in labelled.groupby("variety", sort=False):
            observed.setdefault(variety, {})[answered] = tuple(
                _short(label, regions) for label, regions in zip(group["label"], group["regions_found"]))
    assert observed == EXPECTED


def _independent_label(answer: str, concept: Concept, prompted: str) -> tuple[str, tuple[str, ...]]:
    """The rule on forms brought to one script (Simplified, character by character), written apart from
    `region_labels`: other regions' forms outside the correct forms' occurrences and not inside a longer found
    form make the answer misaligned, else a correct form makes it correct."""
    def norm(text: str) -> str:
        return convert_chars(convert(convert(text, "hk2s"), "tw2s"), "t2s")

    text = norm(answer)
    correct = {norm(form) for form in concept.forms_of(prompted)}
    correct_spans = [(s, s + len(f)) for f in correct for s in range(len(text)) if text.startswith(f, s)]
    hits = {}
    for code, forms in concept.forms.items():
        for form in {norm(f) for f in forms} - correct if code != prompted else ():
            spans = [(s, s + len(form)) for s in range(len(text)) if text.startswith(form, s)
                     and not any(a <= s and s + len(form) <= b for a, b in correct_spans)]
            if spans:
                hits.setdefault(form, (set(), spans))[0].add(code)
    found = set()
    for form, (codes, spans) in hits.items():
        inside = all(any(a <= s and e <= b and b - a > e - s for other, (_, o) in hits.items() for a, b in o)
                     for s, e in spans)
        if not inside:
            found |= codes
    if found:
        return "misaligned", tuple(code for code in concept.forms if code in found)
    return ("correct" if any(f in text for f in correct) else "incorrect"), ()


def test_the_always_one_region_matrix_on_the_csld_list(csld_location):
    """On the csld 4-region list (9,484 asked answers), the labels of every prompted variety × answered region
    equal those of an independent implementation of the rule that brings forms to one script and one set of
    character variants, except for 9 answers. In those, OpenCC writes a Mainland form with the prompted region's
    variants in a way the list does not (s2hk writes 麪 where the list's Hong Kong forms write 麵, s2tw writes 鏈 where
    a Taiwan form writes 鍊): the paper's rule, and `region_labels`, call such a character-converted Mainland form
    misaligned."""
    three = from_csld(csld_location / CSLD_THREE_PLACES)
    catalog = load_catalog()
    varieties = [catalog.variety(code) for code in ("zh-CN", "zh-TW", "zh-HK", "zh-MO")]
    concepts = {concept.concept_id: concept for concept in three.concepts}
    ours, theirs, differences = {}, {}, []
    for answered in three.regions:
        labelled = label_frame(_always_one_region(three, varieties, answered), three)
        for record in labelled.to_dict("records"):
            variety = catalog.variety(record["variety"])
            concept = concepts[record["concept_id"]]
            if not concept.forms_of(variety.region):
                assert pd.isna(record["label"])
                continue
            key = (variety.code, answered)
            label, regions = _independent_label(record["response"], concept, variety.region)
            ours.setdefault(key, []).append(record["label"])
            theirs.setdefault(key, []).append(label)
            if (record["label"], record["regions_found"]) != (label, ",".join(regions)):
                differences.append((key, record["response"], record["label"], record["regions_found"], label))
    assert sum(map(len, ours.values())) == 9484
    assert len(differences) == 9 and {difference[2] for difference in differences} == {"misaligned"}, differences
    counts = {key: pd.Series(values).value_counts().to_dict() for key, values in ours.items()}
    assert counts[("zh-HK", "hk")] == {"correct": 215}  # a region answering its own forms is always correct
    assert counts[("zh-TW", "tw")] == {"correct": 987} and counts[("zh-CN", "cn")] == {"correct": 987}
    assert counts[("zh-MO", "mo")] == {"correct": 182}
    for key in ours:  # the matrix of label counts agrees with the independent one up to those 9 answers
        mismatched = sum(1 for difference in differences if difference[0] == key and difference[4] != "misaligned")
        assert abs(counts[key].get("misaligned", 0) - theirs[key].count("misaligned")) == mismatched, key


@pytest.mark.parametrize(
    ("answer", "prompted", "expected"),
    [
        ("丙車", "zh-TW", ("misaligned", ("hk", "mo"))),  # a shared form counts as each region's
        ("丙车", "zh-TW", ("misaligned", ("hk", "mo"))),  # … in either script
        ("乙车", "zh-TW", ("incorrect", ())),  # the prompted region's form in the other script is not correct
        ("乙車，也叫丙車", "zh-TW", ("misaligned", ("hk", "mo"))),  # misaligned wins, as in the paper
        ("书包袋", "zh-TW", ("misaligned", ("cn",))),  # my's 包袋 inside cn's longer form adds no region
        ("<think>甲车</think>乙車", "zh-TW", ("correct", ())),  # reasoning is not the answer
        (None, "zh-TW", ("incorrect", ())),
        ("乙車", "tw", ("correct", ())),  # a region code stands for its variety
        ("乙車", "zh_hant", ("correct", ())),  # … and so does the paper's language code
    ],
)
def test_label_regions(answer, prompted, expected):
    concept = {"1": HAND.concepts[0], "2": HAND.concepts[1]}["2" if answer == "书包袋" else "1"]
    forms = dict(concept.forms, tw=concept.forms["tw"])
    assert label_regions(answer, forms, prompted) == expected


@pytest.mark.parametrize(
    ("answer", "prompted", "paper", "item_set"),
    [
        # correct wins under the item-set rule, which still records the other regions the answer names
        ("乙車，也叫丙車", "zh-TW", ("misaligned", ("hk", "mo")), ("correct", ("hk", "mo"))),
        ("丙車", "zh-TW", ("misaligned", ("hk", "mo")), ("misaligned", ("hk", "mo"))),
        ("乙車", "zh-TW", ("correct", ()), ("correct", ())),
        # a correct form only inside a longer other-region form is no correct answer (my's 包袋 in cn's 书包袋)
        ("书包袋", "zh-MY", ("misaligned", ("cn",)), ("misaligned", ("cn",))),
        ("包袋，书包袋", "zh-MY", ("misaligned", ("cn",)), ("correct", ("cn",))),
    ],
)
def test_the_two_rules(answer, prompted, paper, item_set):
    concept = HAND.concepts[1] if "包袋" in answer else HAND.concepts[0]
    assert label_regions(answer, concept.forms, prompted, rule=PAPER_RULE) == paper
    assert label_regions(answer, concept.forms, prompted, rule=ITEM_SET_RULE) == item_set


def test_the_default_set_keeps_the_papers_rule_and_others_take_the_item_set_rule():
    assert rule_for(ItemSet(name="sctc", regions=("cn", "tw"), concepts=())) == PAPER_RULE
    assert rule_for(HAND) == ITEM_SET_RULE
    answers = pd.DataFrame({"concept_id": ["1"], "variety": ["zh-TW"], "response": ["乙車，也叫丙車"]})
    assert label_frame(answers, HAND)["label"].tolist() == ["correct"]
    assert label_frame(answers, HAND, rule=PAPER_RULE)["label"].tolist() == ["misaligned"]
    with pytest.raises(ValueError, match="unknown labelling rule 'loose'"):
        label_frame(answers, HAND, rule="loose")


def test_a_refusal_is_incorrect_whatever_its_text():
    forms = HAND.concepts[0].forms
    assert label_regions("乙車", forms, "zh-TW", outcome="refusal") == ("incorrect", ())
    answers = pd.DataFrame({"concept_id": ["1", "1"], "variety": ["zh-TW", "zh-TW"], "response": ["甲车", "甲车"],
                            "outcome": ["refusal", "ok"]})
    assert label_frame(answers, HAND)["label"].tolist() == ["incorrect", "misaligned"]


def test_the_default_set_gives_todays_forms():
    forms = region_forms({"cn": ("鼠标",), "tw": ("滑鼠",)}, "zh_hant")
    assert forms.correct == ("滑鼠",) and dict(forms.others) == {"鼠标": ("cn",), "鼠標": ("cn",)}


def test_the_default_set_labels_equal_todays_on_every_published_answer(sctc_source):
    """`label_regions` on the upstream 110 (cn/tw) against `label_answer` on the 108,900 replayed answers of the 11
    paper models, both scripts, three prompt variants."""
    from sctc_assets.lib.sctc_upstream import PAPER_MODELS, TERM_COLUMNS, TERMS_FILE, term_response_file
    from sctc_assets.lib.term.items import from_sctc_upstream
    from sctc_assets.lib.term.labels import label_answer, term_forms
    from sctc_assets.lib.term.terms import expected_alternatives, other_region_alternatives, parse_terms

    terms = parse_terms(sctc_source.read_csv(TERMS_FILE, TERM_COLUMNS))
    records = terms.sort_values("position").to_dict("records")
    items = from_sctc_upstream(terms)
    compared, differences = 0, []
    for lang in ("zh_hans", "zh_hant"):
        today = [term_forms(lang, expected_alternatives(term, lang), other_region_alternatives(term, lang))
                 for term in records]
        ours = [region_forms(concept.forms, lang) for concept in items.concepts]
        for model in PAPER_MODELS:
            for variant in (1, 2, 3):
                responses = sctc_source.read_csv(term_response_file(model, lang, variant, no_think=model == "ds"))
                for row, response in enumerate(responses["response"].tolist()):
                    term = row % len(records)
                    expected = label_answer(response, today[term])
                    label, _ = label_regions(response, ours[term], lang)
                    compared += 1
                    if label != expected:
                        differences.append((model, lang, variant, row, response, expected, label))
    assert compared == 108_900 and differences == []
