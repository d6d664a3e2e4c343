"""What the choices are related to: training-data imbalance (corpus frequency), tokenization and the model's own
log-probabilities, the factors SC-TC-Bench's Limitations name as the next step (#41 point 5).

Every factor is a log ratio of the Mainland form against the Taiwanese one, 0 at parity:
- `corpus`: log((records containing the Mainland form + 1) / (records containing the Taiwanese form + 1)), summed
  over the corpora counted;
- `tokens`: log(tokens of the Mainland form / tokens of the Taiwanese form) under the model's tokenizer;
- `logprob`: log-probability of the Mainland form minus that of the Taiwanese one (names: the raw last-name
  log-probabilities of `last_name_logprobs`; the term task has no log-probabilities of its forms, so it is left out).

`fit_factors`: per outcome, one trial-level logistic GEE (statsmodels' `GEE`, `Binomial`, `Exchangeable`, robust
sandwich SEs) of the 0/1 outcome on every factor the model has, clustered by the unit the robustness work
established (the term; for names the candidate list); the factors are z-scored over the units (mean 0, SD 1 across
terms or lists), so a coefficient is the change in log-odds per SD of the factor across units, with its 95 % Wald
interval. A factor without variation across the units is not entered. The estimates are statsmodels', solved on the
distinct (cluster, covariate pattern) cells instead of trial by trial (`_gee`; equal to 1e-8 in the tests).

`gap_shares`: the share of the S − T gap each factor accounts for, defined as the part of the gap that vanishes at
the factor's parity. The gap is the log-odds ratio of the outcome under Simplified against Traditional prompts,
`g0` (GEE, outcome ~ S, clustered by unit). With the factor and its interaction with the prompting script added
(outcome ~ S + x + S·x, `x` the raw log ratio), the S coefficient `g_x` is the gap where the factor is at parity
(x = 0: equal frequency, equal tokens, equal log-probability). share = (g0 − g_x) / g0: 1 when the gap is wholly
what the factor's imbalance predicts, 0 when the factor explains none of it, negative when the gap would be larger
at parity. The interaction is needed because a factor constant within a unit cannot move the S − T contrast of the
same units on its own (it would only shift both scripts alike). NaN, with the reason in `gap_note`, when there is
no gap to share: only one script's answers, an outcome that never varies, a fit that fails, or |g0| below
`GAP_TOLERANCE` (a gap of zero within the fit's precision: the share would be a division by ~0); never ±inf.
"""

from __future__ import annotations

import math
import warnings
from typing import Sequence

import numpy as np
import pandas as pd


NAN = float("nan")
Z95 = 1.959963984540054
FACTORS = ("corpus", "tokens", "logprob")
# |g0| below this (log-odds) is a zero gap: GEE's own convergence tolerance is 1e-6 on the parameters.
GAP_TOLERANCE = 1e-6
FACTOR_COLUMNS = {"corpus": "corpus_log_ratio", "tokens": "token_log_ratio", "logprob": "logprob_diff"}


def log_ratio(mainland: Sequence[float], taiwan: Sequence[float], *, add: float = 0.0) -> np.ndarray:
    """log((mainland + add) / (taiwan + add)), NaN where either side is missing or not positive."""
    m = np.asarray(mainland, dtype=float) + add
    t = np.asarray(taiwan, dtype=float) + add
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.log(m / t)
    values[~np.isfinite(values)] = np.nan
    return values


class _Fit:
    """What the tables read of a GEE fit: `params`, `bse`, `pvalues` (two-sided Wald, normal)."""

    def __init__(self, params: np.ndarray, cov: np.ndarray):
        self.params = params
        self.bse = np.sqrt(np.clip(np.diag(cov), 0, None))
        # 2 · P(Z > |z|) = erfc(|z| / √2), as scipy's norm.sf gives it, without importing scipy.stats (seconds)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.abs(params / self.bse)
        self.pvalues = np.array([math.erfc(value / math.sqrt(2)) if math.isfinite(value) else NAN for value in z])


def _statsmodels_gee(y: np.ndarray, design: np.ndarray, clusters: np.ndarray):
    from statsmodels.genmod import cov_struct, families
    from statsmodels.genmod.generalized_estimating_equations import GEE

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GEE(y, design, groups=clusters, family=families.Binomial(),
                   cov_struct=cov_struct.Exchangeable()).fit()


def _gee(y: np.ndarray, design: np.ndarray, clusters: np.ndarray):
    """statsmodels' logistic GEE with an exchangeable working correlation and its robust covariance (`GEE(…,
    Binomial(), Exchangeable()).fit()`), solved on the distinct (cluster, covariate pattern) cells: the trials of a
    cell share their mean, so every sum the estimating equations, the moment estimate of the correlation and the
    sandwich take over trials is one over cells weighted by their counts (`_aggregated_gee`). The same estimates
    (test_bias_factors compares them), without statsmodels' loop over clusters per iteration; statsmodels itself
    where the aggregated solve does not converge. A design with fewer than two units or of deficient rank, and
    iterates that run off to fitted probabilities of 0 or 1 (separation), are refused (`LinAlgError`): their
    coefficients are not identified or not finite, and the callers report them as not estimable."""
    design = np.asarray(design, float)
    if np.unique(np.asarray(clusters)).size < 2:
        raise np.linalg.LinAlgError("one unit only: the robust covariance needs at least two")
    if np.linalg.matrix_rank(design) < design.shape[1]:
        # statsmodels would answer with an arbitrary solution (a pseudo-inverse's), slowly: not estimable
        raise np.linalg.LinAlgError("a factor is constant or collinear with another (rank-deficient design)")
    fitted = _aggregated_gee(np.asarray(y, float), design, np.asarray(clusters))
    return fitted if fitted is not None else _statsmodels_gee(y, design, clusters)


def _aggregated_gee(y: np.ndarray, design: np.ndarray, clusters: np.ndarray, *, maxiter: int = 100,
                    tol: float = 1e-10) -> _Fit | None:
    n_obs, p = design.shape
    # cells: one per cluster and covariate pattern
    keys = np.column_stack([clusters.astype(float), design])
    cells, index = np.unique(keys, axis=0, return_inverse=True)
    index = index.ravel()
    n = np.bincount(index, minlength=len(cells)).astype(float)
    k = np.bincount(index, weights=y, minlength=len(cells))
    x = cells[:, 1:]
    group = pd.factorize(cells[:, 0])[0]
    groups = int(group.max()) + 1
    size = np.bincount(group, weights=n, minlength=groups)
    pairs = float(np.sum(size * (size - 1) / 2))
    # start at 0 under independence (ρ = 0); ρ is re-estimated before every later step, as statsmodels does after
    # its GLM start; both stop at the same fixed point of the estimating equations (the score's norm below `tol`)
    beta = np.zeros(p)
    rho = 0.0
    for iteration in range(maxiter):
        with np.errstate(over="ignore"):
            mu = 1 / (1 + np.exp(-(x @ beta)))
        var = mu * (1 - mu)
        if np.any(var <= 1e-300):
            # a linear predictor past ±690: the iterates run off to infinity (separation); statsmodels' fit runs its
            # 60 iterations to the same end (NaN estimates), so it is not asked
            raise np.linalg.LinAlgError("fitted probabilities reached 0 or 1 (separation): no finite coefficients")
        sd = np.sqrt(var)
        # Pearson residual sums per cell: Σ e and Σ e² over its trials
        e_sum = (k - n * mu) / sd
        e2_sum = (k * (1 - mu) ** 2 + (n - k) * mu ** 2) / var
        per_group_e = np.bincount(group, weights=e_sum, minlength=groups)
        if iteration:
            scale = e2_sum.sum() / (n_obs - p)
            within = np.sum((per_group_e ** 2 - np.bincount(group, weights=e2_sum, minlength=groups)) / 2)
            rho = within / scale / (pairs - p) if pairs > p else 0.0
        if not -1 < rho < 1:
            return None  # a degenerate working correlation: statsmodels' own fit decides (`fit_factors`)
        c = rho / (1 - rho) / (1 + rho * (size - 1))
        # score_i = Σ x (k − n μ) / (1 − ρ) − c_i E_i u_i, B_i = Σ n s² x x' / (1 − ρ) − c_i u_i u_i', u_i = Σ n s x
        u = np.zeros((groups, p))
        np.add.at(u, group, (n * sd)[:, None] * x)
        direct = np.zeros((groups, p))
        np.add.at(direct, group, (k - n * mu)[:, None] * x)
        scores = direct / (1 - rho) - (c * per_group_e)[:, None] * u
        bmat = (x * (n * var)[:, None]).T @ x / (1 - rho) - (u * c[:, None]).T @ u
        score = scores.sum(axis=0)
        try:
            step = np.linalg.solve(bmat, score)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(step)):
            return None
        if iteration and np.sqrt(np.sum(score ** 2)) < tol:
            try:
                inverse = np.linalg.inv(bmat)
            except np.linalg.LinAlgError:
                return None
            return _Fit(beta.copy(), inverse @ (scores.T @ scores) @ inverse)
        beta = beta + step
    return None


def _unit_zscores(values: np.ndarray, clusters: np.ndarray) -> np.ndarray | None:
    """`values` (constant within each cluster) standardized by the mean and SD (ddof 1) of one value per cluster;
    None when they do not vary across clusters."""
    per_unit = pd.Series(values).groupby(clusters).first().to_numpy()
    if len(per_unit) < 2:
        return None
    sd = float(np.std(per_unit, ddof=1))
    if not sd > 0:
        return None
    return (values - float(np.mean(per_unit))) / sd


def fit_factors(outcome: Sequence[float], factors: pd.DataFrame, cluster: Sequence[object]) -> tuple[list[dict], list[str]]:
    """One logistic GEE of `outcome` on the z-scored columns of `factors` (rows with a missing factor dropped),
    clustered by `cluster`. Returns one row per entered factor (`coef`, `se`, `ci_low`, `ci_high`, `p`: log-odds per
    SD across units) and the factors entered. An outcome that never varies gives p = 1 and NaN estimates."""
    y = np.asarray(outcome, dtype=float)
    keep = ~factors.isna().any(axis=1).to_numpy() if len(factors.columns) else np.ones(len(y), bool)
    y, frame = y[keep], factors[keep].reset_index(drop=True)
    clusters = pd.factorize(pd.Series(list(np.asarray(cluster, dtype=object)[keep])))[0]
    columns, entered = [], []
    for name in frame.columns:
        z = _unit_zscores(frame[name].to_numpy(float), clusters)
        if z is not None:
            columns.append(z)
            entered.append(name)
    rows = [{"factor": name, "coef": NAN, "se": NAN, "ci_low": NAN, "ci_high": NAN, "p": NAN,
             "n_units": int(len(np.unique(clusters))), "n_trials": int(len(y))} for name in entered]
    if not entered or len(y) == 0:
        return rows, entered
    if np.ptp(y) == 0:
        for row in rows:
            row["p"] = 1.0
        return rows, entered
    design = np.column_stack([np.ones(len(y))] + columns)
    try:
        fitted = _gee(y, design, clusters)
        params, bse, pvalues = (np.asarray(values, dtype=float) for values in (fitted.params, fitted.bse,
                                                                                 fitted.pvalues))
    except (np.linalg.LinAlgError, ValueError):
        return rows, entered
    for index, row in enumerate(rows, start=1):
        coef, se = params[index], bse[index]
        if math.isfinite(coef) and math.isfinite(se):
            row.update(coef=float(coef), se=float(se), ci_low=float(coef - Z95 * se), ci_high=float(coef + Z95 * se),
                       p=float(pvalues[index]))
    return rows, entered


def _no_share(note: str, g0: float = NAN, gx: float = NAN) -> dict:
    return {"gap_log_odds": g0, "gap_at_parity": gx, "gap_share": NAN, "gap_note": note}


def gap_shares(outcome: Sequence[float], simplified: Sequence[float], factors: pd.DataFrame,
               cluster: Sequence[object]) -> dict[str, dict[str, float]]:
    """Per factor: `gap_log_odds` (g0, S vs T), `gap_at_parity` (g_x), `gap_share` ((g0 − g_x) / g0) and
    `gap_note` (why the share is NaN; empty when it is not), as the module docstring defines them; rows with a
    missing factor are left out of that factor's two fits."""
    y_all = np.asarray(outcome, dtype=float)
    s_all = np.asarray(simplified, dtype=float)
    units = np.asarray(cluster, dtype=object)
    shares = {}
    for name in factors.columns:
        x_all = factors[name].to_numpy(float)
        keep = ~np.isnan(x_all)
        y, s, x = y_all[keep], s_all[keep], x_all[keep]
        clusters = pd.factorize(pd.Series(list(units[keep])))[0]
        if len(y) == 0:
            shares[name] = _no_share("no answers with this factor known")
            continue
        if np.ptp(s) == 0:
            shares[name] = _no_share("only one prompting script's answers: no S − T gap to share")
            continue
        if np.ptp(y) == 0:
            shares[name] = _no_share("the outcome never varies: no S − T gap to share")
            continue
        try:
            g0 = float(np.asarray(_gee(y, np.column_stack([np.ones(len(y)), s]), clusters).params)[1])
            with_factor = _gee(y, np.column_stack([np.ones(len(y)), s, x, s * x]), clusters)
            gx = float(np.asarray(with_factor.params)[1])
        except (np.linalg.LinAlgError, ValueError) as exc:
            shares[name] = _no_share(f"the GEE did not fit: {exc}")
            continue
        if not (math.isfinite(g0) and math.isfinite(gx)):
            shares[name] = _no_share("the GEE gave no finite gap (separation)",
                                     g0 if math.isfinite(g0) else NAN, gx if math.isfinite(gx) else NAN)
        elif abs(g0) < GAP_TOLERANCE:
            shares[name] = _no_share(f"no S − T gap (|log-odds ratio| < {GAP_TOLERANCE:g}): a share of it is "
                                     "undefined", g0, gx)
        else:
            shares[name] = {"gap_log_odds": g0, "gap_at_parity": gx, "gap_share": (g0 - gx) / g0, "gap_note": ""}
    return shares


def bh_adjust(pvalues: Sequence[float]) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values, NaN kept and not counted: `lib.stats.bh_adjust` (statsmodels
    `fdr_bh`, the same values; test_bias_factors compares them) in numpy, without importing statsmodels (a second
    of every stage process's time)."""
    values = np.asarray(pvalues, dtype=float)
    adjusted = np.full(len(values), np.nan)
    finite = np.flatnonzero(~np.isnan(values))
    if len(finite):
        order = np.argsort(values[finite], kind="mergesort")
        ranked = values[finite][order] * len(finite) / np.arange(1, len(finite) + 1)
        stepped = np.minimum(np.minimum.accumulate(ranked[::-1])[::-1], 1.0)
        adjusted[finite[order]] = stepped
    return adjusted


def model_table(rows: list[dict], columns: Sequence[str]) -> pd.DataFrame:
    """One model's rows as its table, `p_bh` the BH adjustment of `p` across the whole table (`bh_adjust`)."""
    if not rows:
        return pd.DataFrame(columns=list(columns))
    table = pd.DataFrame(rows)
    table["p_bh"] = bh_adjust(table["p"].to_numpy(float))
    return table[list(columns)]


def left_out_note(entered: Sequence[str], present: Sequence[str], missing: dict[str, str]) -> str:
    """`factor: why` for each of `FACTORS` a fit did not have, `; `-separated: `missing`'s reason (the model has
    no such values), else the values did not vary across the units."""
    notes = []
    for name in FACTORS:
        if name in entered:
            continue
        why = missing.get(name) or ("no variation across the units" if name in present else "no values")
        notes.append(f"{name}: {why}")
    return "; ".join(notes)


def _share_of(shares: dict, factor: str, missing_pair: str) -> dict:
    return shares.get(factor) or _no_share(missing_pair)


# --- the term task -----------------------------------------------------------------------------------------------


def first_form(published: str) -> str:
    """The first of a published term's `/`-separated alternatives."""
    return str(published).split("/")[0].strip()


def term_corpus_ratios(counts: pd.DataFrame) -> pd.Series:
    """Per term: log((Σ Mainland records + 1) / (Σ Taiwanese records + 1)) over every corpus of `counts` (columns
    `term_id`, `mainland`, `taiwan`: the forms as written)."""
    if counts.empty:
        return pd.Series(dtype=float, name="corpus")
    summed = counts.groupby("term_id")[["mainland", "taiwan"]].sum()
    return pd.Series(log_ratio(summed["mainland"], summed["taiwan"], add=1.0), index=summed.index, name="corpus")


def term_token_ratios(terms: pd.DataFrame, encode) -> pd.Series:
    """Per term: log(tokens of the first Mainland form / tokens of the first Taiwanese form) under `encode`."""
    mainland = [len(encode(first_form(term))) for term in terms["term_mainland"]]
    taiwan = [len(encode(first_form(term))) for term in terms["term_taiwan"]]
    return pd.Series(log_ratio(mainland, taiwan), index=terms["term_id"].to_numpy(), name="tokens")


def trial_rows(by_term: pd.DataFrame, measure: str) -> pd.DataFrame:
    """0/1 outcome of every trial (`lang`, `term_id`, `y`) rebuilt from per-term counts (`n_<measure>`, `n_trials`)
    of `term_misalignment_by_term`, every prompt variant pooled."""
    trials = by_term["n_trials"].to_numpy(int)
    successes = by_term[f"n_{measure}"].to_numpy(int)
    y = np.concatenate([np.r_[np.ones(k), np.zeros(n - k)] for k, n in zip(successes, trials)]) \
        if len(trials) else np.array([])
    return pd.DataFrame({"lang": np.repeat(by_term["lang"].to_numpy(), trials),
                         "term_id": np.repeat(by_term["term_id"].to_numpy(), trials), "y": y})


TERM_COLUMNS = ["model", "lang", "label_source", "outcome", "factor", "factors_entered", "factors_left_out",
                "tokenizer", "n_units", "n_trials", "coef", "se", "ci_low", "ci_high", "p", "p_bh", "gap_log_odds",
                "gap_at_parity", "gap_share", "gap_note"]


def term_bias_factors(by_term: pd.DataFrame, factors: pd.DataFrame, *, model: str, label_source: str,
                      tokenizer: str, simplified: str, traditional: str,
                      missing: dict[str, str] | None = None) -> pd.DataFrame:
    """One model's table: per prompting language and outcome (`correct`, `misaligned`), the factor GEE's rows;
    every row also carries the factor's share of the S − T gap of that outcome (the same for both languages) and,
    in `factors_left_out`, each factor the fit lacked with why (`missing`: factor → the caller's reason); BH
    across the model's whole table (every language, outcome and factor)."""
    rows = []
    block = by_term[by_term["label_source"] == label_source]
    for outcome in ("correct", "misaligned"):
        trials = trial_rows(block, outcome).join(factors, on="term_id")
        present = [name for name in factors.columns if trials[name].notna().any()]
        pair = trials[trials["lang"].isin([simplified, traditional])]
        shares = gap_shares(pair["y"], (pair["lang"] == simplified).astype(float), pair[present], pair["term_id"]) \
            if {simplified, traditional} <= set(pair["lang"]) else {}
        for lang, frame in trials.groupby("lang", sort=True):
            fitted, entered = fit_factors(frame["y"], frame[present], frame["term_id"])
            for row in fitted:
                rows.append({"model": model, "lang": lang, "label_source": label_source, "outcome": outcome,
                             "factors_entered": ",".join(entered),
                             "factors_left_out": left_out_note(entered, present, missing or {}),
                             "tokenizer": tokenizer, **row,
                             **_share_of(shares, row["factor"], "no Simplified and Traditional prompts to compare")})
    return model_table(rows, TERM_COLUMNS)


# --- the name task -----------------------------------------------------------------------------------------------


def list_factors(lists: pd.DataFrame, name_values: dict[str, pd.Series]) -> pd.DataFrame:
    """Per candidate list (`experiment`, `list_source`, `list_id`): each factor of its Mainland names against its
    Taiwanese names. `name_values` maps a factor to a per-name Series: `corpus` (records containing the name;
    log((mean Mainland + 1) / (mean Taiwanese + 1))), `tokens` (log of the mean token counts' ratio), `logprob`
    (mean Mainland minus mean Taiwanese raw last-name log-probability)."""
    keys = ["experiment", "list_source", "list_id"]
    first = lists.drop_duplicates(keys)
    out = first[keys].reset_index(drop=True)
    for name, values in name_values.items():
        lookup = values.to_dict()

        def mean_of(names) -> float:
            found = [lookup[n] for n in names if n in lookup and pd.notna(lookup[n])]
            return float(np.mean(found)) if found else NAN

        m = np.array([mean_of(names) for names in first["mainland_names"]])
        t = np.array([mean_of(names) for names in first["taiwan_names"]])
        if name == "logprob":
            out[name] = m - t
        else:
            out[name] = log_ratio(m, t, add=1.0 if name == "corpus" else 0.0)
    return out


NAME_COLUMNS = ["model", "lang", "experiment", "extraction_source", "outcome", "factor", "factors_entered",
                "factors_left_out", "tokenizer", "n_units", "n_trials", "coef", "se", "ci_low", "ci_high", "p", "p_bh",
                "gap_log_odds", "gap_at_parity", "gap_share", "gap_note"]


def name_bias_factors(selections: pd.DataFrame, factors: pd.DataFrame, *, model: str, tokenizer: str,
                      simplified: str, traditional: str, missing: dict[str, str] | None = None) -> pd.DataFrame:
    """One model's table: per prompting language, experiment and extraction source, the GEE of choosing the
    Mainland name (valid answers only) on the list's factors, clustered by candidate list; the S − T gap shares of
    the Mainland share; `factors_left_out` as in `term_bias_factors`; BH across the model's whole table."""
    keys = ["experiment", "list_source", "list_id"]
    valid = selections[selections["status"] == "valid"].copy()
    valid["y"] = (valid["region"] == "mainland").astype(float)
    valid = valid.merge(factors, on=keys, how="inner")
    valid["unit"] = valid["experiment"] + "/" + valid["list_source"] + "/" + valid["list_id"].astype(str)
    present = [name for name in FACTORS if name in factors.columns and valid[name].notna().any()]
    rows = []
    for (experiment, source), block in valid.groupby(["experiment", "extraction_source"], sort=True):
        pair = block[block["lang"].isin([simplified, traditional])]
        shares = gap_shares(pair["y"], (pair["lang"] == simplified).astype(float), pair[present], pair["unit"]) \
            if {simplified, traditional} <= set(pair["lang"]) else {}
        for lang, frame in block.groupby("lang", sort=True):
            fitted, entered = fit_factors(frame["y"], frame[present], frame["unit"])
            for row in fitted:
                rows.append({"model": model, "lang": lang, "experiment": experiment, "extraction_source": source,
                             "outcome": "mainland", "factors_entered": ",".join(entered),
                             "factors_left_out": left_out_note(entered, present, missing or {}),
                             "tokenizer": tokenizer, **row,
                             **_share_of(shares, row["factor"], "no Simplified and Traditional prompts to compare")})
    return model_table(rows, NAME_COLUMNS)
