"""The `lexicon` label source: a deterministic labeller built to agree with the published GPT-4o-mini verdicts.

Three steps, each a fixed rule except the third, which is learned from the published verdicts and therefore
always applied leave-one-model-out to a paper model (its own verdicts never label its own answers):

1. **Answer extraction.** `<think>` blocks dropped, the text folded to Simplified with OpenCC (`t2s`, phrases
   included), then the answer span: the first marked answer (`"answer": "…"`, `答案：…`, `Answer: …`, a
   multiple-choice letter stripped), else the text; the first quoted term (「…」, “…”, '…') when there is one;
   else the first clause, without lead-ins such as 这是指/被称为.
2. **Fixed rules.** Correct when the answer is an expected term (in either script) or an abbreviation of one: a
   non-contiguous subsequence of at least two characters (空客 for 空中客车, 网购 for 网上购物, 手排 for 手动排挡).
   A contiguous piece (短裤 of 紧身短裤, 中介 of 房屋中介) names a broader thing and is not an abbreviation; the
   judge rejects those. An empty answer is correct only when an expected term opens the text. Misaligned as the
   `rules` source decides (the other region's term anywhere in the answer).
3. **Published-verdict lexicon.** Per (language, term, extracted answer), the label the authors' pipeline gave
   that answer (GPT-4o-mini verdict + their misalignment rule), averaged per model; when at least
   `min_models` *other* models gave that answer, the label most of their answers got wins over steps 1–2. This
   learns accepted synonyms (辅警 for 协警, 后视镜 for 反视镜), rejected near-misses (燃气管道 for 燃气管) and
   the authors' hand-written misalignment overrides, without ever reading the labelled model's own verdicts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from sctc_assets.lib.conversion import convert
from sctc_assets.lib.generation import strip_reasoning

LABELS = ("correct", "incorrect", "misaligned")
LEXICON_COLUMNS = ["lang", "term_id", "answer_key", "model", "n", "share_correct", "share_incorrect",
                   "share_misaligned"]
MIN_MODELS = 2

_JSON_ANSWER = re.compile(r"[\"']answer[\"']\s*:\s*[\"']([^\"']*)[\"']")
_MARKED = re.compile(r"(?:正确答案|答案|回答|Answer|answer|ANSWER)\s*(?:是|为|is)?\s*[:：]?\s*")
_QUOTED = re.compile(r"[“\"「『‘'《]([^”\"」』’'》\n]{1,12})[”\"」』’'》]")
_LEAD_IN = re.compile(r"^.{0,12}?(?:被称为|称为|叫做|叫作|是指|指的是|就是|应该是|可能是|即为|为|是)")
_OPTION_LETTER = re.compile(r"^\s*[\(（]?[A-Da-d][\)）.．、:：]\s*")
_CLAUSE_END = re.compile(r"[\n\r。；;，,（(：:！!？?]|\s{2,}")
_PUNCTUATION = "。.，,、；;：:！!？?\"'“”‘’「」『』《》【】()（）[]<> \n\r\t*_#`-—…~|"
_MARKED_WINDOW = 60  # characters after an answer marker that can hold the answer
_JSON_WINDOW = 400  # a JSON answer field this far into the text is the model's first answer


def fold(text: str) -> str:
    """One script for comparisons: OpenCC Traditional → Simplified with phrases (臺 → 台, 計程車 → 计程车)."""
    return convert(text, "t2s") if text else ""


def answer_text(response: object) -> str:
    """The answer without reasoning blocks, folded to Simplified; '' for a missing answer (None, NaN, pd.NA)."""
    return fold(strip_reasoning(response)) if isinstance(response, str) else ""


def extract_answer(folded: str) -> str:
    """The answer span of a folded answer text (see the module docstring, step 1)."""
    candidates = []
    json_field = _JSON_ANSWER.search(folded[:_JSON_WINDOW])
    if json_field:
        candidates.append((json_field.start(), json_field.group(1)))
    marked = _MARKED.search(folded)
    if marked:
        candidates.append((marked.start(), folded[marked.end():marked.end() + _MARKED_WINDOW]))
    text = min(candidates)[1] if candidates else folded
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


def _is_subsequence(short: str, long: str) -> bool:
    remaining = iter(long)
    return all(char in remaining for char in short)


def is_abbreviation(answer: str, term: str) -> bool:
    """A non-contiguous subsequence of at least two characters: 空客 of 空中客车, not 短裤 of 紧身短裤."""
    return 2 <= len(answer) < len(term) and answer not in term and _is_subsequence(answer, term)


def rule_correct(answer: str, expected: Sequence[str], folded_text: str) -> bool:
    """Step 2's correct/incorrect decision on an extracted answer; `expected` must be folded too."""
    if not answer:
        opening = folded_text[:50]
        return any(term in opening for term in expected)
    return answer in expected or any(is_abbreviation(answer, term) for term in expected)


@dataclass(frozen=True)
class VerdictLexicon:
    """Published labels per (lang, term_id, answer_key, model) as label shares; see `build_lexicon`."""

    table: pd.DataFrame
    min_models: int = MIN_MODELS

    def votes(self, keys: pd.DataFrame, exclude_model: str | None) -> pd.DataFrame:
        """For each row of `keys` (lang, term_id, answer_key): the summed label shares of the other models and
        how many models they are."""
        table = self.table if exclude_model is None else self.table[self.table["model"] != exclude_model]
        shares = [f"share_{label}" for label in LABELS]
        summed = table.groupby(["lang", "term_id", "answer_key"])[shares].sum()
        summed["n_models"] = table.groupby(["lang", "term_id", "answer_key"]).size()
        return keys.join(summed, on=["lang", "term_id", "answer_key"])[shares + ["n_models"]]


def build_lexicon(labelled: pd.DataFrame, *, min_models: int = MIN_MODELS) -> VerdictLexicon:
    """The lexicon from published labels: `labelled` has model, lang, term_id, response and label (the
    `upstream` source). Each model's answers with one key give that model's label shares (so a model that
    repeats one answer 45 times weighs as much as one that gave it once)."""
    frame = labelled[["model", "lang", "term_id", "label"]].copy()
    frame["answer_key"] = [extract_answer(answer_text(response)) for response in labelled["response"]]
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
    return VerdictLexicon(table=table, min_models=min_models)


def lexicon_from_table(table: pd.DataFrame, *, min_models: int = MIN_MODELS) -> VerdictLexicon:
    missing = [column for column in LEXICON_COLUMNS if column not in table.columns]
    if missing:
        raise ValueError(f"verdict lexicon table lacks column(s) {missing}")
    return VerdictLexicon(table=table[LEXICON_COLUMNS], min_models=min_models)


def label_frame(frame: pd.DataFrame, rules_labels: Iterable[str], lexicon: VerdictLexicon | None,
                *, exclude_model: str | None) -> pd.DataFrame:
    """Labels for rows with lang, term_id, response and expected (the prompting region's alternatives).

    `rules_labels` are the `rules` source's labels of the same rows (its misalignment test is reused).
    `exclude_model`: the paper model whose own verdicts must not be used (None for any other model). Returns the
    label, the extracted answer and how each label was decided (`misaligned_rule`, `lexicon`, `rule`)."""
    texts = [answer_text(response) for response in frame["response"]]
    answers = [extract_answer(text) for text in texts]
    rule_labels = np.asarray(list(rules_labels), dtype=object)
    if len(rule_labels) != len(frame):
        raise ValueError(f"{len(rule_labels)} rules labels for {len(frame)} rows")
    labels, decided = [], []
    for answer, text, expected, rules_label in zip(answers, texts, frame["expected"], rule_labels):
        if rules_label == "misaligned":
            labels.append("misaligned")
            decided.append("misaligned_rule")
            continue
        folded_expected = [fold(term) for term in expected]
        labels.append("correct" if rule_correct(answer, folded_expected, text) else "incorrect")
        decided.append("rule")
    result = pd.DataFrame({"label": labels, "answer_key": answers, "decided_by": decided}, index=frame.index)
    if lexicon is not None and not lexicon.table.empty:
        keys = pd.DataFrame({"lang": frame["lang"].to_numpy(), "term_id": frame["term_id"].to_numpy(),
                             "answer_key": answers}, index=frame.index)
        votes = lexicon.votes(keys, exclude_model)
        use = (votes["n_models"].fillna(0) >= lexicon.min_models).to_numpy()
        shares = votes[[f"share_{label}" for label in LABELS]].fillna(0).to_numpy()
        winner = np.asarray(LABELS, dtype=object)[shares.argmax(axis=1)]
        result.loc[use, "label"] = winner[use]
        result.loc[use, "decided_by"] = "lexicon"
    return result
