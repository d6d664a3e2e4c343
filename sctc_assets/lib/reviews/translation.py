"""The translation control through a model (`sctc run --reviews-translator KEY`): each paired review translated
into the other variety of the pair by a registered model, the translations rated like the OpenCC conversions, and
Table 3's rows for both controls (`control`: `opencc` or `model:<key>`).

The paper translated with Google Translate (Section 4.1); OpenCC (`prompts._versions`) converts scripts and
phrases between Chinese varieties only and stays as it is. A model translates between any two varieties, an
English or a Portuguese pair too. One request per review, `TRANSLATION_PROMPT` with the review's three parts; the
answer must give the three parts back under their labels. A call that failed, a refusal and an answer not in that
form (or with a part left empty that the review has) are missing data: counted per row of the control table
(`n_untranslated`), never rated, never scored. A translated review is asked in the prompts of the variety it was
translated into (`prompts.variety_templates`), in the same part order as its original, under the same seed.
"""

from __future__ import annotations

import re
from typing import Sequence

import pandas as pd

from sctc_assets.lib.generation import GenerationRequest, GenerationResult, strip_reasoning
from sctc_assets.lib.reviews.metrics import compare, metric_columns
from sctc_assets.lib.reviews.prompts import FORMATS, PROMPT_COLUMNS, render, shuffled_order, variety_templates
from sctc_assets.lib.reviews.source import TEXT_FIELDS
from sctc_assets.lib.reviews.varieties import VarietyPair

# The one translation prompt (quoted in docs/benchmarks/reviews.md).
TRANSLATION_PROMPT = (
    "Translate the following hotel review from {source} into {target}. Write it as a native speaker of {target} "
    "would write it, keeping its meaning and tone. Answer with the three labelled lines below, translated, and "
    "nothing else; keep the labels in English and leave a part empty where it is empty.\n\n"
    "Title: {title}\n"
    "Positive Feedback: {positive}\n"
    "Negative Feedback: {negative}"
)
LABELS = {"title": "Title", "positive": "Positive Feedback", "negative": "Negative Feedback"}
_ANSWER = re.compile(r"\A\s*Title:[ \t]*(?P<title>.*?)\s*^\s*Positive Feedback:[ \t]*(?P<positive>.*?)\s*"
                     r"^\s*Negative Feedback:[ \t]*(?P<negative>.*?)\s*\Z", re.S | re.M)
STATUSES = ("translated", "unparsed", "refused", "error")
VERSION = "translated"
TRANSLATION_COLUMNS = ["translator", "pair_id", "review_id", "variety", "text_variety", *TEXT_FIELDS, "response",
                       "outcome", "status", "input_tokens", "output_tokens", "cached"]


def control_name(translator: str) -> str:
    return f"model:{translator}"


def translation_prompt(fields: dict[str, str], source: str, target: str) -> str:
    return TRANSLATION_PROMPT.format(source=source, target=target, **{name: fields[name] for name in TEXT_FIELDS})


def parse_translation(answer: str | None, original: dict[str, str]) -> dict[str, str] | None:
    """The three translated parts, None when the answer is not in the asked form or leaves a written part empty
    (a part the review does not have stays empty whatever the model wrote there)."""
    match = _ANSWER.match(strip_reasoning(answer))
    if not match:
        return None
    parts = {name: match.group(name).strip() if original[name] else "" for name in TEXT_FIELDS}
    if any(original[name] and not parts[name] for name in TEXT_FIELDS):
        return None
    return parts


def paired_reviews(pairs: pd.DataFrame, varieties: pd.DataFrame, pair: VarietyPair, *,
                   max_pairs: int | None = None) -> pd.DataFrame:
    """Each paired review (the first `max_pairs` pairs) with its variety and text, in pair order."""
    sides = [pairs[["pair_id", f"review_id_{variety.suffix}"]].rename(columns={f"review_id_{variety.suffix}":
                                                                                  "review_id"}).assign(side=side)
             for side, variety in enumerate((pair.first, pair.second))]
    reviews = pd.concat(sides).merge(varieties[["review_id", "variety", *TEXT_FIELDS]], on="review_id", how="left")
    if max_pairs is not None:
        reviews = reviews[reviews["pair_id"] < max_pairs]
    return reviews.sort_values(["pair_id", "side"]).reset_index(drop=True)


def translation_requests(reviews: pd.DataFrame, pair: VarietyPair) -> list[GenerationRequest]:
    """One request per review: into the other variety of the pair, named by display name."""
    requests = []
    for review in reviews.to_dict("records"):
        target = pair.other(review["variety"])
        source = pair.other(target.code)
        requests.append(GenerationRequest.user(
            translation_prompt(review, source.display_name, target.display_name), benchmark="reviews",
            stage="translation", review_id=review["review_id"], text_variety=target.code))
    return requests


def _status(result: GenerationResult, parts: dict[str, str] | None) -> str:
    if result.outcome == "refusal":
        return "refused"
    if result.outcome != "ok":
        return "error"
    return "translated" if parts is not None else "unparsed"


def translations_table(translator: str, reviews: pd.DataFrame, pair: VarietyPair,
                       results: Sequence[GenerationResult]) -> pd.DataFrame:
    """One row per review: the translated parts (null unless `translated`), the raw answer and the status
    (`translated`, `unparsed`, `refused`, `error`)."""
    rows = []
    for review, result in zip(reviews.to_dict("records"), results):
        original = {name: review[name] for name in TEXT_FIELDS}
        parts = parse_translation(result.text, original) if result.outcome == "ok" else None
        rows.append({"translator": translator, "pair_id": review["pair_id"], "review_id": review["review_id"],
                     "variety": review["variety"], "text_variety": pair.other(review["variety"]).code,
                     **{name: (parts or {}).get(name) for name in TEXT_FIELDS}, "response": result.text,
                     "outcome": result.outcome, "status": _status(result, parts),
                     "input_tokens": result.input_tokens, "output_tokens": result.output_tokens,
                     "cached": result.cached})
    frame = pd.DataFrame(rows, columns=TRANSLATION_COLUMNS)
    return frame.astype({"pair_id": "int64", "input_tokens": "Int64", "output_tokens": "Int64", "cached": "bool"})


def translated_prompts(translations: pd.DataFrame, pair: VarietyPair, *, seed: int = 0) -> pd.DataFrame:
    """The rating prompts of the translated reviews (version `translated`), per format, in the prompts of the
    variety each was translated into; `translation` names the control (`model:<key>`)."""
    rows = []
    translated = translations[translations["status"] == "translated"] if not translations.empty else translations
    for review in translated.to_dict("records"):
        order = shuffled_order(review["review_id"], seed)
        templates = variety_templates(pair.other(review["variety"]))
        fields = {name: review[name] for name in TEXT_FIELDS}
        for fmt in FORMATS:
            rows.append({"pair_id": review["pair_id"], "review_id": review["review_id"], "variety": review["variety"],
                         "version": VERSION, "text_variety": review["text_variety"], "format": fmt,
                         "part_order": ",".join(order if fmt == "shuffled" else TEXT_FIELDS),
                         "system": templates.system, "prompt": render(fields, fmt, order, templates),
                         "translation": control_name(review["translator"])})
    return pd.DataFrame(rows, columns=[*PROMPT_COLUMNS, "translation"])


def control_columns(suffixes: tuple[str, str]) -> list[str]:
    """Table 3 with both controls: `control`, the metric table's columns (no `analysis`) and `n_untranslated`."""
    columns = [column for column in metric_columns(suffixes) if column != "analysis"]
    return ["model", "control", *columns[:4], "n_untranslated", *columns[4:]]


def _by_review(predictions: pd.DataFrame) -> pd.Series:
    return predictions.set_index("review_id")["prediction"].astype("Float64").astype(float)


def control_rows(fmt: str, control: str, original: pd.DataFrame, other: pd.DataFrame, pairs: pd.DataFrame,
                 pair: VarietyPair) -> list[dict]:
    """Table 3's two rows of one format and control: each origin's reviews as written against their conversion or
    translation (`tw`/`cn` columns: the variety of the text), over the pairs with both original predictions;
    reviews with no translation (`n_untranslated`) are left out, invalid predictions excluded as everywhere."""
    suffixes = pair.suffixes
    a, b = suffixes
    by_original, by_other = _by_review(original), _by_review(other)
    asked = pairs[pairs[f"review_id_{a}"].isin(by_original.index) & pairs[f"review_id_{b}"].isin(by_original.index)]
    rows = []
    for origin in (pair.first, pair.second):
        ids = asked[f"review_id_{origin.suffix}"]
        present = ids.isin(by_other.index)
        ids, truth = ids[present], asked.loc[present, f"score_{origin.suffix}"]
        texts = {origin.code: ids.map(by_original), pair.other(origin.code).code: ids.map(by_other)}
        rows.append({"control": control, "format": fmt, "subset": f"original {origin.code}",
                     "n_untranslated": int((~present).sum()),
                     **compare(truth, texts[pair.first.code], truth, texts[pair.second.code], suffixes)})
    return rows


def translation_control(model: str, predictions: pd.DataFrame, translated: pd.DataFrame, pairs: pd.DataFrame,
                        pair: VarietyPair) -> pd.DataFrame:
    """Table 3 for one model with a row pair per format and control: OpenCC (`opencc`, from the `converted`
    predictions, the numbers of `review_metrics`' translation rows) and each model translator (`model:<key>`)."""
    rows = []
    for fmt in FORMATS:
        chosen = predictions[predictions["format"] == fmt] if not predictions.empty else predictions
        original = chosen[chosen["version"] == "original"] if not chosen.empty else chosen
        if original.empty:
            continue
        converted = chosen[chosen["version"] == "converted"]
        if not converted.empty:
            rows += control_rows(fmt, "opencc", original, converted, pairs, pair)
        if not translated.empty:
            of_format = translated[translated["format"] == fmt]
            for control in sorted(of_format["translation"].unique()):
                rows += control_rows(fmt, control, original, of_format[of_format["translation"] == control],
                                     pairs, pair)
    table = pd.DataFrame(rows).reindex(columns=control_columns(pair.suffixes))
    table["model"] = model
    counts = ("n_pairs", "n_excluded", "n_untranslated", *(f"only_{suffix}_correct" for suffix in pair.suffixes))
    return table.astype({column: "Int64" for column in counts})
