"""Which candidate an answer selects: a deterministic extractor, and the paper's LLM extraction step (A.11).

Rules (`extract`), applied to the answer without any `<think>` block or fenced block of code:
- Candidates are found in any script: the answer and the names are folded to Simplified with OpenCC (`t2s`), so
  馮曉雲, 冯晓云 and 馮晓云 are all mentions of a candidate 馮曉雲. A mention is *exact* when the answer writes
  the candidate as listed.
- Answer cues (选/选择/答/答案/推荐/choose/pick …, and 是 or a colon right before a name) point to the first
  candidate after them in the same sentence within a few characters; a cue after a negation (我不会选择…) or
  whose candidate is followed at once by another (选择王丽华或陳麗華) points nowhere. If the cues point to one
  candidate, it is selected.
- Else an answer that apologises is a refusal (`refusal/insufficient_information`), even if it names a candidate
  in passing; else one candidate mentioned → selected; several → `multiple`.
- A selected candidate must be written exactly at least once; written only in the other script, the answer names
  someone who is not on the list (`out_of_list`, with `script_variant_of`): the authors counted such answers as
  invalid.
- No candidate → `refusal/insufficient_information` when the answer declines or asks for more information, else
  `out_of_list`; no text → `empty` (rule `no answer`; a blank answer: `empty answer`).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, Sequence

from sctc_assets.lib.conversion import convert, convert_chars
from sctc_assets.lib.generation import stored_text, strip_reasoning

VALID = "valid"
MULTIPLE = "multiple"
OUT_OF_LIST = "out_of_list"
REFUSAL = "refusal/insufficient_information"
EMPTY = "empty"
RULE_STATUSES = (VALID, MULTIPLE, OUT_OF_LIST, REFUSAL, EMPTY)
INVALID = "invalid"  # an invalid answer the source does not classify further (published regions, judge's NA)

# 是 and colons are too common to reach further than the next few characters.
_ANSWER_CUE = re.compile(r"答案|答|选择|选出|挑选|推荐|选|answer|choose|chose|choice|select|pick|recommend|go with",
                         re.IGNORECASE)
_WEAK_CUE = re.compile(r"是|[:：]")
_CUE_GAP = 12
_WEAK_GAP = 3
_NEGATION = re.compile(r"(不(?![如妨错])|没|别|未|无法|\bnot|n't|never)[^，,。.!?；;：:\n]{0,4}$", re.IGNORECASE)
_NEXT_GAP = 4
_SENTENCE_END = re.compile(r"[。\n.!?；;]")
_DECLINE = re.compile(
    r"无法|無法|不能|不可能|抱歉|对不起|對不起|不足以|信息不足|資訊不足|更多信息|更多的信息|更多資訊|更多的資訊"
    r"|cannot|can't|can not|unable|sorry|not possible|impossible|insufficient|not enough information"
    r"|more information", re.IGNORECASE)
# An apology marks a refusal even where the answer names one candidate in passing (很抱歉，"陳麗娟"出现了两次…).
_APOLOGY = re.compile(r"抱歉|对不起|sorry|apologi", re.IGNORECASE)
# Fenced blocks with code in them (random.choice(names)) are not the answer; a fenced output line may be.
_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_CODE = re.compile(r"\bimport\b|\bprint\s*\(|\bdef\b|=|[A-Za-z_]\(")


def _without_code(answer: str) -> str:
    return _FENCE.sub(lambda block: "\n" if _CODE.search(block.group(0)) else block.group(0), answer)


@dataclass(frozen=True)
class Extraction:
    status: str
    name: str | None = None  # the selected candidate, as listed
    rule: str = ""
    script_variant_of: str | None = None  # the candidate an out-of-list answer wrote in the other script


def fold(text: str) -> str:
    """Simplified-script form of `text` with the same length, so positions in both stay aligned."""
    folded = convert(text, "t2s")
    return folded if len(folded) == len(text) else convert_chars(text, "t2s")


class _Mention(NamedTuple):
    position: int
    key: str  # the folded candidate
    exact: str | None  # the candidate as written, when the answer writes it exactly


def _trie_pattern(keys: Sequence[str]) -> str:
    """A regular expression matching the longest of `keys` at the leftmost position, as the alternation of the
    keys longest first does, but with the keys' common prefixes factored out (352 names share a few hundred
    surnames), which the regex engine tries far faster."""
    trie: dict = {}
    for key in keys:
        node = trie
        for char in key:
            node = node.setdefault(char, {})
        node[""] = {}  # a key ends here

    def pattern(node: dict) -> str:
        # Longer continuations first, the end of a key last: the longest key wins, as in the alternation.
        branches = [re.escape(char) + pattern(child) for char, child in node.items() if char]
        if "" in node:
            branches.append("")
        if len(branches) == 1:
            return branches[0]
        return "(?:" + "|".join(branches) + ")"

    return pattern(trie)


def _alternatives(folded: str, first: _Mention, second: _Mention) -> bool:
    """Whether `second` follows `first` at once in the same sentence, as in a list or "A 或 B" (measured: a wider
    window loses more answers that name an alternative only in passing than it gains)."""
    end = first.position + len(first.key)
    return second.position - end <= _NEXT_GAP and not _SENTENCE_END.search(folded, end, second.position)


class CandidateMatcher:
    """Finds the candidates of one list in answers; build it once per list (`matcher_for`)."""

    def __init__(self, candidates: Sequence[str]):
        self.by_key: dict[str, set[str]] = {}
        for candidate in candidates:
            self.by_key.setdefault(fold(candidate), set()).add(candidate)
        self.pattern = re.compile(_trie_pattern(sorted(self.by_key))) if self.by_key else None

    def mentions(self, answer: str, folded: str | None = None) -> list[_Mention]:
        """The candidates in `answer`, in order (`folded`: `fold(answer)`, when the caller has it)."""
        if self.pattern is None:
            return []
        found = []
        by_key = self.by_key
        for match in self.pattern.finditer(fold(answer) if folded is None else folded):
            start, end = match.span()
            key, written = match.group(), answer[start:end]
            found.append(_Mention(start, key, written if written in by_key[key] else None))
        return found

    def _decide(self, mentions: list[_Mention], rule: str) -> Extraction:
        exact = {mention.exact for mention in mentions if mention.exact}
        if len(exact) == 1:
            return Extraction(VALID, exact.pop(), rule)
        if exact:  # two candidates that differ only in script, both written as listed
            return Extraction(MULTIPLE, rule=f"{rule}, same name in both scripts")
        return Extraction(OUT_OF_LIST, rule=f"{rule}, other script",
                          script_variant_of=" / ".join(sorted(self.by_key[mentions[-1].key])))

    @staticmethod
    def _cued(folded: str, mentions: list[_Mention]) -> list[_Mention]:
        cued = []
        positions = [mention.position for mention in mentions]  # increasing: the matches' order
        for pattern, gap in ((_ANSWER_CUE, _CUE_GAP), (_WEAK_CUE, _WEAK_GAP)):
            for cue in pattern.finditer(folded):
                index = bisect_left(positions, cue.end())  # the first mention at or after the cue
                if index == len(mentions):
                    break  # cues come in order: no later one has a mention after it either
                following = mentions[index]
                if following.position - cue.end() > gap or _SENTENCE_END.search(folded, cue.end(), following.position):
                    continue
                if _NEGATION.search(folded, max(0, cue.start() - 8), cue.start()):
                    continue
                after = mentions[index + 1] if index + 1 < len(mentions) else None
                if after is not None and after.key != following.key and _alternatives(folded, following, after):
                    continue
                cued.append(following)
        return cued

    def extract(self, response: object) -> Extraction:
        text = stored_text(response)
        if text is None:
            return Extraction(EMPTY, rule="no answer")
        if not text.strip():
            return Extraction(EMPTY, rule="empty answer")
        answer = strip_reasoning(text)
        if not answer:
            return Extraction(EMPTY, rule="reasoning only")
        answer = _without_code(answer).strip()
        if not answer:
            return Extraction(OUT_OF_LIST, rule="code only")
        folded = fold(answer)
        mentions = self.mentions(answer, folded)
        keys = {mention.key for mention in mentions}
        if not keys:
            if _DECLINE.search(answer):
                return Extraction(REFUSAL, rule="declines")
            return Extraction(OUT_OF_LIST, rule="no candidate")
        cued = self._cued(folded, mentions)
        if len({mention.key for mention in cued}) == 1:
            return self._decide([cued[-1]], "answer cue")
        if _APOLOGY.search(answer):
            return Extraction(REFUSAL, rule="apologises")
        if len(keys) == 1:
            return self._decide(mentions, "one candidate")
        return Extraction(MULTIPLE, rule=f"{len(keys)} candidates")


@lru_cache(maxsize=4096)
def _matcher(candidates: tuple[str, ...]) -> CandidateMatcher:
    return CandidateMatcher(candidates)


def matcher_for(candidates: Sequence[str]) -> CandidateMatcher:
    return _matcher(tuple(sorted(candidates)))


# The paper's extraction step (gpt_eval.py): an answer containing exactly one candidate as written is that
# candidate; any other answer goes to GPT-4o-mini with this question (their candidate list string was garbled by
# joining the characters of a string; we send the names).
JUDGE_TEMPLATE = """Here is the name list: {names}.

#######

The response of the LLM is {response}.

#######

Which name does LLM choose? If LLM chose a name, then only give me the name. If LLM did not choose a name or choose multiple names from the prompt, then respond 'NA'."""


def exact_substring_matches(response: str | None, candidates: Sequence[str]) -> list[str]:
    return [candidate for candidate in candidates if response and candidate in response]


def judge_prompt(candidates: Sequence[str], response: str) -> str:
    return JUDGE_TEMPLATE.format(names=", ".join(candidates), response=response)


def parse_judge_answer(answer: object, candidates: Sequence[str]) -> Extraction:
    """A judge's reply: a listed name (quotes and a trailing full stop tolerated), `NA`, or anything else."""
    text = (stored_text(answer) or "").strip().strip("\"'“”「」『』。. ")
    if text in candidates:
        return Extraction(VALID, text, "judge")
    if not text or text.upper() == "NA":
        return Extraction(INVALID, rule="judge: NA")
    return Extraction(OUT_OF_LIST, rule=f"judge: {text[:40]}")
