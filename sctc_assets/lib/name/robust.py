"""The Mainland share with the candidate list as the unit: cluster-robust standard errors by list, next to the
paper's z-test that treats every shuffle of a list as an independent answer; BH across models × languages as
`name_choice_tests`; and the power of the design run (lists × shuffles, observed ICC within lists)."""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib import power, robust, stats

KEYS = ["model", "lang", "experiment", "extraction_source"]
FAMILY = ["experiment", "extraction_source"]


def list_clustered_rates(selections: pd.DataFrame, *, effect: float = 0.05) -> pd.DataFrame:
    """Per model, lang, experiment and extraction source, over the valid answers: the Mainland share, the paper's
    two-sided z-test against 50 % (null SE, every answer independent), the same test with a cluster-robust (CR1)
    SE by candidate list and its 95 % CI (`ci_low`/`ci_high`/`ci_method`), the ICC of Mainland choices within a
    list, the design effect, and the power figures: the minimum detectable departure from 50 % and the lists
    needed for a share of 50 % − `effect`."""
    valid = selections[selections["region"].isin(["mainland", "taiwan"])]
    rows = []
    for keys, group in valid.groupby(KEYS, sort=True):
        mainland = (group["region"] == "mainland").to_numpy(float)
        lists = group["list_source"].astype(str) + ":" + group["list_id"].astype(str)
        clustered = robust.cluster_robust_share(mainland, lists)
        per_list = pd.DataFrame({"list": lists.to_numpy(), "y": mainland}).groupby("list")["y"].agg(["sum", "size"])
        icc = robust.icc_anova(per_list["sum"], per_list["size"])
        size = float(per_list["size"].mean())
        _, paper_p = stats.one_sample_proportion_ztest(int(mainland.sum()), len(mainland), 0.5, null_se=True)
        rows.append({
            **dict(zip(KEYS, keys)), "n_valid": len(mainland), "n_lists": clustered["n_clusters"],
            "valid_per_list": size, "mainland_rate": clustered["share"], "paper_z_p": paper_p,
            "cr_se": clustered["cr_se"], "cr_z": clustered["cr_z"], "cr_p": clustered["cr_p"],
            "ci_low": clustered["ci_low"], "ci_high": clustered["ci_high"],
            "ci_method": "cluster-robust (CR1) by candidate list, normal 95 %", "icc_list": icc,
            "design_effect": power.design_effect(size, icc),
            "mde_share": power.mde_share(clustered["n_clusters"], size, icc),
            "target_effect": effect, "lists_needed": power.lists_needed(effect, size, icc),
            "power_design": "one-sample z on the share (NormalIndPower, ratio 0, Cohen's h), n / design effect "
                            "1 + (m − 1)·ICC, m = valid answers per list",
        })
    return pd.DataFrame(rows)


def with_bh(rates: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """BH across models × languages per experiment and extraction source, for the paper's and the clustered test,
    and whether the paper's significance survives clustering by list."""
    if rates.empty:
        return rates
    frames = []
    for _, family in rates.groupby(FAMILY, sort=True):
        family = family.copy()
        family["paper_z_p_bh"] = stats.bh_adjust(family["paper_z_p"])
        family["cr_p_bh"] = stats.bh_adjust(family["cr_p"])
        frames.append(family)
    table = pd.concat(frames, ignore_index=True)
    table["paper_significant"] = [robust.survives(p, alpha) for p in table["paper_z_p_bh"]]
    table["clustered_significant"] = [robust.survives(p, alpha) for p in table["cr_p_bh"]]
    table["survives"] = [None if paper is not True else bool(clustered)
                         for paper, clustered in zip(table["paper_significant"], table["clustered_significant"])]
    return table.sort_values(FAMILY + ["model", "lang"]).reset_index(drop=True)
