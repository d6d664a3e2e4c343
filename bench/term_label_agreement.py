"""How well the deterministic term labellers agree with the published labels (GPT-4o-mini verdict + the authors'
misalignment rule), and what stands in the way of the issue's targets (≥ 95 % mean, ≥ 90 % worst group over the
22 paper model × language groups).

Reads the published answers of the 11 paper LLMs from the SC-TC-Bench data (`$SCTC_UPSTREAM`) and prints:

1. per group: `rules`, `lexicon_v1` and `lexicon`, leave-one-model-out and in-sample, from
   `label_source_agreement` (what the `term_label_source_agreement` asset stores; the term page's figures);
2. per model (both languages): `lexicon_v1` vs `lexicon` leave-one-model-out, with the mean and worst group;
3. the targets' shortfall in answers, and for every group below 90 % (and the mean) where its disagreements
   come from: the fixed rules' fallback (an answer no three other models gave, or no answer at all), the other
   models' majority (the same answer judged differently for this model) or the misalignment test; and how often
   the judge accepted the fallback's incorrect answers per generic relation to an expected term (contains it,
   inside it, one edit from it, shares most characters), i.e. whether a similarity rule could help;
4. an ablation: the current `lexicon` with one setting at a time put back to `lexicon_v1`'s (leave-one-model-out);
5. a nested choice of `min_models`: for each held-out model, the value (1–5) that labels the other ten models
   best, each of them leave-one-model-out without the held-out model either; then the held-out model with it;
6. the bounds below the worst groups: for each group, the agreement of the majority label of each (prompt variant,
   term, extracted answer) cell of *that group's own labels* (the most any labeller deciding from the answer can
   reach, fitted in-sample), and with the answer's format class added; with counted examples;
7. the CPU seconds of labelling all 22 published partitions as `term_labels` does (one lexicon lookup per
   partition), `lexicon_v1` and `lexicon` side by side.

    python bench/term_label_agreement.py            # everything (~2 CPU minutes)
    python bench/term_label_agreement.py --quick    # sections 1-3 only
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's sctc_assets, not an installed one
from sctc_assets.lib.term.terms import LANGS as TERM_LANGS  # noqa: E402
from sctc_assets.lib.varieties import SIMPLIFIED  # noqa: E402


def _published() -> pd.DataFrame:
    from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
    from sctc_assets.lib.term.prompts import build_prompts
    from sctc_assets.lib.term.published import published_term_labels
    from sctc_assets.lib.term.terms import parse_terms
    from sctc_assets.resources.upstream import SCTCUpstreamResource

    source = SCTCUpstreamResource().open()
    prompts = build_prompts(parse_terms(source.read_csv(TERMS_FILE, TERM_COLUMNS)))
    published, missing = published_term_labels(source, prompts)
    if missing:
        raise SystemExit(f"upstream files missing: {missing}")
    return published


def _percent(value: float) -> str:
    return f"{100 * value:.2f}"


def _group_table(table: pd.DataFrame) -> str:
    groups = table[~table["model"].isin(["mean", "worst"])]
    wide = groups.pivot_table(index=["model", "lang"], columns=["label_source", "evaluation"], values="agreement")
    columns = [("rules", "fixed_rules"), ("lexicon_v1", "leave_one_model_out"), ("lexicon_v1", "in_sample"),
               ("lexicon", "leave_one_model_out"), ("lexicon", "in_sample")]
    lines = ["| model | lang | rules | v1 LOMO | v1 in-sample | lexicon LOMO | lexicon in-sample |",
             "|---|---|---|---|---|---|---|"]
    for (model, lang), row in wide.iterrows():
        lines.append(f"| {model} | {lang} | " + " | ".join(_percent(row[column]) for column in columns) + " |")
    for name, pick in (("mean", "mean"), ("worst", "min")):
        values = [getattr(wide[column], pick)() for column in columns]
        lines.append(f"| **{name}** | | " + " | ".join(_percent(value) for value in values) + " |")
    return "\n".join(lines)


def _agreement(published: pd.DataFrame, predicted: pd.Series) -> pd.Series:
    agree = published["upstream_label"].to_numpy() == predicted.reindex(published.index).to_numpy()
    return pd.Series(agree, index=published.index).groupby([published["model"], published["lang"]]).mean()


def _per_model_table(table: pd.DataFrame) -> str:
    """`lexicon_v1` vs `lexicon` leave-one-model-out per paper model (S, T, both languages)."""
    groups = table[~table["model"].isin(["mean", "worst"]) & (table["evaluation"] == "leave_one_model_out")]
    lines = ["| model | v1 S | v1 T | v1 both | lexicon S | lexicon T | lexicon both | change (pp) |",
             "|---|---|---|---|---|---|---|---|"]
    wide = groups.pivot_table(index="model", columns=["label_source", "lang"], values="agreement")
    for model, row in wide.iterrows():
        v1 = [row[("lexicon_v1", lang)] for lang in TERM_LANGS]
        v2 = [row[("lexicon", lang)] for lang in TERM_LANGS]
        lines.append(f"| {model} | " + " | ".join(_percent(v) for v in (*v1, np.mean(v1), *v2, np.mean(v2)))
                     + f" | {100 * (np.mean(v2) - np.mean(v1)):+.2f} |")
    for name, pick in (("mean", np.mean), ("worst", np.min)):
        values = []
        for source in ("lexicon_v1", "lexicon"):
            per_group = groups[groups["label_source"] == source]["agreement"]
            by_lang = [groups[(groups["label_source"] == source) & (groups["lang"] == lang)]["agreement"]
                       for lang in TERM_LANGS]
            values += [pick(by_lang[0]), pick(by_lang[1]), pick(per_group)]
        lines.append(f"| **{name} group** | " + " | ".join(_percent(v) for v in values) + " | |")
    return "\n".join(lines)


def _decisions(published: pd.DataFrame) -> pd.DataFrame:
    """The current `lexicon`'s leave-one-model-out labels with how each was decided and the extracted answer."""
    from sctc_assets.lib.term import lexicon_labels as lx

    lexicon = lx.build_lexicon(published.rename(columns={"upstream_label": "label"}))
    frames = []
    for model, frame in published.groupby("model", sort=False):
        fixed = lx.fixed_labels(frame, [bool(found) for found in lx.misaligned_forms(frame)], upstream_name=model)
        frames.append(lx.apply_lexicon(fixed, frame, lexicon, exclude_models=(model,)))
    decided = pd.concat(frames).reindex(published.index)
    return published.join(decided.rename(columns={"label": "predicted"}))


_CAUSES = {  # (decided_by, published label, our label) → what went wrong
    "fallback: judge accepted an answer that is no expected term": lambda d: (d["decided_by"] == "rule")
    & (d["upstream_label"] == "correct") & (d["answer_key"] != ""),
    "fallback: judge accepted a text with no extractable answer": lambda d: (d["decided_by"] == "rule")
    & (d["upstream_label"] == "correct") & (d["answer_key"] == ""),
    "fallback: judge rejected an expected term": lambda d: (d["decided_by"] == "rule")
    & (d["upstream_label"] == "incorrect") & (d["predicted"] == "correct"),
    "other models' majority: judge accepted here, rejected for them": lambda d: (d["decided_by"] == "lexicon")
    & (d["upstream_label"] == "correct") & (d["predicted"] == "incorrect"),
    "other models' majority: judge rejected here, accepted for them": lambda d: (d["decided_by"] == "lexicon")
    & (d["upstream_label"] == "incorrect") & (d["predicted"] == "correct"),
    "misaligned on one side (our test, the authors' exceptions, the majority)":
        lambda d: (d["upstream_label"] == "misaligned") | (d["predicted"] == "misaligned"),
}


def _shortfall(decisions: pd.DataFrame) -> list[str]:
    """How many answers each target lacks, and the causes of the disagreements in the groups below 90 %."""
    decisions = decisions.assign(wrong=decisions["upstream_label"] != decisions["predicted"])
    per_group = decisions.groupby(["model", "lang"])["wrong"].agg(["size", "sum"])
    per_group["agreement"] = 1 - per_group["sum"] / per_group["size"]
    group_size = int(per_group["size"].iloc[0])
    needed_mean = int(np.ceil(0.95 * group_size * len(per_group) - (per_group["size"] - per_group["sum"]).sum()))
    lines = [f"mean {_percent(per_group['agreement'].mean())} % (target 95): {max(needed_mean, 0)} more agreeing"
             f" answers of {int(per_group['size'].sum())} needed (the groups are equal, {group_size} answers each)"]
    below = per_group[per_group["agreement"] < 0.90]
    for (model, lang), row in below.iterrows():
        lines.append(f"{model}/{lang} {_percent(row['agreement'])} % (target 90): "
                     f"{int(np.ceil(0.90 * row['size'] - (row['size'] - row['sum'])))} more agreeing answers needed")
    wrong = decisions[decisions["wrong"]]
    lines += ["", "Disagreements by cause (leave-one-model-out `lexicon`; groups below 90 %, and all 22):", "",
              "| cause | " + " | ".join(f"{m}/{l}" for m, l in below.index) + " | all 22 |",
              "|---|" + "---|" * (len(below) + 1)]
    for cause, select in _CAUSES.items():
        chosen = wrong[select(wrong)]
        counts = chosen.groupby(["model", "lang"]).size()
        lines.append(f"| {cause} | " + " | ".join(str(int(counts.get(key, 0))) for key in below.index)
                     + f" | {len(chosen)} |")
    lines.append("| **all** | " + " | ".join(str(int(below.loc[key, 'sum'])) for key in below.index)
                 + f" | {len(wrong)} |")
    fallback = decisions[decisions["decided_by"] == "rule"]
    empty = fallback[fallback["answer_key"] == ""]
    other = fallback[(fallback["answer_key"] != "") & (fallback["predicted"] == "incorrect")]
    lines += ["", "How the judge labelled what the fallback calls incorrect (all 22 groups):", "",
              "| fallback case | answers | judged correct | share |", "|---|---|---|---|"]
    for name, rows in (("no extractable answer", empty[empty["predicted"] == "incorrect"]),
                       ("an answer no three other models gave, not an expected term", other)):
        accepted = int((rows["upstream_label"] == "correct").sum())
        lines.append(f"| {name} | {len(rows)} | {accepted} | {_percent(accepted / max(len(rows), 1))} |")
    return lines


def _edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def _similarity(answer: str, expected: list[str]) -> str:
    """The closest generic relation of an answer the fallback calls incorrect to an expected term."""
    if not answer:
        return "no extractable answer"
    if any(term in answer for term in expected):
        return "contains an expected term"
    if any(answer in term for term in expected):
        return "inside an expected term"
    if any(_edit_distance(answer, term) == 1 for term in expected):
        return "one edit from an expected term"
    if max(2 * len(set(answer) & set(term)) / (len(set(answer)) + len(set(term))) for term in expected) >= 0.6:
        return "shares >= 60 % of its characters"
    return "none of these"


def _similarity_rules(decisions: pd.DataFrame) -> list[str]:
    """Would a generic similarity rule help the fallback? How often the judge accepted each relation."""
    from sctc_assets.lib.term import lexicon_labels as lx

    fallback = decisions[(decisions["decided_by"] == "rule") & (decisions["predicted"] == "incorrect")]
    relation = pd.Series([_similarity(answer, [lx.fold(term) for term in expected]) for answer, expected
                          in zip(fallback["answer_key"], fallback["expected"])], index=fallback.index)
    accepted = (fallback["upstream_label"] == "correct")
    lines = ["| relation to an expected term | answers | judged correct | share |", "|---|---|---|---|"]
    for name, rows in accepted.groupby(relation):
        lines.append(f"| {name} | {len(rows)} | {int(rows.sum())} | {_percent(rows.mean())} |")
    return lines


def _ablation(published: pd.DataFrame) -> list[str]:
    from sctc_assets.assets.term.label_sources import lexicon_labels_of_published
    from sctc_assets.lib.term import lexicon_labels as lx

    labelled = published.rename(columns={"upstream_label": "label"})
    variants = {"lexicon (current)": lx.CURRENT, "lexicon_v1": lx.V1}
    for field in dataclasses.fields(lx.LexiconSettings):
        value = getattr(lx.V1, field.name)
        if value != getattr(lx.CURRENT, field.name):
            variants[f"current, {field.name}={value}"] = dataclasses.replace(lx.CURRENT, **{field.name: value})
    lines = ["| settings | LOMO mean | LOMO worst |", "|---|---|---|"]
    for name, settings in variants.items():
        lexicon = lx.build_lexicon(labelled, settings)
        groups = _agreement(published, lexicon_labels_of_published(published, lexicon, settings)["leave_one_model_out"])
        lines.append(f"| {name} | {_percent(groups.mean())} | {_percent(groups.min())} "
                     f"({'/'.join(groups.idxmin())}) |")
    return lines


def _nested_min_models(published: pd.DataFrame, candidates=(1, 2, 3, 4, 5)) -> list[str]:
    from sctc_assets.lib.term import lexicon_labels as lx

    lexicon = lx.build_lexicon(published.rename(columns={"upstream_label": "label"}))
    frames = dict(tuple(published.groupby("model", sort=False)))
    fixed = {model: lx.fixed_labels(frame, [bool(f) for f in lx.misaligned_forms(frame)], upstream_name=model)
             for model, frame in frames.items()}

    def group_agreement(model: str, excluded: tuple[str, ...], min_models: int) -> list[float]:
        chosen = dataclasses.replace(lexicon, min_models=min_models)
        frame = frames[model]
        labels = lx.apply_lexicon(fixed[model], frame, chosen, exclude_models=excluded)["label"]
        agree = labels.to_numpy() == frame["upstream_label"].to_numpy()
        return [agree[(frame["lang"] == lang).to_numpy()].mean() for lang in TERM_LANGS]

    lines, nested = ["| held-out model | chosen min_models | S | T |", "|---|---|---|---|"], []
    for held_out in frames:
        inner = {m: np.mean([a for model in frames if model != held_out
                             for a in group_agreement(model, (model, held_out), m)]) for m in candidates}
        best = max(inner, key=inner.get)
        result = group_agreement(held_out, (held_out,), best)
        nested += result
        lines.append(f"| {held_out} | {best} | {_percent(result[0])} | {_percent(result[1])} |")
    lines.append(f"| **nested** | | mean {_percent(np.mean(nested))} | worst {_percent(min(nested))} |")
    return lines


_CJK = re.compile(r"[\u3400-\u9fff]")
_CODE = re.compile(r"print\(|[\"'](?:answer|答案)[\"']\s*:")


def _format_class(seen: str) -> str:
    """A diagnostic class of what the judge saw: no Chinese at all (ending in '.' or not), code/JSON, long, short."""
    if not _CJK.search(seen):
        return "no_chinese_dot" if seen.rstrip().endswith(".") else "no_chinese"
    if _CODE.search(seen):
        return "code"
    return "long" if len(seen) > 60 else "short"


def _bounds(published: pd.DataFrame, lomo: pd.Series) -> list[str]:
    from sctc_assets.lib.term import lexicon_labels as lx

    frame = published.copy()
    texts, answers = lx.answer_keys(frame["response"], frame["model"])
    frame["answer_key"], frame["format"] = answers, [_format_class(text) for text in texts]
    frame["seen"] = texts
    frame["lomo_ok"] = frame["upstream_label"].to_numpy() == lomo.reindex(frame.index).to_numpy()

    def majority_share(group: pd.DataFrame, cells: list[str]) -> float:
        counts = group.groupby(cells)["upstream_label"].value_counts()
        return counts.groupby(level=list(range(len(cells)))).max().sum() / len(group)

    lines = ["| model | lang | lexicon LOMO | own-label bound: variant×term×answer | + format class |",
             "|---|---|---|---|---|"]
    for (model, lang), group in frame.groupby(["model", "lang"]):
        cells = ["prompt_variant", "term_id", "answer_key"]
        lines.append(f"| {model} | {lang} | {_percent(group['lomo_ok'].mean())} | "
                     f"{_percent(majority_share(group, cells))} | {_percent(majority_share(group, cells + ['format']))} |")
    llama = frame[(frame["model"] == "llama3-70b") & (frame["lang"] == SIMPLIFIED.code)]
    lines += ["", "Llama-3-70B Simplified, by what the judge saw (published label counts; lexicon LOMO errors):", "",
              "| format | n | correct | incorrect | misaligned | lexicon errors |", "|---|---|---|---|---|---|"]
    for name, group in llama.groupby("format"):
        counts = group["upstream_label"].value_counts()
        lines.append(f"| {name} | {len(group)} | {counts.get('correct', 0)} | {counts.get('incorrect', 0)} | "
                     f"{counts.get('misaligned', 0)} | {int((~group['lomo_ok']).sum())} |")
    expected = [[lx.fold(term) for term in terms] for terms in llama["expected"]]
    exact = np.array([key in terms for key, terms in zip(llama["answer_key"], expected)])
    code = (llama["format"] == "code").to_numpy()
    judged_correct = (llama["upstream_label"] == "correct").to_numpy()
    lines.append(f"\ncode/JSON answers whose first answer is exactly the expected term: {int((code & exact).sum())},"
                 f" judged correct {int((code & exact & judged_correct).sum())}; other code/JSON answers:"
                 f" {int((code & ~exact).sum())}, judged correct {int((code & ~exact & judged_correct).sum())}")
    no_answer = llama[llama["answer_key"] == ""]
    lines.append(f"answers in which the judge saw no answer (no Chinese after the marker, e.g. `Answer: Turn signal.`"
                 f" seen as `答案:.`): {len(no_answer)}, judged correct"
                 f" {int((no_answer['upstream_label'] == 'correct').sum())}")
    other = frame[(frame["model"] == "llama3-8b") & (frame["lang"] == SIMPLIFIED.code) & (frame["format"] == "no_chinese_dot")]
    lines.append(f"Llama-3-8B Simplified answers the judge saw without Chinese, ending in '.': {len(other)}, judged"
                 f" correct {int((other['upstream_label'] == 'correct').sum())}")
    return lines


def _cpu_seconds(published: pd.DataFrame) -> list[str]:
    """`term_labels`' work per partition: the misalignment test, then `label_frame` with its own model left out."""
    from sctc_assets.lib.term import lexicon_labels as lx

    labelled = published.rename(columns={"upstream_label": "label"})
    lines = ["| settings | build lexicon (s) | label 22 partitions (s) |", "|---|---|---|"]
    for name, settings in (("lexicon_v1", lx.V1), ("lexicon", lx.CURRENT)):
        lx._text_and_answer.cache_clear()  # each from a cold cache of read answers, as in a fresh run
        start = time.process_time()
        lexicon = lx.build_lexicon(labelled, settings)
        built = time.process_time() - start
        start = time.process_time()
        for (model, _lang), frame in published.groupby(["model", "lang"], sort=False):
            misaligned = ([bool(found) for found in lx.misaligned_forms(frame)] if settings.authors_misalignment
                          else frame["rules_label"] == "misaligned")
            lx.label_frame(frame, misaligned, lexicon, exclude_model=model, upstream_name=model, settings=settings)
        lines.append(f"| {name} | {built:.2f} | {time.process_time() - start:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the agreement tables and the shortfall")
    args = parser.parse_args()

    from sctc_assets.assets.term.label_sources import label_source_agreement, lexicon_labels_of_published
    from sctc_assets.lib.term import lexicon_labels as lx

    published = _published()
    lexicon = lx.build_lexicon(published.rename(columns={"upstream_label": "label"}))
    table = label_source_agreement(published, lexicon.table)
    print("## Agreement with the published labels per group (%)\n")
    print(_group_table(table))
    summary = table[table["model"].isin(["mean", "worst"])]
    print("\n" + summary.to_string(index=False))
    print("\n## Per model, lexicon_v1 vs lexicon, leave-one-model-out (%)\n")
    print(_per_model_table(table))
    print("\n## What the targets lack\n")
    decisions = _decisions(published)
    print("\n".join(_shortfall(decisions)))
    print("\nThe fallback's incorrect answers by their relation to an expected term (all 22 groups):\n")
    print("\n".join(_similarity_rules(decisions)))
    if args.quick:
        return
    print("\n## Ablation (leave-one-model-out, %)\n")
    print("\n".join(_ablation(published)))
    print("\n## Nested choice of min_models (%)\n")
    print("\n".join(_nested_min_models(published)))
    lomo = lexicon_labels_of_published(published, lexicon, lx.CURRENT)["leave_one_model_out"]
    print("\n## Bounds from each group's own labels (in-sample, %)\n")
    print("\n".join(_bounds(published, lomo)))
    print("\n## CPU seconds (one process, side by side)\n")
    print("\n".join(_cpu_seconds(published)))


if __name__ == "__main__":
    main()
