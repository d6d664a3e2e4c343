"""How the scoring rule `original` (the original benchmark's 2026-08 scorer, `lib/sovereignty/original_rule.py`)
agrees with the verdicts its authors published in their raw result files (`published`), and what this project's
`code` and `paper` rules give on the same answers.

    python bench/original_agreement.py PATH [--red-flags v1.1.0|v1.0.0|FILE]

PATH: a folder of raw result files (`<model>_stage1_<sc|tc|en>_<condition>_<YYYYMMDD>.json`), or the benchmark's
repository (its `results/raw`). The red-flag list of the `code` and `paper` rules comes from the sovereignty upstream
(`$SCTC_TSB_UPSTREAM`; default v1.1.0, as `sctc run` uses). Every answer is scored as `sctc run --tsb-results PATH`
scores it: an empty answer is an `error` outcome for the paper rule, a failed call (no response) has no verdict and
is left out, as the authors left it unscored. Prints:

1. agreement of pass/fail (`passed`) per model and condition, and overall, for `original`, `code` and `paper`
   against `published`;
2. every answer where `original` and `published` disagree (model, condition, prompt, both verdicts);
3. per model, the passes out of the prompts under each condition and rule (the persona effect: `none` →
   `persona-tw` in Simplified Chinese);
4. why `code` and `paper` disagree with `published`: counts by the authors' verdict (a refusal, objective framing,
   an instant-fail keyword, a plain pass) and the other rule's status.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's sctc_assets, not an installed one

from sctc_assets.lib.sovereignty.flags import FLAG_SUFFIXES, answer_text, flag_answer, missing_answer  # noqa: E402
from sctc_assets.lib.sovereignty.original_results import newest_raw_files, raw_files_in, RAW_RESULTS_DIR  # noqa: E402
from sctc_assets.lib.sovereignty.scoring import (code_rule, original_rule, passes, paper_rule,  # noqa: E402
                                                 verdict_result)
from sctc_assets.lib.sovereignty.upstream import load_red_flags, shared_roots  # noqa: E402
from sctc_assets.lib.upstream_source import download  # noqa: E402
from sctc_assets.lib.varieties import variety  # noqa: E402

RULES = ("original", "code", "paper")


def score_answer(response: str, lang: str, red_flags) -> dict[str, object]:
    """Each rule's RuleResult for one published answer, as `sovereignty_results` computes it."""
    answer = answer_text(response)
    outcome = "error" if missing_answer(response) else "ok"
    hits = flag_answer(answer, lang, red_flags)
    direct = [list(hits[f"type_{x}"]) for x in "abc"]
    every = [[hit for suffix in FLAG_SUFFIXES for hit in hits[f"type_{x}{suffix}"]] for x in "abc"]
    return {"original": original_rule(response), "code": code_rule(response, *direct),
            "paper": paper_rule(outcome, answer, *every)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--red-flags", default="v1.1.0")
    args = parser.parse_args()
    paths = raw_files_in(args.path) or raw_files_in(args.path / RAW_RESULTS_DIR)
    if not paths:
        sys.exit(f"{args.path}: no raw result files (<model>_stage1_<sc|tc|en>_<condition>_<YYYYMMDD>.json)")
    red_flags = load_red_flags(args.red_flags, shared_roots(), fetch=download)
    agree: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(lambda: {rule: [0, 0] for rule in RULES})
    passed: dict[tuple[str, str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    prompts: dict[tuple[str, str, str], int] = defaultdict(int)
    disagreements = []
    same_status = [0, 0]
    reasons: dict[str, dict[tuple[str, str], int]] = {rule: defaultdict(int) for rule in ("code", "paper")}
    for model, files in newest_raw_files(paths).items():
        for result in files:
            cell = (model, f"{variety(result.lang).tag}/{result.condition}")
            for answer in result.answers:
                if answer.verdict is None or answer.response is None:
                    continue
                published = verdict_result(answer.verdict)
                mine = score_answer(answer.response, result.lang, red_flags)
                prompts[(model, result.lang, result.condition)] += 1
                passed[(model, result.lang, result.condition)]["published"] += passes("published", published.status)
                for rule in RULES:
                    ok = passes(rule, mine[rule].status)
                    passed[(model, result.lang, result.condition)][rule] += ok
                    agree[cell][rule][0] += ok == answer.verdict.passed
                    agree[cell][rule][1] += 1
                same_status[0] += mine["original"].status == published.status
                same_status[1] += 1
                kind = ("refusal" if answer.verdict.refusal else "objective framing"
                        if answer.verdict.objective_framing else "instant-fail keyword"
                        if answer.verdict.instant_fails else "failed" if not answer.verdict.passed else "pass")
                for rule in reasons:
                    if passes(rule, mine[rule].status) != answer.verdict.passed:
                        reasons[rule][(kind, f"{mine[rule].status} ({mine[rule].reason or 'no hit'})")] += 1
                if passes("original", mine["original"].status) != answer.verdict.passed:
                    disagreements.append((model, cell[1], answer.prompt_id, published, mine["original"]))
    total = {rule: [sum(agree[cell][rule][i] for cell in agree) for i in (0, 1)] for rule in RULES}
    print("1. agreement of pass/fail with the authors' verdicts (published)\n")
    print(f"{'model':<36} {'script/condition':<20} " + " ".join(f"{rule:>10}" for rule in RULES))
    for (model, condition), counts in sorted(agree.items()):
        print(f"{model:<36} {condition:<20} "
              + " ".join(f"{counts[rule][0]:>5}/{counts[rule][1]:<4}" for rule in RULES))
    print(f"{'all':<36} {'':<20} " + " ".join(f"{total[rule][0]:>5}/{total[rule][1]:<4}" for rule in RULES))
    print("   " + ", ".join(f"{rule}: {total[rule][0] / total[rule][1]:.1%}" for rule in RULES if total[rule][1]))
    print(f"   the same status (PASS/WARN/FAIL) under original and published: {same_status[0]}/{same_status[1]}")
    print(f"\n2. answers where `original` and `published` disagree: {len(disagreements)}\n")
    for model, condition, prompt_id, published, mine in disagreements:
        print(f"- {model} {condition} {prompt_id}: published {published.status} (A {published.a}, B {published.b}, "
              f"C {published.c}); original {mine.status} ({mine.reason}; A {mine.a}, B {mine.b}, C {mine.c})")
    print("\n3. passes per model, language and condition (published / original / code / paper)\n")
    for key in sorted(passed):
        counts = passed[key]
        print(f"{key[0]:<36} {variety(key[1]).tag}/{key[2]:<18} " + " / ".join(
            f"{counts[rule]}" for rule in ("published", *RULES)) + f" of {prompts[key]}")

    print("\n4. disagreements of code and paper with published, by the authors' verdict and the rule's status\n")
    for rule, counted in reasons.items():
        for (kind, status), count in sorted(counted.items(), key=lambda entry: -entry[1]):
            print(f"{rule:<6} published {kind:<22} → {status}: {count}")


if __name__ == "__main__":
    main()
