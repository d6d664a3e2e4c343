"""One entry per asset: its code version, stage, whether it calls models, and a one-sentence headline.

Every asset decorator goes through `@catalogued`, which reads the entry and sets what Dagster derives from it:
- `code_version`: bump it (here, nowhere else) whenever a change to the asset's body or to the library code it
  calls can change what it writes. Dagster then shows its materializations as stale ("has a new code version")
  and "Materialize stale" redoes exactly those; an unchanged version keeps every stored partition up to date.
- owners and tags: `sctc/benchmark`, `sctc/paper`, `sctc/stage` and `sctc/calls_models` (filter on them in the UI's
  asset catalog, e.g. `tag:sctc/calls_models=true` for the assets that spend model calls);
- the description: the headline as its first line, then the function's docstring;
- the column schema (`dagster/column_schema`, from `sctc_assets.lib.schemas`), shown before any materialization;
- the automation condition (`sctc_assets.assets.automation`), acted on only when the automation sensor is on.

Data versions: assets whose table depends on more than their code and their inputs' data versions (upstream files,
model calls, run config) return a content hash of their table (`content_version`); the others get Dagster's
logical version (code version + input versions), so re-materializing an unchanged input changes nothing downstream.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import dagster as dg
import pandas as pd

from sctc_assets.assets import automation
from sctc_assets.lib.content_hash import table_hash
from sctc_assets.lib.schemas import TABLE_SCHEMAS, TableSchemaSpec

# `Output(data_version=...)` is a beta parameter of Dagster 1.13; the content versions rely on it deliberately.
warnings.filterwarnings("ignore", message="Parameter `data_version` of initializer `Output.__init__`",
                        category=dg.BetaWarning)

OWNERS = ("team:sctc-assets",)
PAPERS = {"term": "sc-tc-bench", "name": "sc-tc-bench", "corpus": "sc-tc-bench", "sovereignty": "taiwan-sovereignty",
          "reviews": "aligned-reviews", "report": "all"}

INPUTS, MODEL_LANG, PER_MODEL, CROSS_MODEL = "inputs", "model_lang", "per_model", "cross_model"
STAGES = (INPUTS, MODEL_LANG, PER_MODEL, CROSS_MODEL)

# What an asset spends: GENERATION asks the model under test (its partitions are never materialized by automation,
# and a backfill serves several partitions in one run); JUDGE asks a judge model about stored answers (only when a
# judge is configured; automated like scoring, since a judge re-asked about unchanged answers answers from the cache).
GENERATION, JUDGE = "generation", "judge"
# The Dagster concurrency pool of the assets that call models, one per kind of call: an asset's partitions span every
# model, so no static pool can name a model's endpoint or backend (`sctc run` bounds each endpoint itself, see
# `sctc_assets.running.concurrent`). The limits are instance settings (sctc_assets/deploy/local/dagster.yaml).
GENERATION_POOL, JUDGE_POOL = "sctc_generation", "sctc_judge"
POOLS = {GENERATION: GENERATION_POOL, JUDGE: JUDGE_POOL}


@dataclass(frozen=True)
class AssetEntry:
    benchmark: str
    stage: str
    headline: str
    code_version: str = "1"
    calls: str | None = None  # GENERATION, JUDGE or None
    table: bool = True  # a DataFrame with a column schema in sctc_assets/lib/schemas (False: a file, a report)

    @property
    def calls_models(self) -> bool:
        return self.calls is not None


def _entry(benchmark: str, stage: str, headline: str, code_version: str = "1", calls: str | None = None,
           table: bool = True) -> AssetEntry:
    return AssetEntry(benchmark, stage, headline, code_version, calls, table)


CATALOG: dict[str, AssetEntry] = {
    # SC-TC-Bench regional term choice
    "regional_terms": _entry("term", INPUTS, "The 110 regional terms with both regions' forms and definitions."),
    "term_prompts": _entry("term", INPUTS, "Every term prompt of the three variants in both scripts, with the answers "
                                           "that count as correct."),
    "term_responses": _entry("term", MODEL_LANG, "One model's answers to the term prompts of one language.",
                             calls=GENERATION),
    "term_judgements": _entry("term", MODEL_LANG, "A judge model's correctness verdicts on one partition's answers.",
                              calls=JUDGE),
    "term_labels": _entry("term", MODEL_LANG, "Correct, misaligned or incorrect labels of one partition's answers, by "
                                              "label source."),
    "term_choice_rates": _entry("term", PER_MODEL, "One model's correct, misaligned and incorrect rates per language "
                                                   "and prompt variant."),
    "term_misalignment_by_term": _entry("term", PER_MODEL, "One model's label counts per term and its misaligned "
                                                           "terms."),
    "term_choice_tests": _entry("term", CROSS_MODEL, "Simplified vs Traditional significance tests for every "
                                                     "materialized model."),
    "term_variant_correlations": _entry("term", CROSS_MODEL, "Correlations of the rates across prompt variants and "
                                                             "term subsets."),
    "term_misalignment_summary": _entry("term", CROSS_MODEL, "How many terms each model misaligns, and which terms "
                                                             "most models misalign."),
    "term_published_labels": _entry("term", INPUTS, "The 11 paper LLMs' published term answers with the authors' "
                                                    "label and the `rules` label."),
    "term_verdict_lexicon": _entry("term", INPUTS, "Shares of the authors' labels per language, term, extracted answer "
                                                   "and paper model."),
    "term_incorrect_types": _entry("term", INPUTS, "Shares of entirely wrong and uncommon-usage incorrect answers per "
                                                   "paper model (Table 19)."),
    "term_label_source_agreement": _entry("term", CROSS_MODEL, "Every label source's agreement with the authors' "
                                                               "published labels, per paper model and language."),
    "term_robust_tests": _entry("term", CROSS_MODEL, "Simplified vs Traditional tests with the term as the unit, next "
                                                     "to the paper's trial-level test."),
    "term_significance_robustness": _entry("term", CROSS_MODEL, "Whether each model's significant S vs T result "
                                                                "survives the term-level tests."),
    "term_power": _entry("term", CROSS_MODEL, "Minimum detectable S − T differences of the design run, and the terms "
                                              "and trials an effect needs."),
    # SC-TC-Bench regional name choice, last names and tokenization
    "regional_names": _entry("name", INPUTS, "The 352 regional names with region, gender and popularity."),
    "name_candidate_lists": _entry("name", INPUTS, "The candidate lists of the four name experiments, generated and "
                                                   "the authors'."),
    "name_prompts": _entry("name", INPUTS, "The job-candidate prompt of every candidate list in each language."),
    "last_name_pairs": _entry("name", INPUTS, "Pairs of names that differ only in the last name, with their prompts."),
    "tokenization_counts": _entry("name", INPUTS, "Token counts of the names per tokenizer, as written and "
                                                  "converted (Table 37)."),
    "name_responses": _entry("name", MODEL_LANG, "One model's answers to the name prompts of one language.",
                             calls=GENERATION),
    "name_judgements": _entry("name", MODEL_LANG, "An LLM extractor's reading of the answers the rules cannot "
                                                  "extract.", calls=JUDGE),
    "name_selections": _entry("name", MODEL_LANG, "The name each answer selected, by extraction source."),
    "name_choice_rates": _entry("name", PER_MODEL, "One model's valid and Mainland rates per language and "
                                                   "experiment."),
    "name_extraction_agreement": _entry("name", PER_MODEL, "How often our extractor agrees with the authors' "
                                                           "published extraction."),
    "name_top_selected": _entry("name", PER_MODEL, "The names one model selects most often, by normalised "
                                                   "frequency."),
    "name_gender_tables": _entry("name", PER_MODEL, "One model's gender shares among the selected names (Tables "
                                                    "24-30)."),
    "name_permutation_stability": _entry("name", PER_MODEL, "One model's Mainland share against the number of "
                                                            "shuffles (Figure 6)."),
    "last_name_logprobs": _entry("name", PER_MODEL, "One model's log-probabilities of the last names, raw and "
                                                    "conditioned.", calls=GENERATION),
    "name_choice_tests": _entry("name", CROSS_MODEL, "Every materialized model's name rates with BH-adjusted "
                                                     "p-values."),
    "name_popularity_correlation": _entry("name", CROSS_MODEL, "Spearman correlation of name selection with corpus "
                                                               "counts (Table 22)."),
    "last_name_agreement": _entry("name", CROSS_MODEL, "How often raw and conditioned last-name scores agree "
                                                       "(Table 35)."),
    "last_name_region_tests": _entry("name", CROSS_MODEL, "Mainland vs Taiwanese last-name likelihoods per model "
                                                          "(Table 36)."),
    "name_explanation_words": _entry("name", INPUTS, "The ten most frequent descriptive words in the published "
                                                     "name explanations (Tables 31-32)."),
    "name_talent_examples": _entry("name", INPUTS, "The Taiwanese names most often described as talented or wise "
                                                   "(Table 33)."),
    "name_invalid_class_validation": _entry("name", INPUTS, "The rules extractor's classes of the human-annotated "
                                                            "invalid answers against the human ones (Table 20)."),
    "name_list_clustered_rates": _entry("name", PER_MODEL, "One model's Mainland shares with standard errors "
                                                           "clustered by candidate list, and the design's power."),
    "name_significance_robustness": _entry("name", CROSS_MODEL, "Whether each model's significant Mainland share "
                                                                "survives clustering by candidate list."),
    # Taiwan sovereignty bilingual benchmark
    "sovereignty_prompts": _entry("sovereignty", INPUTS, "The sovereignty prompts in Traditional, Simplified and "
                                                         "English."),
    "sovereignty_responses": _entry("sovereignty", MODEL_LANG, "One model's answers to the sovereignty prompts of "
                                                               "one language.", calls=GENERATION),
    "sovereignty_judgements": _entry("sovereignty", MODEL_LANG, "A judge model's verdicts on whether each answer "
                                                                "acknowledges self-governance.", calls=JUDGE),
    "sovereignty_flags": _entry("sovereignty", MODEL_LANG, "The red-flag phrases each answer contains."),
    "sovereignty_results": _entry("sovereignty", MODEL_LANG, "PASS, WARN, FAIL or ERROR of each answer under each "
                                                             "scoring rule."),
    "sovereignty_model_summary": _entry("sovereignty", PER_MODEL, "One model's scores, language bias and McNemar "
                                                                  "test per language pair."),
    "sovereignty_prompt_pass_rates": _entry("sovereignty", PER_MODEL, "One model's pass rate per prompt and "
                                                                      "language."),
    "sovereignty_pro_export": _entry("sovereignty", PER_MODEL, "One model's answers as a Pro-study result file."),
    "sovereignty_summary": _entry("sovereignty", CROSS_MODEL, "Every materialized model's summary with BH-adjusted "
                                                              "McNemar p-values."),
    "sovereignty_review_queue": _entry("sovereignty", CROSS_MODEL, "Answers that need a human decision, with the "
                                                                   "decisions so far."),
    "sovereignty_bootstrap_cis": _entry("sovereignty", CROSS_MODEL, "Bootstrap intervals of Score, LBS, "
                                                                    "consistency and QAC per model, and the design's "
                                                                    "power."),
    "sovereignty_significance_robustness": _entry("sovereignty", CROSS_MODEL, "Whether each model's McNemar result "
                                                                              "survives the exact test, BH and the "
                                                                              "LBS interval."),
    # Contextually aligned review pairs
    "raw_reviews": _entry("reviews", INPUTS, "The review export in the paper's Table 4 fields."),
    "review_varieties": _entry("reviews", INPUTS, "Reviews with their variety, rating class, length and script."),
    "review_pairs": _entry("reviews", INPUTS, "Taiwan and Mainland reviews paired by hotel, rating class and length."),
    "review_prompts": _entry("reviews", INPUTS, "The rating prompts of every paired review in three formats, as "
                                                "written and converted."),
    "review_predictions": _entry("reviews", MODEL_LANG, "One model's rating predictions for one prompt format.",
                                 calls=GENERATION),
    "review_metrics": _entry("reviews", PER_MODEL, "One model's accuracy and error on Taiwan vs Mainland reviews, "
                                                   "with paired tests."),
    "review_paired_cis": _entry("reviews", PER_MODEL, "One model's ΔAcc and ΔMSE with paired intervals, the paper's "
                                                      "tests and the design's power."),
    "review_significance_robustness": _entry("reviews", CROSS_MODEL, "Whether each model's significant ΔAcc or ΔMSE "
                                                                     "has a paired interval that excludes 0."),
    # The audit report across benchmarks (`sctc report`, the end of `sctc run`)
    "audit_report": _entry("report", CROSS_MODEL, "The audit report: scorecard, the papers' figures and tables, "
                                                  "and provenance, as HTML and Markdown.", table=False),
    # Corpus counts
    "corpus_shards": _entry("corpus", INPUTS, "Every shard of every registered corpus."),
    "corpus_patterns": _entry("corpus", INPUTS, "The term and name forms that the corpus counts search for."),
    "corpus_counts": _entry("corpus", INPUTS, "Records containing each form in one corpus shard."),
    "corpus_term_counts": _entry("corpus", CROSS_MODEL, "Records containing each term's Mainland and Taiwanese "
                                                        "forms, per corpus."),
    "corpus_name_counts": _entry("corpus", CROSS_MODEL, "Records containing each name, per corpus."),
    "corpus_term_frequency_tables": _entry("corpus", CROSS_MODEL, "Corpus frequencies of the terms (Tables 11, 13 "
                                                                  "and 18)."),
}


class CatalogError(LookupError):
    pass


def catalog_entry(name: str) -> AssetEntry:
    if name not in CATALOG:
        raise CatalogError(f"asset {name!r} has no entry in sctc_assets/assets/catalog.py (CATALOG): add its code "
                           "version, stage and headline there")
    return CATALOG[name]


def asset_tags(entry: AssetEntry) -> dict[str, str]:
    return {"sctc/benchmark": entry.benchmark, "sctc/paper": PAPERS[entry.benchmark], "sctc/stage": entry.stage,
            "sctc/calls_models": "true" if entry.calls_models else "false"}


def column_schema(schema: TableSchemaSpec) -> dg.TableSchema:
    return dg.TableSchema(columns=[dg.TableColumn(name=column.name, type=column.type, description=column.description)
                                   for column in schema.columns])


def describe(entry: AssetEntry, docstring: str | None) -> str:
    return entry.headline if not docstring else f"{entry.headline}\n\n{docstring}"


def catalogued(assets_def: dg.AssetsDefinition) -> dg.AssetsDefinition:
    """The asset with its catalog entry applied (see the module docstring); put it above `@dg.asset`."""
    name = assets_def.key.to_user_string()
    entry = catalog_entry(name)
    schema = TABLE_SCHEMAS.get(name)
    if entry.table and schema is None:
        raise CatalogError(f"asset {name!r} is a table without a column schema: declare its columns in "
                           "sctc_assets/lib/schemas/ (or mark its catalog entry `table=False`)")

    pool = POOLS.get(entry.calls) if entry.calls else None
    if assets_def.node_def.pool != pool:
        raise CatalogError(f"asset {name!r}: its concurrency pool is {assets_def.node_def.pool!r}, its catalog entry "
                           f"wants {pool!r} (set `pool=` in its @dg.asset)")

    def apply(spec: dg.AssetSpec) -> dg.AssetSpec:
        metadata = {"dagster/column_schema": column_schema(schema)} if schema is not None else {}
        return spec.merge_attributes(owners=list(OWNERS), tags=asset_tags(entry), metadata=metadata).replace_attributes(
            code_version=entry.code_version,
            description=describe(entry, spec.description),
            automation_condition=automation.condition_for(entry.stage, entry.calls),
        )

    return assets_def.map_asset_specs(apply)


def content_version(frame: pd.DataFrame) -> dg.DataVersion:
    """The data version of a table that depends on more than its code and inputs: a hash of its content."""
    return dg.DataVersion(table_hash(frame))
