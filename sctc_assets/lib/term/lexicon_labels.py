"""The `lexicon` label source: a deterministic labeller built to agree with the published labels (GPT-4o-mini
verdict + the authors' misalignment rule).

Five steps; all are fixed rules except step 4, which is learned from the published labels and therefore always
applied leave-one-model-out to a paper model (its own labels never label its own answers):

1. **What the judge saw.** The authors' `gpt_eval.py` removed every ASCII letter and whitespace from the answers
   of the `llama3-*` models before judging them (`Answer: Turn signal.` reached the judge as `:.`). For those
   models' published answers the text is reduced the same way before extraction; the English answer markers
   (`Answer`, `"answer"`) are kept as 答案 and line breaks are kept, so that the answer span can still be found.
2. **Answer extraction.** `<think>` blocks dropped, the text folded to Simplified with OpenCC (`t2s`, phrases
   included), then the answer span: the first marked answer (`"answer": "…"`, `答案：…`, `Answer: …`, up to the
   end of its line, quote or bracket; a multiple-choice letter stripped), else the text; the first quoted term
   (「…」, “…”, '…') when there is one; else the first clause, without lead-ins such as 这是指/被称为.
3. **Misaligned** by the authors' test without their hand-written exceptions for particular answers: an
   alternative of the other region's term as written, or converted character by character with
   chinese-converter (`upstream_labels.convert_other_region`), anywhere in the raw answer. Misaligned wins.
4. **Published-label lexicon.** Per (language, term, extracted answer), the label the authors' pipeline gave that
   answer, as label shares per model; when at least `min_models` *other* models gave that answer, the label most
   of them got decides. This learns accepted synonyms (辅警 for 协警, 后视镜 for 反视镜), rejected near-misses
   (燃气管道 for 燃气管) and the authors' hand-written misalignment overrides (空客 in a Traditional answer),
   without ever reading the labelled model's own labels.
5. **Fallback.** Correct when the extracted answer is an expected term (in either script); an empty answer is
   correct only when an expected term opens the answer (as the model wrote it); anything else incorrect.

`V1` keeps the settings of the first version (no step 1, marked answers not cut at their line end, abbreviations
such as 空客 for 空中客车 correct in step 5, the `rules` source's misalignment test, two other models) so that the
label-source comparison can show what each change did.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Collection, Iterable, Sequence

import numpy as np
import pandas as pd

from sctc_assets.lib.conversion import convert
from sctc_assets.lib.generation import strip_reasoning
from sctc_assets.lib.term.upstream_labels import convert_other_region

LABELS = ("correct", "incorrect", "misaligned")
LEXICON_COLUMNS = ["lang", "term_id", "answer_key", "model", "n", "share_correct", "share_incorrect",
                   "share_misaligned"]
MIN_MODELS = 3


@dataclass(frozen=True)
class LexiconSettings:
    """The choices the label-source comparison measures; `CURRENT` is what the `lexicon` source uses."""

    judge_view: bool = True  # step 1 for the llama3-* answers
    cut_marked_answer: bool = True  # a marked answer ends at its line end, quote or bracket
    abbreviations: bool = False  # step 5 accepts a non-contiguous subsequence of an expected term (空客)
    authors_misalignment: bool = True  # step 3; False: the `rules` source's misalignment test
    min_models: int = MIN_MODELS


CURRENT = LexiconSettings()
V1 = LexiconSettings(judge_view=False, cut_marked_answer=False, abbreviations=True, authors_misalignment=False,
                     min_models=2)

_JSON_ANSWER = re.compile(r"[\"'](?:answer|答案)[\"']\s*:\s*[\"']([^\"']*)[\"']")
_MARKED = re.compile(r"(?:正确答案|答案|回答|Answer|answer|ANSWER)\s*(?:是|为|is)?\s*[:：]?\s*")
_MARKED_END = re.compile(r"[\n\"'”’」』)）]")
_QUOTED = re.compile(r"[“\"「『‘'《]([^”\"」』’'》\n]{1,12})[”\"」』’'》]")
_OPENING_QUOTES = "“\"「『‘'《"
_LEAD_IN = re.compile(r"^.{0,12}?(?:被称为|称为|叫做|叫作|是指|指的是|就是|应该是|可能是|即为|为|是)")
_OPTION_LETTER = re.compile(r"^\s*[\(（]?[A-Da-d][\)）.．、:：]\s*")
_CLAUSE_END = re.compile(r"[\n\r。；;，,（(：:！!？?]|\s{2,}")
_PUNCTUATION = "。.，,、；;：:！!？?\"'“”‘’「」『』《》【】()（）[]<> \n\r\t*_#`-—…~|"
_MARKED_WINDOW = 60  # characters after an answer marker that can hold the answer
_JSON_WINDOW = 400  # a JSON answer field this far into the text is the model's first answer
_ENGLISH_MARKER = re.compile(r"(?i)\banswer\b")
_LINE_BREAK = re.compile(r"\s*\n\s*")
_ASCII_LETTER_OR_SPACE = re.compile(r"[A-Za-z]|[^\S\n]")


def judge_saw_ascii_stripped(upstream_name: str | None) -> bool:
    """Whether the authors' `gpt_eval.py` removed ASCII letters and whitespace before judging this model."""
    return bool(upstream_name) and str(upstream_name).startswith("llama3-")


def fold(text: str) -> str:
    """One script for comparisons: OpenCC Traditional → Simplified with phrases (臺 → 台, 計程車 → 计程车)."""
    return convert(text, "t2s") if text else ""


def answer_text(response: object, *, ascii_stripped: bool = False) -> str:
    """The answer without reasoning blocks, folded to Simplified; '' for a missing answer (None, NaN, pd.NA).

    `ascii_stripped`: step 1 (the text the judge saw, English answer markers kept as 答案, line breaks kept)."""
    if not isinstance(response, str):
        return ""
    text = strip_reasoning(response)
    if ascii_stripped:
        text = _ASCII_LETTER_OR_SPACE.sub("", _LINE_BREAK.sub("\n", _ENGLISH_MARKER.sub("答案", text)))
    return fold(text)


def _marked_span(window: str) -> tuple[str, bool]:
    """A marked answer up to the end of its line, closing quote or bracket (`print("Answer: 驾校")\n…` → 驾校);
    True when it is a quoted term, which is the answer as it stands."""
    window = _OPTION_LETTER.sub("", window.lstrip(" \n\r\t:："))
    if window[:1] in _OPENING_QUOTES:
        quoted = _QUOTED.match(window)
        if quoted:
            return quoted.group(1), True
    end = _MARKED_END.search(window)
    return (window[:end.start()] if end else window), False


def extract_answer(folded: str, *, cut_marked_answer: bool = True) -> str:
    """The answer span of a folded answer text (see the module docstring, step 2)."""
    candidates = []
    json_field = _JSON_ANSWER.search(folded[:_JSON_WINDOW])
    if json_field:
        candidates.append((json_field.start(), cut_marked_answer, json_field.group(1)))
    marked = _MARKED.search(folded)
    if marked:
        window = folded[marked.end():marked.end() + _MARKED_WINDOW]
        span, final = _marked_span(window) if cut_marked_answer else (window, False)
        candidates.append((marked.start(), final, span))
    _, final, text = min(candidates) if candidates else (0, False, folded)
    if final:
        return text.strip(_PUNCTUATION)
    text = _OPTION_LETTER.sub("", text.strip())
    quoted = _QUOTED.search(text[:_MARKED_WINDOW])
    text = text.strip(_PUNCTUATION)
    if quoted and (quoted.start() > 0 or len(text) > quoted.end() + 1):
        return quoted.group(1).strip(_PUNCTUATION)
    clause = _CLAUSE_END.split(text, maxsplit=1)[0].strip(_PUNCTUATION)
    if len(clause) > 4:
        without_lead_in = _LEAD_IN.sub("", clause)
        if 1 < len(without_lead_in) < len(clause):
            clause = without_lead_in.strip(_PUNCTUATION)
    return clause


@lru_cache(maxsize=1 << 17)
def _text_and_answer(response: str, ascii_stripped: bool, cut_marked_answer: bool) -> tuple[str, str]:
    """Steps 1–2 for one answer text; cached because a model repeats its answers (25,879 distinct answers among
    the 108,900 published ones) and the lexicon, the labels and the comparison each read them all (with both
    settings that is ~60,000 entries, ~40 MB; the cache holds at most 131,072)."""
    text = answer_text(response, ascii_stripped=ascii_stripped)
    return text, extract_answer(text, cut_marked_answer=cut_marked_answer)


def _read(response: object, ascii_stripped: bool, cut_marked_answer: bool) -> tuple[str, str]:
    return _text_and_answer(response, ascii_stripped, cut_marked_answer) if isinstance(response, str) else ("", "")


def answer_keys(responses: Iterable[object], models: Iterable[str | None],
                settings: LexiconSettings = CURRENT) -> tuple[list[str], list[str]]:
    """The texts (steps 1–2's input) and extracted answers of `responses`; `models` are upstream names or None."""
    responses = responses.tolist() if isinstance(responses, pd.Series) else responses  # not Arrow's slow iterator
    read = [_read(response, settings.judge_view and judge_saw_ascii_stripped(model), settings.cut_marked_answer)
            for response, model in zip(responses, models)]
    return [text for text, _ in read], [answer for _, answer in read]


def _is_subsequence(short: str, long: str) -> bool:
    remaining = iter(long)
    return all(char in remaining for char in short)


def is_abbreviation(answer: str, term: str) -> bool:
    """A non-contiguous subsequence of at least two characters: 空客 of 空中客车, not 短裤 of 紧身短裤."""
    return 2 <= len(answer) < len(term) and answer not in term and _is_subsequence(answer, term)


def rule_correct(answer: str, expected: Sequence[str], folded_text: str, *, abbreviations: bool = False) -> bool:
    """Step 5's correct/incorrect decision on an extracted answer; `expected` must be folded too."""
    if not answer:
        opening = folded_text[:50]
        return any(term in opening for term in expected)
    return answer in expected or (abbreviations and any(is_abbreviation(answer, term) for term in expected))


def authors_misaligned_forms(other_region_term: str, response: object, lang: str) -> list[str]:
    """Step 3: the authors' `get_oppo` test without its hand-written exceptions; the other-region forms found.
    `other_region_term` is the other region's term as written (alternatives separated by '/', not trimmed, as
    upstream)."""
    if not isinstance(response, str) or not isinstance(other_region_term, str):
        return []
    return list(dict.fromkeys(form for form in _authors_forms(other_region_term, lang) if form in response))


@lru_cache(maxsize=4096)
def _authors_forms(other_region_term: str, lang: str) -> tuple[str, ...]:
    return (*other_region_term.split("/"), *convert_other_region(other_region_term, lang).split("/"))


@dataclass(frozen=True)
class VerdictLexicon:
    """Published labels per (lang, term_id, answer_key, model) as label shares; see `build_lexicon`."""

    table: pd.DataFrame
    min_models: int = MIN_MODELS

    def votes(self, keys: pd.DataFrame, exclude_models: Collection[str] = ()) -> pd.DataFrame:
        """For each row of `keys` (lang, term_id, answer_key): the summed label shares of the models other than
        `exclude_models` and how many models they are."""
        table = self.table[~self.table["model"].isin(list(exclude_models))] if exclude_models else self.table
        shares = [f"share_{label}" for label in LABELS]
        summed = table.groupby(["lang", "term_id", "answer_key"])[shares].sum()
        summed["n_models"] = table.groupby(["lang", "term_id", "answer_key"]).size()
        return keys.join(summed, on=["lang", "term_id", "answer_key"])[shares + ["n_models"]]


def build_lexicon(labelled: pd.DataFrame, settings: LexiconSettings = CURRENT) -> VerdictLexicon:
    """The lexicon from published labels: `labelled` has model (upstream name), lang, term_id, response and label
    (the `upstream` source). Each model's answers with one key give that model's label shares (so a model that
    repeats one answer 45 times weighs as much as one that gave it once)."""
    frame = labelled[["model", "lang", "term_id", "label"]].copy()
    frame["answer_key"] = answer_keys(labelled["response"], labelled["model"], settings)[1]
    counts = frame.groupby(["lang", "term_id", "answer_key", "model", "label"]).size().unstack("label", fill_value=0)
    for label in LABELS:
        if label not in counts.columns:
            counts[label] = 0
    counts = counts[list(LABELS)]
    total = counts.sum(axis=1)
    table = pd.DataFrame({"n": total})
    for label in LABELS:
        table[f"share_{label}"] = counts[label] / total
    table = table.reset_index()[LEXICON_COLUMNS]
    return VerdictLexicon(table=table, min_models=settings.min_models)


def lexicon_from_table(table: pd.DataFrame, *, min_models: int = MIN_MODELS) -> VerdictLexicon:
    missing = [column for column in LEXICON_COLUMNS if column not in table.columns]
    if missing:
        raise ValueError(f"verdict lexicon table lacks column(s) {missing}")
    return VerdictLexicon(table=table[LEXICON_COLUMNS], min_models=min_models)


def misaligned_forms(frame: pd.DataFrame) -> list[list[str]]:
    """Step 3 for rows with lang, other_region_term and response: the other-region forms in each answer."""
    return [authors_misaligned_forms(term, response, lang) for term, response, lang
            in zip(frame["other_region_term"].tolist(), frame["response"].tolist(), frame["lang"].tolist())]


def fixed_labels(frame: pd.DataFrame, misaligned: Iterable[bool], *, upstream_name: str | None = None,
                 settings: LexiconSettings = CURRENT) -> pd.DataFrame:
    """Steps 1–3 and 5 for rows with lang, term_id, response and expected (the prompting region's alternatives).

    `misaligned`: the misalignment test of each row (`misaligned_forms`, or the `rules` source's for `V1`);
    `upstream_name`: the paper model whose published answers these are (step 1), None for any other model.
    Returns the label, the extracted answer and how each label was decided (`misaligned_rule`, `rule`)."""
    flags = np.asarray(list(misaligned), dtype=bool)
    if len(flags) != len(frame):
        raise ValueError(f"{len(flags)} misalignment flags for {len(frame)} rows")
    texts, answers = answer_keys(frame["response"], [upstream_name] * len(frame), settings)
    if settings.judge_view and judge_saw_ascii_stripped(upstream_name):
        # step 5 reads the answer's opening as the model wrote it
        texts = [_read(response, False, settings.cut_marked_answer)[0] for response in frame["response"].tolist()]
    labels, decided = [], []
    folded_of: dict[tuple, list[str]] = {}  # a term's expected forms folded once, not once per answer
    for answer, text, expected, is_misaligned in zip(answers, texts, frame["expected"].tolist(), flags):
        if is_misaligned:
            labels.append("misaligned")
            decided.append("misaligned_rule")
            continue
        key = tuple(expected)
        folded_expected = folded_of.get(key)
        if folded_expected is None:
            folded_expected = folded_of[key] = [fold(term) for term in expected]
        correct = rule_correct(answer, folded_expected, text, abbreviations=settings.abbreviations)
        labels.append("correct" if correct else "incorrect")
        decided.append("rule")
    return pd.DataFrame({"label": labels, "answer_key": answers, "decided_by": decided}, index=frame.index)


def apply_lexicon(fixed: pd.DataFrame, frame: pd.DataFrame, lexicon: VerdictLexicon | None, *,
                  exclude_models: Collection[str] = (), settings: LexiconSettings = CURRENT) -> pd.DataFrame:
    """Step 4 over `fixed_labels`' result: where at least `lexicon.min_models` models outside `exclude_models`
    gave the answer, their majority label (a misaligned verdict of step 3 stands, except with `V1`)."""
    result = fixed.copy()
    if lexicon is None or lexicon.table.empty:
        return result
    keys = pd.DataFrame({"lang": frame["lang"].to_numpy(), "term_id": frame["term_id"].to_numpy(),
                         "answer_key": fixed["answer_key"].to_numpy()}, index=frame.index)
    votes = lexicon.votes(keys, exclude_models)
    use = (votes["n_models"].fillna(0) >= lexicon.min_models).to_numpy(copy=True)
    if settings.authors_misalignment:
        use &= (fixed["decided_by"] != "misaligned_rule").to_numpy()  # what the authors' labels used stands
    shares = votes[[f"share_{label}" for label in LABELS]].fillna(0).to_numpy()
    winner = np.asarray(LABELS, dtype=object)[shares.argmax(axis=1)]
    result.loc[use, "label"] = winner[use]
    result.loc[use, "decided_by"] = "lexicon"
    return result


def label_frame(frame: pd.DataFrame, misaligned: Iterable[bool], lexicon: VerdictLexicon | None,
                *, exclude_model: str | None, upstream_name: str | None = None,
                settings: LexiconSettings = CURRENT) -> pd.DataFrame:
    """All five steps (`fixed_labels`, then `apply_lexicon`). `exclude_model`: the paper model whose own labels
    must not be used (None for any other model). Returns label, answer_key and decided_by (`misaligned_rule`,
    `lexicon`, `rule`)."""
    fixed = fixed_labels(frame, misaligned, upstream_name=upstream_name, settings=settings)
    return apply_lexicon(fixed, frame, lexicon, exclude_models=() if exclude_model is None else (exclude_model,),
                         settings=settings)
