"""CPU time of labelling 100 k answers of a 4-region item set against 100 k answers of the default set (issue #24's
target: at most 2× the default set's).

Measures `region_labels.label_frame(..., answered=True)` alone, as the item-set labels asset calls it (process CPU
seconds, one run each, the default set first), on answers made offline with a fixed seed: for a random concept and
prompting variety, a random region's form (in the prompting script or as the item set writes it) or a wrong word,
inside one of ten openings and ten endings, so that answers repeat about as much as 15 trials of three prompt
variants do. The sets:

- default: the upstream 110 terms (cn/tw) prompted in zh-CN and zh-TW, from `$SCTC_UPSTREAM` (a local archive or
  folder; the upstream resource downloads the pinned archive only when it is unset);
- 4-region: the same 110 concepts with Hong Kong and Macau forms for every concept (Taiwan's forms written with
  OpenCC's Hong Kong variants, plus the Mainland forms so that forms are shared across regions: more forms per
  concept than any real list), prompted in zh-CN, zh-TW, zh-HK and zh-MO;
- with `$SCTC_CSLD_UPSTREAM` set, also the csld 同實異名 list (987 concepts, cn/tw/hk/mo), read at run time.

    python bench/region_labelling.py
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's sctc_assets, not an installed one

ANSWERS = 100_000
OPENINGS = ("", "答案是", "这叫", "這叫做", "应该是「", "我认为是", "通常称为", "一般叫", "「", "可能是")
ENDINGS = ("", "。", "」", "」。", "吧", "，也有人这么说。", "！", "（常用说法）", "\n", "。希望有帮助")
WRONG = ("不知道", "东西", "東西", "工具", "食物", "交通工具")


def default_set():
    from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
    from sctc_assets.lib.term.items import from_sctc_upstream
    from sctc_assets.lib.term.terms import parse_terms
    from sctc_assets.resources.upstream import SCTCUpstreamResource

    source = SCTCUpstreamResource().open()
    return from_sctc_upstream(parse_terms(source.read_csv(TERMS_FILE, TERM_COLUMNS)))


def four_region_set(base):
    from sctc_assets.lib.conversion import convert
    from sctc_assets.lib.term.items import ItemSet

    concepts = []
    for concept in base.concepts:
        hong_kong = tuple(dict.fromkeys([convert(form, "s2hk") for form in concept.forms_of("tw")]
                                        + [convert(form, "s2hk") for form in concept.forms_of("cn")]))
        concepts.append(replace(concept, forms={**concept.forms, "hk": hong_kong,
                                                "mo": tuple(dict.fromkeys([*concept.forms_of("tw"), *hong_kong]))}))
    return ItemSet(name="4-region", regions=("cn", "tw", "hk", "mo"), concepts=tuple(concepts))


def answers_for(item_set, varieties, seed: int = 24) -> pd.DataFrame:
    from sctc_assets.lib.conversion import convert
    from sctc_assets.lib.varieties import load_catalog

    catalog = load_catalog()
    rows = [catalog.variety(code) for code in varieties]
    rng = random.Random(seed)
    records = []
    for _ in range(ANSWERS):
        concept = rng.choice(item_set.concepts)
        variety = rng.choice(rows)
        if rng.random() < 0.2:
            word = rng.choice(WRONG)
        else:
            forms = concept.forms_of(rng.choice(item_set.regions)) or concept.forms_of(variety.region)
            word = rng.choice(forms) if forms else rng.choice(WRONG)
            if rng.random() < 0.5:
                word = convert(word, variety.opencc_config)
        records.append({"concept_id": concept.concept_id, "variety": variety.code,
                        "response": rng.choice(OPENINGS) + word + rng.choice(ENDINGS)})
    return pd.DataFrame(records)


def cpu_seconds(item_set, answers: pd.DataFrame) -> tuple[float, pd.DataFrame]:
    from sctc_assets.lib.term.region_labels import label_frame

    start = time.process_time()
    labelled = label_frame(answers, item_set, answered=True)  # as the item-set labels asset calls it
    return time.process_time() - start, labelled


def main() -> None:
    import os

    default = default_set()
    sets = [("default (cn/tw)", default, ("zh-CN", "zh-TW")),
            ("4-region (cn/tw/hk/mo)", four_region_set(default), ("zh-CN", "zh-TW", "zh-HK", "zh-MO"))]
    if os.environ.get("SCTC_CSLD_UPSTREAM"):
        from sctc_assets.lib.term.items import CSLD_THREE_PLACES, csld_path, from_csld

        sets.append(("csld 同實異名 (cn/tw/hk/mo)", from_csld(csld_path(CSLD_THREE_PLACES)),
                     ("zh-CN", "zh-TW", "zh-HK", "zh-MO")))
    timings = {}
    for name, item_set, varieties in sets:
        answers = answers_for(item_set, varieties)
        seconds, labelled = cpu_seconds(item_set, answers)
        timings[name] = seconds
        shares = labelled["label"].value_counts(normalize=True).round(3).to_dict()
        print(f"{name}: {len(answers):,} answers ({answers['response'].nunique():,} distinct texts), "
              f"{len(item_set)} concepts: {seconds:.2f} CPU s; labels {shares}")
    baseline = timings["default (cn/tw)"]
    for name, seconds in timings.items():
        if name != "default (cn/tw)":
            print(f"ratio {name} / default: {seconds / baseline:.2f}× (target ≤ 2×)")


if __name__ == "__main__":
    main()
