"""`term_bias_factors` through the real storage: its input rows written with the project's IO manager, read back
by the asset as a Dagster run reads them, scored, and the table read back from the store (#41 point 5)."""

from __future__ import annotations

import dagster as dg
import numpy as np
import pandas as pd
import pytest

from sctc_assets.definitions import defs, shared_resources
from sctc_assets.lib import bias_factors as bf
from sctc_assets.lib.corpus.tables import upstream_term_counts
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME, models_partitions
from sctc_assets.resources.io_manager import ParquetIOManager
from sctc_assets.definitions import every_asset

MODEL = "stored"


def _by_term(terms: pd.DataFrame, x: pd.Series) -> pd.DataFrame:
    """Per-term counts whose `correct` outcome the corpus ratio drives under both scripts (15 trials a term)."""
    rng = np.random.default_rng(12)
    z = ((x - x.mean()) / x.std(ddof=1)).loc[terms["term_id"]].to_numpy()
    frames = []
    for lang, shift in (("zh_hans", 0.8), ("zh_hant", -0.8)):
        k = rng.binomial(15, 1 / (1 + np.exp(-(shift + 1.2 * z))))
        frames.append(pd.DataFrame({
            "model": MODEL, "lang": lang, "prompt_variant": 1, "label_source": "rules",
            "term_id": terms["term_id"].to_numpy(), "n_correct": k, "n_misaligned": 15 - k, "n_incorrect": 0,
            "n_refusal": 0, "n_trials": 15, "misaligned_threshold": 3, "misaligned_term": 15 - k >= 3,
            "ever_misaligned": 15 - k > 0, "term_mainland": terms["term_mainland"].to_numpy(),
            "term_taiwan": terms["term_taiwan"].to_numpy(), "category": terms["category"].to_numpy(),
            "counts": [f"{a},{15 - a},0" for a in k]}))
    return pd.concat(frames, ignore_index=True)


@pytest.mark.slow
def test_term_bias_factors_reads_its_inputs_from_the_store(isolated_data_dir, extracted_upstream, sctc_source,
                                                           tmp_path, monkeypatch):
    registry = tmp_path / "models.yaml"
    registry.write_text(f"models:\n  {MODEL}: {{backend: openai, model: stub-model, base_url: 'http://127.0.0.1:9', "
                        "api_key_env: SCTC_TEST_UNUSED_KEY}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, [MODEL])
        assert dg.materialize([defs.get_assets_def("regional_terms")], instance=instance,
                              resources=shared_resources()).success
        terms = ParquetIOManager().load_input(dg.build_input_context(asset_key=dg.AssetKey("regional_terms")))
        counts, _ = upstream_term_counts(sctc_source, terms)
        x = bf.term_corpus_ratios(counts)
        written = _by_term(terms, x)

        # the input rows, written by the IO manager under the asset's own key and partition
        @dg.asset(name="term_misalignment_by_term", partitions_def=models_partitions, group_name="term")
        def stand_in() -> pd.DataFrame:
            return written

        assert dg.materialize([stand_in], partition_key=MODEL, instance=instance,
                              resources=shared_resources()).success
        result = dg.materialize(every_asset(defs), partition_key=MODEL, instance=instance,
                                resources=shared_resources(), selection=["term_bias_factors"])
        assert result.success
        stored = defs.load_asset_value("term_bias_factors", partition_key=MODEL, instance=instance)
    # what the store gives back is what the lib computes on the rows as written
    direct = bf.term_bias_factors(written, pd.DataFrame({"corpus": x}), model=MODEL, label_source="rules",
                                  tokenizer="", simplified="zh_hans", traditional="zh_hant",
                                  missing={"logprob": "the term task has no log-probabilities of the two forms",
                                           "tokens": "no tokenizer: the openai backend knows no tokenizer offline"})
    assert len(stored) == len(direct) == 4
    pd.testing.assert_frame_equal(stored.reset_index(drop=True), direct.reset_index(drop=True), check_dtype=False)
    # and the factor that drives the outcome is recovered under both scripts
    correct = stored[stored.outcome == "correct"].set_index("lang")
    assert (correct.ci_low > 0.6).all() and (correct.ci_high > 1.2).all() and (correct.p_bh < 1e-6).all()
    assert set(stored.label_source) == {"rules"} and set(stored.factors_entered) == {"corpus"}
