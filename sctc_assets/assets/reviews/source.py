"""Model-independent inputs of the review benchmark: the export, varieties, pairs and prompts."""

from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import markdown_table, table_metadata
from sctc_assets.lib.reviews import pairing, prompts, source, varieties
from sctc_assets.lib.reviews.declared import declared_varieties
from sctc_assets.lib.reviews.source import REVIEWS_ENV_VAR

GROUP = "reviews"


class RawReviewsConfig(dg.Config):
    location: Optional[str] = Field(
        default=None, description=f"CSV, TSV, Parquet or JSON-lines file, or its URL; default ${REVIEWS_ENV_VAR}, "
                                  "else the fictional set shipped in data/reviews/.")
    file_format: Optional[str] = Field(default=None, description="csv, tsv, parquet or jsonl; default: from the name.")
    hf_dataset: Optional[str] = Field(
        default=None, description="A Hugging Face dataset (hub id or local folder), read with datasets.load_dataset "
                                  "instead of `location`.")
    hf_split: str = Field(default="train", description="Split of `hf_dataset`.")
    hf_config: Optional[str] = Field(default=None, description="Configuration name of `hf_dataset`.")
    columns: dict[str, str] = Field(
        default={}, description="Field → column of your export, for fields whose column is not the Booking.com "
                                "name (hotel__booking_id, user_nationality, score, review_title, positive_review, "
                                "negative_review, review_time, review_id) nor the field's own name.")


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def raw_reviews(context: dg.AssetExecutionContext, config: RawReviewsConfig) -> dg.Output[pd.DataFrame]:
    """The review export in the paper's Table 4 fields: `review_id` (the export's id column, else the row number
    from 0), `hotel_id`, `nationality`, `score` (whole, 1–10), `title`, `positive`, `negative`, `review_time`."""
    if config.hf_dataset:
        frame, origin = source.read_hf_dataset(config.hf_dataset, split=config.hf_split, config_name=config.hf_config)
    else:
        frame, origin = source.read_file(config.location or source.default_location(), None, config.file_format)
    reviews = source.canonical_reviews(frame, origin, config.columns)
    context.log.info(f"{len(reviews)} reviews of {reviews['hotel_id'].nunique()} hotels from {origin}")
    shipped = origin == str(source.SHIPPED_REVIEWS)
    return dg.Output(reviews, data_version=content_version(reviews), metadata=table_metadata(
        reviews, source=origin, hotels=int(reviews["hotel_id"].nunique()),
        note="the fictional review set written for this project" if shipped else "",
        nationalities=dg.MetadataValue.json(reviews["nationality"].fillna("(none)").value_counts().to_dict())))


PAIR_FIELD = Field(default=list(varieties.DEFAULT_PAIR),
                   description="The two varieties compared (`sctc run --reviews-pair`), the reference first: "
                               f"{', '.join(row.code for row in varieties.REVIEW_VARIETIES)}; default the paper's "
                               "`tw` (Taiwan Mandarin) and `cn` (Mainland Mandarin); or varieties of "
                               "`varieties_file`.")
VARIETIES_FILE_FIELD = Field(
    default=None, description="A YAML or CSV file declaring more review varieties (`sctc run "
                              "--reviews-varieties-file`; see lib/reviews/declared.py): code, prompt language, "
                              "names, OpenCC configuration, regions, prompts.")


class ReviewVarietiesConfig(dg.Config):
    pair: list[str] = PAIR_FIELD
    varieties_file: Optional[str] = VARIETIES_FILE_FIELD
    varieties: Optional[dict[str, str]] = Field(
        default=None,
        description="Self-declared region code (any case) → one of the pair's varieties; default each of the pair's "
                    "codes to itself (`tw=tw cn=cn`). Reviews from other regions are left out.")


def composition_table(frame: pd.DataFrame, codes: tuple[str, str]) -> pd.DataFrame:
    """Table 8: reviews per script composition and variety, with each variety's share."""
    counts = frame.groupby(["script_composition", "variety"]).size().unstack(fill_value=0)
    table = pd.DataFrame(index=counts.index)
    for variety in codes:
        column = counts[variety] if variety in counts else pd.Series(0, index=counts.index)
        table[f"{variety} count"] = column
        table[f"{variety} %"] = (100 * column / max(int(column.sum()), 1)).round(2)
    return table.sort_values([f"{v} count" for v in codes], ascending=False).reset_index()


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def review_varieties(config: ReviewVarietiesConfig, raw_reviews: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Non-empty reviews (title, positive or negative text) whose region maps to one of the pair's varieties,
    with rating class (1–3 / 4–7 / 8–10), visible characters, tokens, 10-token length bin and script composition
    (Table 8)."""
    declared = declared_varieties(config.varieties_file)
    table = varieties.review_varieties(raw_reviews, config.varieties, config.pair, declared)
    empty = int(varieties.is_empty(raw_reviews).sum())
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, by_variety=dg.MetadataValue.json(table["variety"].value_counts().to_dict()),
        left_out_empty=empty, left_out_other_regions=len(raw_reviews) - len(table) - empty,
        variety_map=dg.MetadataValue.json(varieties.variety_map(config.varieties, config.pair, declared)),
        script_composition=dg.MetadataValue.md(markdown_table(
            composition_table(table, varieties.variety_pair(config.pair, declared).codes), rows=40))))


class ReviewPairsConfig(dg.Config):
    pair: list[str] = PAIR_FIELD
    varieties_file: Optional[str] = VARIETIES_FILE_FIELD
    seed: int = Field(default=0, description="Which reviews of a cell's fuller side are paired, and the pair order.")
    max_tokens: int = Field(default=pairing.MAX_TOKENS, description="Longer reviews are left out (paper: 500).")


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def review_pairs(config: ReviewPairsConfig, raw_reviews: pd.DataFrame,
                 review_varieties: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """The largest set of pairs of the two varieties (the paper's: Taiwan/Mainland) of the same hotel, rating class
    and 10-token length bin (tokens: one per Han character, emoji or mark, one per English word or number), the
    per-side columns named by the varieties (`review_id_tw`, `review_id_cn`). `pair_id` numbers them in a seeded
    random order; `length_group` is short (the two reviews average 1–49 characters) or long."""
    pair = varieties.variety_pair(config.pair, declared_varieties(config.varieties_file))
    pairs = pairing.pair_reviews(review_varieties, seed=config.seed, max_tokens=config.max_tokens, pair=pair)
    unpaired = pairing.unpaired_reviews(raw_reviews, review_varieties, pairs, max_tokens=config.max_tokens)
    return dg.Output(pairs, data_version=content_version(pairs), metadata=table_metadata(
        pairs, varieties=" vs ".join(pair.codes), seed=config.seed, max_tokens=config.max_tokens,
        unpaired_total=len(unpaired),
        unpaired=dg.MetadataValue.json(pairing.unpaired_counts(unpaired)),
        by_rating_class=dg.MetadataValue.json(pairs["rating_class"].value_counts().to_dict()),
        by_length_group=dg.MetadataValue.json(pairs["length_group"].value_counts().to_dict())))


@dg.asset_check(asset=review_pairs, additional_ins={"review_varieties": dg.AssetIn("review_varieties")},
                description="Every pair shares hotel, rating class and length bin; no review is used twice.")
def review_pairs_aligned(review_pairs: pd.DataFrame, review_varieties: pd.DataFrame) -> dg.AssetCheckResult:
    cells = review_varieties.set_index("review_id")[pairing.CELL]
    first, second = (review_pairs[f"review_id_{suffix}"] for suffix in pairing.pair_of(review_pairs).suffixes)
    same = cells.loc[first].to_numpy() == cells.loc[second].to_numpy()
    misaligned = review_pairs.loc[~same.all(axis=1), "pair_id"].astype(int).tolist()
    ids = pd.concat([first, second])
    reused = sorted(ids[ids.duplicated()].unique())
    return dg.AssetCheckResult(passed=not misaligned and not reused, metadata={
        "misaligned_pairs": dg.MetadataValue.json(misaligned[:20]),
        "reused_reviews": dg.MetadataValue.json([str(review) for review in reused[:20]])})


class ReviewPromptsConfig(dg.Config):
    seed: int = Field(default=0, description="Seed of the part order in the `shuffled` format.")
    varieties_file: Optional[str] = VARIETIES_FILE_FIELD


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def review_prompts(config: ReviewPromptsConfig, review_pairs: pd.DataFrame,
                   review_varieties: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Appendix C's prompts (in the language of each review's variety) for every paired review in the
    `structured`, `plain` and `shuffled` formats, as written (`original`) and, for a pair of Chinese varieties,
    converted into the other variety with OpenCC (`converted`: tw2sp for Taiwan reviews, s2twp for Mainland ones),
    the stand-in for the paper's Google Translate control (Section 4.1)."""
    declared = declared_varieties(config.varieties_file)
    table = prompts.review_prompts(review_pairs, review_varieties, seed=config.seed, declared=declared)
    pair = varieties.pair_of_columns(review_pairs.columns, "review_id", declared)
    return dg.Output(table, data_version=content_version(table),
                     metadata=table_metadata(table, preview_rows=6, seed=config.seed,
                                             system_prompt=" | ".join(dict.fromkeys(table["system"]))
                                             or prompts.SYSTEM_PROMPT,
                                             translation_control="OpenCC" if pair.convertible else
                                             "none: not a pair of Chinese varieties"))
