"""`term_bias_factors` and `name_bias_factors` for a live model: the project's stub OpenAI server as the model,
through `sctc run` (#41 point 5). A chat stub gives no log-probabilities and no tokenizer is known offline for it,
so the tables are fitted on the corpus factor alone and say why the others are left out; the corpus coefficients
equal a GEE fitted here by hand on the stub's own answers and the authors' counts."""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from sctc_assets.cli import main
from sctc_assets.lib.corpus.tables import upstream_name_counts, upstream_term_counts
from sctc_assets.lib.name.prompts import shown_names
from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
from sctc_assets.lib.term.terms import parse_terms
from sctc_assets_tests.openai_stub_server import StubOpenAIServer, completion

KEY_ENV = "SCTC_TEST_FACTORS_KEY"
_DEFINITION = re.compile("'(.+)'")


def _hand_gee(y: np.ndarray, x_per_unit: pd.Series, units: np.ndarray) -> float:
    """The corpus coefficient by hand: x z-scored over the units (SD ddof 1), logistic GEE, exchangeable."""
    z = (x_per_unit - x_per_unit.mean()) / x_per_unit.std(ddof=1)
    design = np.column_stack([np.ones(len(y)), z.loc[units].to_numpy()])
    groups = pd.factorize(pd.Series(units))[0]
    fitted = sm.GEE(y, design, groups=groups, family=sm.families.Binomial(),
                    cov_struct=sm.cov_struct.Exchangeable()).fit()
    return float(np.asarray(fitted.params)[1])


class MainlandSometimes(StubOpenAIServer):
    """Answers a term prompt with the term's Mainland form when a hash of (prompt, seed) says so (else 不知道), and
    records each decision; under Simplified prompts that is a correct answer."""

    def __init__(self, terms: pd.DataFrame, **kwargs):
        super().__init__(**kwargs)
        self.by_definition = {}
        for term in terms.to_dict("records"):
            for script in ("simplified", "traditional"):
                self.by_definition[(script, term[f"definition_{script}"])] = term
        self.decisions: list[tuple[str, str, bool]] = []
        self.lock = threading.Lock()

    def echo(self, prompt: str, body: dict[str, Any]):
        script = "simplified" if "请用一个词" in prompt else "traditional"
        term = self.by_definition[(script, _DEFINITION.search(prompt).group(1))]
        digest = hashlib.sha256(f"{prompt}|{body.get('seed')}".encode()).digest()
        mainland = digest[0] < 128
        with self.lock:
            self.decisions.append((script, term["term_id"], mainland))
        return completion(term["mainland_alternatives"][0] if mainland else "不知道")


@pytest.mark.slow
def test_term_bias_factors_for_a_live_model(isolated_data_dir, extracted_upstream, sctc_source, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    terms = parse_terms(sctc_source.read_csv(TERMS_FILE, TERM_COLUMNS), source_name=TERMS_FILE)
    out = tmp_path / "out"
    with MainlandSometimes(terms) as server:
        registry = tmp_path / "models.yaml"
        registry.write_text(
            f"models:\n  live: {{backend: openai, model: stub-model, base_url: '{server.base_url}', "
            f"api_key_env: {KEY_ENV}, max_retries: 0, concurrency: 8, seed: 11, "
            "benchmarks: {term: {trials: 3, prompt_variants: [1]}}}\n", encoding="utf-8")
        monkeypatch.setenv("SCTC_MODELS", str(registry))
        assert main(["run", "--benchmarks", "term", "--models", "live", "--out", str(out)]) == 0
        decisions = pd.DataFrame(server.decisions, columns=["script", "term_id", "mainland"])
    table = pd.read_parquet(out / "term_bias_factors.parquet")
    live = table[table.model == "live"]
    assert set(live.lang) == {"zh_hans", "zh_hant"} and set(live.outcome) == {"correct", "misaligned"}
    # fitted on the factor it has; the table says which were left out and why
    assert set(live.factor) == {"corpus"} and set(live.factors_entered) == {"corpus"}
    left_out = live.factors_left_out.iloc[0]
    assert "tokens: no tokenizer: the openai backend knows no tokenizer offline" in left_out
    assert "logprob: the term task has no log-probabilities" in left_out
    assert set(live.tokenizer) == {""}
    # by hand: the table regresses the labels of its label source (the lexicon's here, the first the model has);
    # under the paper's rules a Simplified answer is correct exactly when the stub chose the Mainland form
    simplified = decisions[decisions.script == "simplified"]
    assert len(simplified) == 3 * len(terms)
    labels = pd.read_parquet(out / "term_labels.parquet")
    rules = labels[(labels.lang == "zh_hans") & (labels.label_source == "rules")]
    assert (rules.label == "correct").sum() == simplified["mainland"].sum()
    counts, _ = upstream_term_counts(sctc_source, terms)
    summed = counts.groupby("term_id")[["mainland", "taiwan"]].sum()
    x = np.log((summed["mainland"] + 1) / (summed["taiwan"] + 1))
    for lang in ("zh_hans", "zh_hant"):
        for outcome in ("correct", "misaligned"):
            row = live[(live.lang == lang) & (live.outcome == outcome)].iloc[0]
            used = labels[(labels.lang == lang) & (labels.label_source == row.label_source)]
            y = (used.label == outcome).to_numpy(float)
            assert row.n_trials == len(used) == 3 * len(terms) and row.n_units == len(terms)
            if np.ptp(y) == 0:  # never varies (no misaligned answer under Simplified prompts): p 1, no estimate
                assert row.p == 1.0 and np.isnan(row.coef)
            else:
                assert row.coef == pytest.approx(_hand_gee(y, x, used.term_id.to_numpy()), rel=1e-6, abs=1e-9)
    # the S − T gap of `correct` is a number or NaN with its reason, never ±inf
    assert not np.isinf(live.gap_share).any()
    assert ((live.gap_note != "") == live.gap_share.isna()).all()


class FirstCandidate(StubOpenAIServer):
    def echo(self, prompt: str, body: dict[str, Any]):
        return completion(shown_names(prompt, where="stub")[0])


@pytest.mark.slow
def test_name_bias_factors_for_a_live_model(isolated_data_dir, extracted_upstream, sctc_source, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    out = tmp_path / "out"
    with FirstCandidate() as server:
        registry = tmp_path / "models.yaml"
        registry.write_text(f"models:\n  first: {{backend: openai, model: stub-model, base_url: '{server.base_url}', "
                            f"api_key_env: {KEY_ENV}, max_retries: 0, concurrency: 8}}\n", encoding="utf-8")
        monkeypatch.setenv("SCTC_MODELS", str(registry))
        assert main(["run", "--benchmarks", "name", "--models", "first", "--name-experiments", "main",
                     "--name-lists", "12", "--name-shuffles", "2", "--out", str(out)]) == 0
    table = pd.read_parquet(out / "name_bias_factors.parquet")
    live = table[(table.model == "first") & (table.extraction_source == "rules")]
    assert set(live.lang) == {"zh_hans", "zh_hant", "en"} and set(live.experiment) == {"main"}
    assert set(live.factor) == {"corpus"}
    left_out = live.factors_left_out.iloc[0]
    assert "tokens: no tokenizer" in left_out and "logprob: no last-name log-probabilities" in left_out
    # by hand: the stub picks the first candidate, so the outcome is whether a list's first name is Mainland
    lists = pd.read_parquet(out / "name_candidate_lists.parquet")
    selections = pd.read_parquet(out / "name_selections.parquet")
    regional = pd.read_parquet(out / "regional_names.parquet")
    counts, _ = upstream_name_counts(sctc_source, regional)
    c4 = counts.groupby("name")["records_containing"].sum()
    keys = ["experiment", "list_source", "list_id"]
    first = lists.drop_duplicates(keys).set_index(keys)

    def mean_count(names) -> float:
        return float(np.mean([c4[name] for name in names if name in c4.index]))

    x = pd.Series([np.log((mean_count(m) + 1) / (mean_count(t) + 1))
                   for m, t in zip(first["mainland_names"], first["taiwan_names"])],
                  index=["/".join(map(str, key)) for key in first.index])
    for lang in ("zh_hans", "zh_hant", "en"):
        answers = selections[(selections.lang == lang) & (selections.status == "valid")
                             & (selections.extraction_source == "rules") & (selections.experiment == "main")]
        asked = answers.merge(lists[keys + ["row", "candidates", "mainland_names"]], on=keys + ["row"])
        y = np.array([c[0] in set(m) for c, m in zip(asked["candidates"], asked["mainland_names"])], dtype=float)
        assert (y == (asked["region"] == "mainland").to_numpy()).all()
        units = (asked["experiment"] + "/" + asked["list_source"] + "/" + asked["list_id"].astype(str)).to_numpy()
        row = live[live.lang == lang].iloc[0]
        assert row.n_trials == len(asked) and row.n_units == len(set(units))
        assert row.coef == pytest.approx(_hand_gee(y, x.loc[sorted(set(units))], units), rel=1e-6, abs=1e-9)
