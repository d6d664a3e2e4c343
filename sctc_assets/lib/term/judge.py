"""The `judge` label source: any registered model asked the paper's correctness question (gpt_eval.py) for the
default set, and for any other item set which region's form an answer gives (`region_judge_prompt`)."""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

from sctc_assets.lib.generation import stored_text, strip_reasoning
from sctc_assets.lib.varieties import Catalog, PromptingVariety

# The authors' GPT-4o-mini prompt, whitespace included, so a judge sees exactly what theirs saw.
JUDGE_TEMPLATE = """
    The question is {question}.
    The correct answer is {gt}.

    The model's answer is {response}. If the model's answer is correct, respond with 1. Otherwise, respond with 0. 
    """

_VERDICT = re.compile(r"(?<![0-9.])([01])(?![0-9]|\.[0-9])")


def judge_prompt(question: str, gt: str, response: str | None) -> str:
    return JUDGE_TEMPLATE.format(question=question, gt=gt, response="" if response is None else response)


def parse_verdict(answer: object) -> bool | None:
    """1 → True, 0 → False; the first standalone 0/1 decides; None when the judge gave neither."""
    answer = stored_text(answer)
    if not answer:
        return None
    match = _VERDICT.search(answer.strip())
    if match is None:
        return None
    return match.group(1) == "1"


# --- the `judge` label source of any item set (N regions) ------------------------------------------------------------
#
# The judge is shown the question, each region's forms under the region's display name (the prompted region's marked
# as the ones that count as correct) and the model's answer, and asked, in the prompt's script, which region's form
# the answer gives: one line `判断：<region names>` (every region sharing the form), or `判断：无` when the answer
# gives no listed form. `parse_region_verdict` reads that line back as the regions named (empty: none) or None (no
# verdict); `region_judge_label` turns it into the label: correct when the prompted region is named, misaligned
# (with the regions named) when only other regions are, incorrect when none is.

REGION_VERDICT_MARKERS = ("判断", "判斷")
NO_REGION_WORDS = ("无", "無", "none")
_NO_REGION = re.compile(r"^\W*(?:" + "|".join(NO_REGION_WORDS) + r")\W*$")  # 无 alone: 无法判断 is no verdict

_REGION_TEMPLATES = {
    "simplified": (
        "下面是一个问题和一个模型的回答。\n\n"
        "问题：\n{question}\n\n"
        "模型的回答：\n{answer}\n\n"
        "这个问题问的是一个事物的叫法。各地区的叫法如下（同一写法的简体和繁体算作同一个叫法）：\n"
        "{forms}\n"
        "这个问题要的是{prompted}的叫法：只有{prompted}的叫法算作正确答案。\n\n"
        "请判断模型的回答给出的是哪个地区的叫法。如果这个叫法是几个地区共有的，列出所有这些地区。如果回答没有给出"
        "上面任何一个叫法（答错、答非所问或拒绝回答），就回答“无”。\n"
        "最后一行只写“判断：”加上地区名称（照上面的写法，几个地区用“、”隔开），或者“判断：无”。"),
    "traditional": (
        "下面是一個問題和一個模型的回答。\n\n"
        "問題：\n{question}\n\n"
        "模型的回答：\n{answer}\n\n"
        "這個問題問的是一個事物的叫法。各地區的叫法如下（同一寫法的簡體和繁體算作同一個叫法）：\n"
        "{forms}\n"
        "這個問題要的是{prompted}的叫法：只有{prompted}的叫法算作正確答案。\n\n"
        "請判斷模型的回答給出的是哪個地區的叫法。如果這個叫法是幾個地區共有的，列出所有這些地區。如果回答沒有給出"
        "上面任何一個叫法（答錯、答非所問或拒絕回答），就回答「無」。\n"
        "最後一行只寫「判斷：」加上地區名稱（照上面的寫法，幾個地區用「、」隔開），或者「判斷：無」。"),
}
_MARK = {"simplified": "（正确答案）", "traditional": "（正確答案）"}
_LIST_SEPARATOR = "、"


def region_names(catalog: Catalog, codes: Iterable[str]) -> dict[str, str]:
    """Region code → display name, as the judge prompt lists them and `parse_region_verdict` reads them back."""
    return {code: catalog.region(code).display_name for code in codes}


def region_judge_prompt(prompt: str, forms_by_region: Mapping[str, Sequence[str]],
                        prompted_region: PromptingVariety | str, answer: object, catalog: Catalog) -> str:
    """The judge's question about one answer, in the prompting variety's script.

    `forms_by_region`: region code → the concept's forms (regions without forms are not listed);
    `prompted_region`: the prompting variety (a `PromptingVariety` or its code); `catalog`: the varieties catalog
    (display names, scripts). The answer is shown without its reasoning block."""
    variety = prompted_region if isinstance(prompted_region, PromptingVariety) else catalog.variety(prompted_region)
    script = variety.script if variety.script in _REGION_TEMPLATES else "simplified"
    listed = {code: [str(form).strip() for form in forms if str(form).strip()]
              for code, forms in forms_by_region.items() if forms}
    names = region_names(catalog, listed)
    lines = "\n".join(f"- {names[code]}{_MARK[script] if code == variety.region else ''}："
                      f"{_LIST_SEPARATOR.join(forms)}" for code, forms in listed.items() if forms)
    return _REGION_TEMPLATES[script].format(question=prompt, answer=strip_reasoning(answer), forms=lines,
                                            prompted=catalog.region(variety.region).display_name)


def _verdict_line(text: str) -> str:
    """The text after the last `判断：` marker (to the line's end), else the last non-empty line."""
    best = -1
    for marker in REGION_VERDICT_MARKERS:
        for match in re.finditer(re.escape(marker) + r"\s*[:：]", text):
            best = max(best, match.end())
    if best >= 0:
        return text[best:].strip().splitlines()[0] if text[best:].strip() else ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def parse_region_verdict(answer: object, region_names: Mapping[str, str]) -> tuple[str, ...] | None:
    """The regions the judge named (codes, in the order of `region_names`: code → display name), () when it said
    none (`无`), None when it gave no verdict (no answer, or a verdict line naming neither)."""
    text = strip_reasoning(answer)
    if not text:
        return None
    line = _verdict_line(text).casefold()
    found = []
    # the longest names first, each match blanked, so a name inside another is not matched twice
    for code, name in sorted(region_names.items(), key=lambda item: -len(str(item[1]))):
        needle = str(name).casefold()
        if needle and needle in line:
            found.append(code)
            line = line.replace(needle, " ")
    if found:
        return tuple(code for code in region_names if code in found)
    if _NO_REGION.match(line):
        return ()
    return None


def region_judge_label(verdict: tuple[str, ...] | None, prompted_region: str,
                       misaligned_first: bool = False) -> tuple[str | None, str]:
    """(label, regions_found joined by ',') from a verdict: correct when the prompted region is named, misaligned
    when only other regions are (with `misaligned_first`, the paper's rule, whenever another region is), incorrect
    when none is; (None, "") without a verdict."""
    if verdict is None:
        return None, ""
    others = [code for code in verdict if code != prompted_region]
    if prompted_region in verdict and not (misaligned_first and others):
        return "correct", ",".join([prompted_region, *others])
    if others:
        return "misaligned", ",".join(others)
    return "incorrect", ""
