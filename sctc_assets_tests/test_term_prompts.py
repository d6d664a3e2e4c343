"""Generated term prompts against the upstream prompt files, and the asset check that guards them."""

from __future__ import annotations

import pytest

from sctc_assets.assets.term.source import term_prompts_match_upstream
from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE, term_prompt_file
from sctc_assets.lib.term.prompts import build_prompts, render, run_settings
from sctc_assets.lib.term.terms import parse_terms
from sctc_assets.resources.upstream import SCTCUpstreamResource


@pytest.fixture(scope="module")
def prompts(sctc_source):
    return build_prompts(parse_terms(sctc_source.read_csv(TERMS_FILE, TERM_COLUMNS)))


def test_every_generated_prompt_equals_the_upstream_files(sctc_source, prompts):
    assert len(prompts) == 3 * 2 * 110 * 15
    for (lang, variant), block in prompts.groupby(["lang", "prompt_variant"]):
        published = sctc_source.read_csv(term_prompt_file(lang, variant), ["gt", "prompt"])
        ours = block.sort_values("row")
        assert ours["prompt"].tolist() == published["prompt"].tolist(), (lang, variant)
        # `gt` differs only where upstream wrote '門眼/ 防盗眼' with a space; our expected forms are trimmed
        differing = [(a, b) for a, b in zip(ours["gt"], published["gt"]) if a != b]
        assert set(differing) <= {("門眼/防盗眼", "門眼/ 防盗眼")}


def test_row_layout_follows_upstream(prompts):
    block = prompts[(prompts.lang == "zh_hant") & (prompts.prompt_variant == 2)].sort_values("row")
    assert block["row"].tolist() == list(range(1650))
    assert (block["term_id"].to_numpy() == [row % 110 for row in range(1650)]).all()
    assert (block["trial"].to_numpy() == [row // 110 for row in range(1650)]).all()


def test_templates_and_run_settings():
    assert render("zh_hans", 1, "X") == "定义为'X'的是什么，请用一个词回答？"
    assert render("zh_hant", 3, "X") == "請用一個詞回答，什麼被定義為'X'？"
    with pytest.raises(ValueError, match="no term prompt template"):
        render("en", 1, "X")
    assert run_settings(None, None, {}) == (15, [1, 2, 3])
    assert run_settings(None, None, {"trials": 2, "prompt_variants": [3, 1]}) == (2, [1, 3])
    assert run_settings(4, [2], {"trials": 2}) == (4, [2])
    with pytest.raises(ValueError, match="trials"):
        run_settings(16, None, {})
    with pytest.raises(ValueError, match="prompt variants"):
        run_settings(None, [4], {})


def test_the_asset_check_passes_and_catches_a_changed_prompt(sctc_source, prompts):
    upstream = SCTCUpstreamResource(location=str(sctc_source.root))
    assert term_prompts_match_upstream(term_prompts=prompts, upstream=upstream).passed
    changed = prompts.copy()
    changed.loc[changed.index[5], "prompt"] = "改过的问题"
    result = term_prompts_match_upstream(term_prompts=changed, upstream=upstream)
    assert not result.passed and result.metadata["mismatches"].value
