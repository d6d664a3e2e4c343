"""The corpus frequency tables as the paper prints them: formatting only, so `sctc run`'s summary (and the
benchmark's spec) reads it without the statistics behind the tables."""

from __future__ import annotations

import pandas as pd


def paper_layout(tables: pd.DataFrame, table: str) -> pd.DataFrame:
    """A table as the paper prints it (2 decimals), one block per count source (and misalignment list)."""
    chosen = tables[tables["table"] == table]
    if table in ("11", "13"):
        return pd.DataFrame({
            "count_source": chosen["count_source"], "corpus": chosen["corpus"], "n_terms": chosen["n_terms"],
            "Mainland terms": [f"{m:.2f} ± {s:.2f}" for m, s in zip(chosen["mainland_mean"], chosen["mainland_sd"])],
            "Taiwanese terms": [f"{m:.2f} ± {s:.2f}" for m, s in zip(chosen["taiwan_mean"], chosen["taiwan_sd"])],
        }).reset_index(drop=True)
    keys = ["count_source", "misaligned_from", "corpus"]
    sides = {term_set: chosen[chosen["term_set"] == term_set].set_index(keys) for term_set in ("misaligned",
                                                                                              "non_misaligned")}
    joined = sides["misaligned"].join(sides["non_misaligned"], lsuffix="_m", rsuffix="_n")
    return pd.DataFrame({
        "misaligned S": joined["mainland_mean_m"].map("{:.2f}".format),
        "misaligned T": joined["taiwan_mean_m"].map("{:.2f}".format),
        "misaligned S/T": joined["ratio_m"].map("{:.2f}".format),
        "non-misaligned S": joined["mainland_mean_n"].map("{:.2f}".format),
        "non-misaligned T": joined["taiwan_mean_n"].map("{:.2f}".format),
        "non-misaligned S/T": joined["ratio_n"].map("{:.2f}".format),
        "n misaligned": joined["n_terms_m"],
    }).reset_index()
