"""Columns of the term task's tables for one item set (`<prefix>_items` … `<prefix>_power`), any regions and
prompting varieties.

Not in the fixed `TABLE_SCHEMAS`: an item set names its tables by its prefix and its `term_<region>` columns by its
regions, so each item set's spec passes `item_set_term_schemas(prefix, regions)` through its `schemas` field.
"""

from __future__ import annotations

from typing import Iterable

from sctc_assets.lib.schemas.base import TableSchemaSpec, table
from sctc_assets.lib.schemas.common import COMMON

C = {
    **COMMON,
    "concept_id": ("string", "The concept's id in the item set."),
    "category": ("string", "The concept's topic category in the item set (missing when it has none)."),
    "definition_source": ("string", "Who wrote the concept's definition: empty for the item set's source, "
                                    "`model:<key>` for a definition a model drafted (`sctc terms define`)."),
    "variety": ("string", "The prompting variety (a script plus a region cue): `zh-CN`, `zh-TW`, `zh-HK`, …"),
    "region": ("string", "The prompted variety's region code (`cn`, `tw`, `hk`, …): whose forms are correct."),
    "prompt_variant": ("int", "Prompt wording, 1–3 (paper Table 1(a))."),
    "trial": ("int", "Trial index of the repeated prompt, from 0."),
    "n_correct": ("int", "Answers labelled correct (a form of the prompted region)."),
    "n_misaligned": ("int", "Answers labelled misaligned (another region's form)."),
    "n_incorrect": ("int", "Answers labelled incorrect (neither; refusals included)."),
    "n_refusal": ("int", "Of the incorrect answers, refusals (a content filter or an empty answer)."),
    "variety_a": ("string", "The first variety of the pair (the varieties in the order the run lists them)."),
    "variety_b": ("string", "The second variety of the pair."),
    "measure": ("string", "The share compared: `correct` or `misaligned`."),
    "n_concepts": ("int", "Concepts asked in both varieties (the paired units)."),
    "sd_concept_diff": ("float", "SD of the per-concept A − B differences, in percentage points."),
    "label_source": ("string", "Who labelled the answers: `rules` (the forms found in the answer) or `judge` (a judge "
                               "model's verdict on which region's form the answer gives, `<prefix>_judgements`); "
                               "each source's rows are counted apart."),
}


def item_set_term_schemas(prefix: str, regions: Iterable[str]) -> tuple[TableSchemaSpec, ...]:
    """The schemas of an item set's term tables: `<prefix>_items`, `_prompts`, `_responses`, `_judgements`,
    `_labels`, `_by_concept`, `_rates`, `_matrix`, `_contrasts` and `_power`; `regions`: every region a set may have
    (one optional `term_<region>` column each)."""
    regions = list(regions)
    return (
        table(f"{prefix}_items", [
            "concept_id", "category",
            ("definition_zh_hans", "string", "The definition in Simplified script."),
            ("definition_zh_hant", "string", "The definition in Traditional script."),
            "definition_source",
            # every region one can declare; a set's table holds its own regions' columns only
            *((f"term_{code}", "list<string>", f"The forms region `{code}` uses for the concept (empty: none, "
                                               "the concept is not asked in its varieties).", True)
              for code in regions),
        ], C),
        table(f"{prefix}_prompts", [
            "variety", "region", "prompt_variant", "trial", "concept_id",
            ("row", "int", "Row of the prompt in its variety and variant's prompt list."),
            ("expected", "list<string>", "The answers that count as correct: the prompted region's forms."),
            "prompt",
        ], C),
        table(f"{prefix}_responses", [
            "model", "variety", "region", "prompt_variant", "concept_id", "trial",
            ("row", "int", "Row of the prompt in its variety and variant's prompt list."),
            "prompt", "response", "outcome", "outcome_message", "input_tokens", "output_tokens", "finish_reason",
            "cached", "latency_s", "seed", "served_model", "system_fingerprint", "batch_id", "reasoning", "reasoning_tokens",
        ], C),
        table(f"{prefix}_judgements", [
            "model", "variety", "region", "prompt_variant", "concept_id", "trial", "judge_model", "judge_answer",
            "judge_outcome",
            ("judge_regions", "string", "The regions the judge said the answer's form belongs to, comma-joined "
                                        "(`\"\"`: none of the listed forms); missing when it gave no verdict (the "
                                        "answer is then left out of the `judge` labels)."),
        ], C),
        table(f"{prefix}_labels", [
            "model", "variety", "region", "prompt_variant", "concept_id", "trial", "response", "outcome",
            ("label", "string", "`correct`, `misaligned` or `incorrect`; missing for a concept without a form of "
                                "the prompted region (not counted)."),
            ("regions_found", "string", "The regions whose forms the answer holds, comma-joined (`\"\"`: none); a "
                                        "form several regions share names each of them."),
            ("misaligned_forms", "string", "The other regions' forms found in the answer, joined by `, ` (`rules` "
                                           "labels; empty for `judge` labels, whose judge names regions only)."),
            "definition_source",
            "label_source",
        ], C),
        table(f"{prefix}_by_concept", [
            "model", "label_source", "variety", "prompt_variant", "region", "concept_id", "definition_source",
            ("n_trials", "int", "Labelled answers of the concept in this variety and variant."),
            "n_correct", "n_misaligned", "n_incorrect", "n_refusal",
            ("misaligned_regions", "string", "JSON object: other region → misaligned answers holding its form (an "
                                             "answer holding several regions' forms counts for each)."),
        ], C),
        table(f"{prefix}_rates", [
            "model", "label_source", "variety", "region", "prompt_variant",
            ("definitions", "string", "`all` concepts; `source` / `model`: those whose definition the set's source "
                                      "/ a model wrote (only when a model wrote some)."),
            ("measure", "string", "`correct`, `misaligned`, `incorrect`, or `misaligned:<region>` (misaligned "
                                  "answers holding that other region's form)."),
            ("n", "int", "Labelled answers."),
            ("k", "int", "Of them, answers with the measure."),
            ("pct", "float", "`k / n` in percent (0–100)."),
            ("ci_low", "float", "Wilson 95 % interval of `pct`, low end (percent)."),
            ("ci_high", "float", "Wilson 95 % interval of `pct`, high end (percent)."),
        ], C),
        table(f"{prefix}_matrix", [
            "model", "label_source", "prompt_variant", "variety", "region",
            ("answered_region", "string", "A region of the set whose form the answer holds (the prompted one "
                                          "included), or `none`: no region's form (refusals included)."),
            ("n_answers", "int", "Labelled answers of the variety and variant (the denominator)."),
            ("k", "int", "Of them, answers holding a form of `answered_region` (a shared form counts for each "
                         "region)."),
            ("pct", "float", "`k / n_answers` in percent (0–100)."),
        ], C),
        table(f"{prefix}_contrasts", [
            "model", "label_source", "prompt_variant", "measure", "variety_a", "variety_b",
            ("region_a", "string", "The region of `variety_a`."),
            ("region_b", "string", "The region of `variety_b`."),
            "n_concepts",
            ("pct_a", "float", "Mean per-concept share in `variety_a`, percent."),
            ("pct_b", "float", "Mean per-concept share in `variety_b`, percent."),
            ("diff_pct_points", "float", "Mean per-concept A − B difference of the share, percentage points."),
            ("ci_low", "float", "95 % paired-t interval of `diff_pct_points` over the concepts, low end."),
            ("ci_high", "float", "95 % paired-t interval of `diff_pct_points` over the concepts, high end."),
            ("ci_method", "string", "How `ci_low` and `ci_high` were computed."),
            "sd_concept_diff",
            ("paired_t", "float", "Paired t statistic over the concepts."),
            ("paired_t_p", "float", "Two-sided p-value of the paired t-test."),
            ("wilcoxon", "float", "Wilcoxon signed-rank statistic over the concepts (zero differences dropped)."),
            ("wilcoxon_p", "float", "Two-sided p-value of the Wilcoxon test."),
            ("paired_t_p_bh", "float", "`paired_t_p` Benjamini–Hochberg adjusted across every pair and model of "
                                       "the label source, prompt variant and measure."),
            ("wilcoxon_p_bh", "float", "`wilcoxon_p` Benjamini–Hochberg adjusted the same way."),
            ("sig_paired_t_bh", "string", "Significance stars of `paired_t_p_bh` (`NS` when not significant)."),
            ("sig_wilcoxon_bh", "string", "Significance stars of `wilcoxon_p_bh`."),
        ], C),
        table(f"{prefix}_power", [
            "model", "label_source", "prompt_variant", "measure", "variety_a", "variety_b", "n_concepts",
            "sd_concept_diff",
            ("mde_pct_points", "float", "Smallest A − B difference (pp) the paired design detects at 80 % power, "
                                        "α = .05 two-sided (NaN: see `note`)."),
            ("concepts_needed_5pp", "float", "Concepts a 5 pp difference needs at that SD (NaN: see `note`)."),
            ("concepts_needed_10pp", "float", "Concepts a 10 pp difference needs at that SD (NaN: see `note`)."),
            ("note", "string", "Why the design's numbers are missing (too few concepts, no variation), else empty."),
        ], C),
    )
