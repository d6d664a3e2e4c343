"""Labels for item sets with any number of regions: the paper's rule generalized (pure Python, no Dagster).

For an answer to a concept prompted in a variety (a script plus a region, `PromptingVariety`):

- misaligned: the answer holds a form of another region — as the item set writes it, or converted into the
  prompting script with OpenCC (character by character and phrase-aware; the script-only configuration and the
  prompted region's character variants, as `labels.term_forms` does for the two paper regions), and, for a region
  that writes the prompting script itself (Hong Kong for zh-TW), converted into the other script: forms are
  compared across scripts. `regions_found` names every region whose form it holds, and a form several regions
  share counts as each of theirs. As in the paper and `labels.py`, misaligned wins over correct;
- correct: otherwise, when it holds a form of the prompted region in the prompting script (the form as written,
  which is in its region's script, and converted into the prompting script when that is another one);
- incorrect: anything else. A refusal (outcome `refusal`) is incorrect and an answer without text too, as in
  `labelling.py`.

Today's two refinements carry over: a form of another region found only inside an occurrence of a correct form
does not count, and a converted form equal to a correct form is not a misaligned form. One more, which only the
regions found can show: a form found only inside an occurrence of a longer misaligned form does not add its region
(the longest form wins). For the default set (cn/tw prompted in zh_hans/zh_hant) the labels equal `label_answer`'s.

Two rules decide an answer holding both a correct form and another region's (`rule`): `PAPER_RULE`, the paper's,
where misaligned wins (the default set keeps it, so every published number stays); and `ITEM_SET_RULE`, issue
#24's for any other set, where correct wins and misaligned means the answer holds *only* other regions' forms. Under
both, `regions_found` names the other regions whose forms the answer holds. `rule_for(item_set)` picks one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import pandas as pd

from sctc_assets.lib.conversion import convert, convert_chars
from sctc_assets.lib.generation import stored_text, strip_reasoning
from sctc_assets.lib.term.items import ItemSet
from sctc_assets.lib.term.labels import _occurrences, _unique
from sctc_assets.lib.varieties import SCRIPT_CONFIG, Catalog, PromptingVariety, load_catalog

REFUSAL = "refusal"
PAPER_RULE, ITEM_SET_RULE = "misaligned-first", "correct-first"
RULES = (PAPER_RULE, ITEM_SET_RULE)
DEFAULT_SET = "sctc"  # `items.from_sctc_upstream`'s name: the paper's 110 terms
_SIMPLIFIED_CONFIGS = ("t2s", "tw2s", "hk2s")


@dataclass(frozen=True)
class RegionForms:
    """The forms of one concept as seen from one prompting variety."""

    correct: tuple[str, ...]
    others: tuple[tuple[str, tuple[str, ...]], ...]  # (form, the other regions it is a form of)
    # (correct form, the other regions it is also a form of): an answer with it is correct and theirs too
    shared: tuple[tuple[str, tuple[str, ...]], ...] = ()


def region_script(catalog: Catalog, code: str) -> str:
    """The script a region writes in: its built-in variety's, else the one its OpenCC configuration converts into."""
    for row in catalog.varieties.values():
        if row.region == code:
            return row.script
    return "simplified" if catalog.region(code).opencc_script in _SIMPLIFIED_CONFIGS else "traditional"


def resolve_variety(prompted: PromptingVariety | str, catalog: Catalog) -> PromptingVariety:
    """A prompting variety from itself, its code (zh-HK), the paper's language code (zh_hant) or a region code (hk:
    the first variety of that region)."""
    if isinstance(prompted, PromptingVariety):
        return prompted
    if prompted in catalog.regions:
        for row in catalog.varieties.values():
            if row.region == prompted:
                return row
    return catalog.variety(prompted)


def region_forms(forms_by_region: Mapping[str, Sequence[str]], prompted: PromptingVariety | str,
                 catalog: Catalog | None = None) -> RegionForms:
    """The correct forms and the other regions' forms (as written and in the prompting script) of one concept."""
    catalog = catalog or load_catalog()
    variety = resolve_variety(prompted, catalog)
    configs = (variety.opencc_config, catalog.region(variety.region).opencc_script)

    other_script = next(config for script, config in SCRIPT_CONFIG.items() if script != variety.script)

    def with_conversions(forms: Iterable[str], *, also_other_script: bool = False) -> tuple[str, ...]:
        written = [form.strip() for form in forms]
        into = (*configs, other_script) if also_other_script else configs
        converted = [fn(form, config) for config in into for fn in (convert_chars, convert) for form in written]
        return _unique([*written, *converted])

    own = list(forms_by_region.get(variety.region) or ())
    if region_script(catalog, variety.region) == variety.script:
        correct = _unique(form.strip() for form in own)
    else:
        correct = with_conversions(own)
    regions_of: dict[str, list[str]] = {}
    shared: dict[str, list[str]] = {}
    for code, forms in forms_by_region.items():
        if code == variety.region or not forms:
            continue
        # a region writing the prompting script is also looked for in the other one (丙车 for Hong Kong's 丙車)
        for form in with_conversions(forms, also_other_script=region_script(catalog, code) == variety.script):
            codes = shared.setdefault(form, []) if form in correct else regions_of.setdefault(form, [])
            if code not in codes:
                codes.append(code)
    return RegionForms(correct=correct, others=tuple((form, tuple(codes)) for form, codes in regions_of.items()),
                       shared=tuple((form, tuple(codes)) for form, codes in shared.items()))


def answered_regions(text: str, forms: RegionForms, region: str, label: str, found: Sequence[str]) -> tuple[str, ...]:
    """Every region whose form the answer holds: those `find_regions` found, and for a correct answer the prompted
    region with the regions sharing the correct form it holds (a shared form counts as each region's)."""
    if label != "correct":
        return tuple(found)
    sharing = [code for form, codes in forms.shared if _occurrences(text, form) for code in codes]
    return _unique([region, *sharing, *found])


def _inside_longer(start: int, end: int, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether the occurrence [start, end) lies inside a longer one of `spans`: the longest form wins."""
    return any(a <= start and end <= b and (b - a) > (end - start) for a, b in spans)


def find_regions(text: str, forms: RegionForms) -> tuple[tuple[str, ...], list[str]]:
    """The regions whose forms `text` holds outside the correct forms' occurrences (a form inside an occurrence of
    a longer one of another region's does not count), and those forms."""
    correct_spans = [span for term in forms.correct for span in _occurrences(text, term)]
    found = []
    for form, regions in forms.others:
        spans = [span for span in _occurrences(text, form)
                 if not any(a <= span[0] and span[1] <= b for a, b in correct_spans)]
        if spans:
            found.append((form, regions, spans))
    if len(found) > 1:  # the longest form wins: drop forms only found inside another found form's occurrences
        longer = [(a, b) for other, _, spans in found for a, b in spans]
        found = [(form, regions, spans) for form, regions, spans in found
                 if any(not _inside_longer(s, e, longer) for s, e in spans)]
    regions = _unique(region for _, codes, _ in found for region in codes)
    return regions, [form for form, _, _ in found]


def rule_for(item_set: ItemSet) -> str:
    """The paper's rule for the default set, the item-set rule for every other."""
    return PAPER_RULE if item_set.name == DEFAULT_SET else ITEM_SET_RULE


def _check_rule(rule: str) -> None:
    if rule not in RULES:
        raise ValueError(f"unknown labelling rule {rule!r}; rules: {', '.join(RULES)}")


def _holds_correct(text: str, forms: RegionForms, hits: Sequence[str]) -> bool:
    """Whether `text` holds a correct form outside the occurrences of the longer other-region forms it holds (my's
    包袋 inside cn's 书包袋 is no Malaysian answer: the longest form wins, as in `find_regions`)."""
    longer = [span for hit in hits for span in _occurrences(text, hit)]
    return any(not _inside_longer(s, e, longer) for term in forms.correct for s, e in _occurrences(text, term))


def _label(text: str, forms: RegionForms, rule: str = PAPER_RULE) -> tuple[str, tuple[str, ...], list[str]]:
    regions, hits = find_regions(text, forms)
    if hits and rule == PAPER_RULE:
        return "misaligned", regions, hits
    if _holds_correct(text, forms, hits):
        return "correct", regions, hits
    return ("misaligned", regions, hits) if hits else ("incorrect", (), [])


def label_regions(response: object, concept_forms_by_region: Mapping[str, Sequence[str]] | RegionForms,
                  prompted_region: PromptingVariety | str, *, outcome: str | None = None,
                  catalog: Catalog | None = None, rule: str = PAPER_RULE) -> tuple[str, tuple[str, ...]]:
    """(label, regions found) of one answer; `prompted_region` is a prompting variety, its code or a region code."""
    _check_rule(rule)
    if outcome == REFUSAL:
        return "incorrect", ()
    forms = concept_forms_by_region if isinstance(concept_forms_by_region, RegionForms) else \
        region_forms(concept_forms_by_region, prompted_region, catalog)
    label, regions, _ = _label(strip_reasoning(response), forms, rule)
    return label, regions


LABEL_FRAME_COLUMNS = ["label", "regions_found", "misaligned_forms"]


def label_frame(answers: pd.DataFrame, item_set: ItemSet, catalog: Catalog | None = None, *,
                rule: str | None = None, answered: bool = False) -> pd.DataFrame:
    """`answers` (concept_id, variety, response and optionally outcome) with `label`, `regions_found` (the regions
    joined by ',') and `misaligned_forms` (joined by ', ').

    Each (concept, variety) has its forms built once and each distinct answer to it is labelled once. An answer to
    a concept without a form of the prompted region is not counted: its label is missing (None/NaN). `rule`:
    default `rule_for(item_set)`. `answered`: `regions_found` names every region whose form the answer holds (for
    a correct answer its own region and those sharing the form too), as the region matrix counts them."""
    rule = rule or rule_for(item_set)
    _check_rule(rule)
    catalog = catalog or load_catalog()
    concepts = {concept.concept_id: concept for concept in item_set.concepts}
    outcomes = answers["outcome"].tolist() if "outcome" in answers.columns else [None] * len(answers)
    forms_of: dict[tuple[str, str], RegionForms | None] = {}
    labelled: dict[tuple, tuple[str | None, str, str]] = {}
    results = []
    for concept_id, variety_code, response, outcome in zip(answers["concept_id"].astype(str).tolist(),
                                                           answers["variety"].tolist(), answers["response"].tolist(),
                                                           outcomes):
        key = (concept_id, variety_code)
        if key not in forms_of:
            try:
                concept = concepts[concept_id]
            except KeyError:
                raise ValueError(f"answers: concept {concept_id!r} is not in item set {item_set.name!r}") from None
            variety = resolve_variety(variety_code, catalog)
            forms_of[key] = region_forms(concept.forms, variety, catalog) if concept.forms_of(variety.region) else None
        forms = forms_of[key]
        if forms is None:
            results.append((None, "", ""))
            continue
        if outcome == REFUSAL:
            results.append(("incorrect", "", ""))
            continue
        answer = (key, stored_text(response))
        if answer not in labelled:
            text = strip_reasoning(answer[1])
            label, regions, hits = _label(text, forms, rule)
            if answered:
                regions = answered_regions(text, forms, resolve_variety(variety_code, catalog).region, label, regions)
            labelled[answer] = (label, ",".join(regions), ", ".join(hits))
        results.append(labelled[answer])
    labelled_frame = answers.copy()
    labels, regions, hits = zip(*results) if results else ((), (), ())
    labelled_frame["label"] = list(labels)
    labelled_frame["regions_found"] = list(regions)
    labelled_frame["misaligned_forms"] = list(hits)
    return labelled_frame
