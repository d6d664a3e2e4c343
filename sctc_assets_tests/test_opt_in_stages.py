"""Stages whose tables are empty without an option (a judge, a named pair, a variants file) are left out of `sctc
run` unless it is given: a re-analysis that names none pays nothing for them (issue #41's speed bound)."""

from __future__ import annotations

import pytest

from sctc_assets.benchmarks import SPECS

OPT_IN = {
    "term": {"term_incorrect_type_judgements": "judge", "term_drift": "term_drift"},
    "name": {"name_explanation_extractions": "name_judge", "name_descriptor_words": "name_judge",
             "name_descriptor_names": "name_judge", "name_pair_selection_rates": "name_pair",
             "name_variant_rates": "name_prompt_variants", "name_variant_correlations": "name_prompt_variants",
             "name_drift": "name_drift"},
    "sovereignty": {"sovereignty_drift": "sovereignty_drift",
                    "sovereignty_condition_effects": "sovereignty_conditions"},
}


@pytest.mark.parametrize("benchmark", sorted(OPT_IN))
def test_without_the_options_the_stages_are_left_out_and_with_them_they_run(benchmark, monkeypatch):
    spec = SPECS[benchmark]
    monkeypatch.delenv(spec.judge.env_var, raising=False)
    assert {name: entry.opt_in for name, entry in spec.assets.items() if entry.opt_in} == OPT_IN[benchmark]
    plain = spec.for_run({})
    assert not set(OPT_IN[benchmark]) & set(plain.tables)
    assert set(plain.tables) == set(spec.tables) - set(OPT_IN[benchmark])  # nothing else is left out
    for name, option in OPT_IN[benchmark].items():
        value = ["甲", "乙"] if option == "name_pair" else "x"
        assert name in spec.for_run({option: value}).tables
    assert spec.for_run({option: None for option in OPT_IN[benchmark].values()}).tables == plain.tables


def test_a_judge_named_in_the_environment_turns_its_stages_on(monkeypatch):
    spec = SPECS["name"]
    monkeypatch.setenv(spec.judge.env_var, "some-judge")
    tables = spec.for_run({}).tables
    assert {"name_explanation_extractions", "name_descriptor_words", "name_descriptor_names"} <= set(tables)
    assert "name_pair_selection_rates" not in tables


def test_the_ui_jobs_keep_every_stage():
    """The Dagster definitions are built from the whole spec: a backfill from the UI can materialize them all."""
    from sctc_assets.definitions import defs

    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {name for names in OPT_IN.values() for name in names} <= keys
