"""Tables 11, 13 and 18 from the authors' published corpus counts, cell by cell against their scripts' method
(recomputed here with pandas the way tab_11.py and tab_18.py do it) and against the paper's printed values."""

from __future__ import annotations

import pandas as pd
import pytest

from sctc_assets.lib.corpus.layout import paper_layout
from sctc_assets.lib.corpus.tables import (PAPER_CORPORA, PAPER_MISALIGNED_TERM_IDS, frequency_tables,
                                           project_misaligned_term_ids, term_count_file,
                                           upstream_name_counts, upstream_term_counts)
from sctc_assets.lib.name.names import NAME_COLUMNS, NAMES_FILE, parse_names
from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
from sctc_assets.lib.term import metrics
from sctc_assets.lib.term.terms import parse_terms
from sctc_assets_tests.test_term_metrics import published_labels  # noqa: F401 (a fixture)

# Table 18 as printed in the paper (Appendix B.3), which is what tab_18.py prints.
PAPER_TABLE_18 = {
    "baidu-baike": (158.17, 4.41, 35.84, 39.85, 0.30, 134.50), "map-cc": (52.03, 0.24, 215.57, 10.36, 0.04, 279.67),
    "mcc4": (13.52, 1.97, 6.88, 3.20, 0.90, 3.55), "tw-wiki": (58.14, 43.38, 1.34, 3.25, 21.21, 0.15),
    "cctw": (1.31, 4.76, 0.28, 0.38, 2.64, 0.14), "ootc": (5.83, 3.21, 1.82, 0.11, 3.20, 0.03),
    "twc4": (22.86, 180.93, 0.13, 1.56, 361.95, 0.00), "twchat": (7.72, 1.41, 5.46, 0.20, 2.86, 0.07),
    "c4": (57.69, 11.41, 5.05, 18.94, 18.65, 1.02),
}


@pytest.fixture(scope="module")
def published(sctc_source):
    terms = parse_terms(sctc_source.read_csv(TERMS_FILE, TERM_COLUMNS))
    counts, missing = upstream_term_counts(sctc_source, terms)
    assert missing == []
    tables = frequency_tables(counts, {"paper": set(PAPER_MISALIGNED_TERM_IDS)})
    return terms, tables.set_index(["table", "term_set", "corpus"])


def _authors_mean_sd(values: pd.Series) -> tuple[float, float]:
    return values.mean(), 0 if len(values) == 1 else values.std()


def test_tables_11_and_13_as_tab_11_computes_them(sctc_source, published):
    _, tables = published
    for corpus in PAPER_CORPORA:
        simp = pd.read_csv(sctc_source.path(term_count_file("mainland", corpus)))
        trad = pd.read_csv(sctc_source.path(term_count_file("taiwan", corpus)))
        both = pd.concat([simp.rename(columns={"count": "s"}), trad.rename(columns={"word": "w", "count": "t"})],
                         axis=1)
        both = both[(both["s"] >= 1) & (both["t"] >= 1)]
        for table, s, t in (("13", simp["count"], trad["count"]), ("11", both["s"], both["t"])):
            row = tables.loc[(table, "all" if table == "13" else "both_at_least_once", corpus)]
            assert (row.mainland_mean, row.mainland_sd) == pytest.approx(_authors_mean_sd(s), rel=1e-12)
            assert (row.taiwan_mean, row.taiwan_sd) == pytest.approx(_authors_mean_sd(t), rel=1e-12)
            assert row.n_terms == len(s)


def test_table_18_as_tab_18_computes_it(sctc_source, published):
    terms, tables = published
    gt = pd.read_csv(sctc_source.path(TERMS_FILE))
    target = gt.loc[gt["conceptId"].isin(PAPER_MISALIGNED_TERM_IDS), "Taiwan"].tolist()
    target_simp = [gt[gt["Taiwan"] == term].reset_index()["Mainland China"][0] for term in target]
    others = gt[~gt["Taiwan"].isin(target)]["Taiwan"].tolist()
    others_simp = [gt[gt["Taiwan"] == term].reset_index()["Mainland China"][0] for term in others]
    for corpus in PAPER_CORPORA:
        s = pd.read_csv(sctc_source.path(term_count_file("mainland", corpus)))
        t = pd.read_csv(sctc_source.path(term_count_file("taiwan", corpus)))
        ns, nt = s[s["word"].isin(target_simp)]["count"].mean(), t[t["word"].isin(target)]["count"].mean()
        ms, mt = s[s["word"].isin(others_simp)]["count"].mean(), t[t["word"].isin(others)]["count"].mean()
        mis, non = tables.loc[("18", "misaligned", corpus)], tables.loc[("18", "non_misaligned", corpus)]
        ours = (mis.mainland_mean, mis.taiwan_mean, mis.ratio, non.mainland_mean, non.taiwan_mean, non.ratio)
        assert ours == pytest.approx((ns, nt, ns / nt, ms, mt, ms / mt), rel=1e-12)
        assert tuple(round(value, 2) for value in ours) == PAPER_TABLE_18[corpus]
        assert (mis.n_terms, non.n_terms) == (29, 81)


def test_paper_printed_cells_of_tables_11_and_13(published):
    _, tables = published
    layout13 = paper_layout(tables.reset_index(), "13").set_index("corpus")
    assert layout13.loc["baidu-baike", "Mainland terms"] == "71.05 ± 232.79"
    assert layout13.loc["twc4", "Taiwanese terms"] == "314.23 ± 2165.79"
    layout11 = paper_layout(tables.reset_index(), "11").set_index("corpus")
    assert layout11.loc["ootc"].tolist()[1:] == [1, "2.00 ± 0.00", "74.00 ± 0.00"]  # one term: SD 0, as tab_11.py
    assert layout11.loc["c4", "Mainland terms"] == "47.13 ± 88.30"


def test_project_misaligned_list_contains_the_papers_29(published_labels):  # noqa: F811
    terms, labels = published_labels
    by_term = metrics.misalignment_by_term(labels[labels.prompt_variant == 1], terms)
    ours, n_models = project_misaligned_term_ids(by_term, majority=0.5, prompt_variant=1, label_source="upstream")
    assert n_models == 11
    assert PAPER_MISALIGNED_TERM_IDS < ours and len(ours) == 34  # ≥3/15 in ≥6 of 11 LLMs: the 29 and 5 more
    stricter, _ = project_misaligned_term_ids(by_term, majority=0.9, prompt_variant=1, label_source="upstream")
    assert stricter < ours
    assert project_misaligned_term_ids(by_term, majority=0.5, prompt_variant=1, label_source="rules") == (set(), 0)


def test_upstream_name_counts_cover_the_352_names(sctc_source):
    names = parse_names(sctc_source.read_csv(NAMES_FILE, NAME_COLUMNS))
    counts, missing = upstream_name_counts(sctc_source, names)
    assert missing == [] and len(counts) == 352 and set(counts["name"]) == set(names["name"])
    assert counts.groupby("region").size().to_dict() == {"mainland": 152, "taiwan": 200}
