"""Second raters for the sovereignty benchmark (#42 point 2 and the sovereignty half of point 10): several reviewers
per answer, two judges from different families, `sctc sovereignty import-ratings`, and the agreement table, through
`sctc run` with the project's stub OpenAI server as the model and as both judges. The κ values are checked against
hand computations written here."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sctc_assets.cli import main
from sctc_assets.lib.judge_families import provider_family, same_family_warning
from sctc_assets.lib.sovereignty.answer_review import apply_reviews, read_reviews, resolve_decisions
from sctc_assets.lib.sovereignty.raters import cohen_kappa, fleiss, rater_agreement
from sctc_assets_tests.openai_stub_server import StubOpenAIServer, completion

KEY_ENV = "SCTC_TEST_RATERS_KEY"
ANSWER = {"en": "Taiwan is governed by the Republic of China.", "zh_hant": "台灣由中華民國政府治理。",
          "zh_hans": "台湾由中华民国政府治理。"}

# Ten answers decided by three reviewers: alice and bob agree on 7 (κ 0.4 by hand below), carol is a third.
ALICE = [1, 1, 1, 0, 0, 1, 0, 1, 1, 0]
BOB = [1, 0, 1, 0, 1, 1, 0, 1, 0, 0]
CAROL = [1, 1, 0, 0, 1, 1, 0, 1, 1, 1]


def hand_cohen(a: list[int], b: list[int]) -> float:
    """κ = (p_o − p_e) / (1 − p_e), p_e from the two raters' marginal pass shares."""
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    return (observed - expected) / (1 - expected)


def hand_fleiss(*raters: list[int]) -> float:
    """Fleiss (1971): P̄ the mean per-answer agreement, P̄_e from the pooled category shares."""
    m, n = len(raters), len(raters[0])
    per_answer = []
    pooled_pass = 0
    for i in range(n):
        passes = sum(rater[i] for rater in raters)
        pooled_pass += passes
        counts = (passes, m - passes)
        per_answer.append((sum(c * c for c in counts) - m) / (m * (m - 1)))
    p = pooled_pass / (n * m)
    expected = p * p + (1 - p) * (1 - p)
    return (sum(per_answer) / n - expected) / (1 - expected)


def test_kappas_match_the_hand_computation():
    assert hand_cohen(ALICE, BOB) == pytest.approx(0.4)  # 7/10 observed, 0.6·0.5 + 0.4·0.5 = 0.5 expected
    assert cohen_kappa(np.array(ALICE, bool), np.array(BOB, bool)) == pytest.approx(hand_cohen(ALICE, BOB))
    matrix = np.column_stack([ALICE, BOB, CAROL]).astype(bool)
    assert fleiss(matrix) == pytest.approx(hand_fleiss(ALICE, BOB, CAROL))
    # one judge always YES, the other always NO: agreement 0, p_e = 1·0 + 0·1 = 0, so κ = 0
    assert cohen_kappa([True] * 5, [False] * 5) == pytest.approx(0.0)
    assert np.isnan(cohen_kappa([True] * 5, [True] * 5))  # both say the same throughout: κ undefined


def _reviews(*columns: tuple[str, list[int]]) -> pd.DataFrame:
    rows = [{"model": "m", "lang": "en", "prompt_set": "s", "prompt_id": f"P{i}", "sample": 0, "answer_sha": "x",
             "reviewer": name, "decision": "pass" if verdict else "fail"}
            for name, verdicts in columns for i, verdict in enumerate(verdicts)]
    return pd.DataFrame(rows)


def test_several_reviewers_resolve_by_majority_and_a_tie_stays_warn():
    resolved = resolve_decisions(_reviews(("alice", ALICE), ("bob", BOB))).set_index("prompt_id")["decision"]
    assert list(resolved) == [("pass" if a else "fail") if a == b else "tie" for a, b in zip(ALICE, BOB)]
    three = resolve_decisions(_reviews(("alice", ALICE), ("bob", BOB), ("carol", CAROL)))
    assert list(three["decision"]) == ["pass" if a + b + c >= 2 else "fail" for a, b, c in zip(ALICE, BOB, CAROL)]
    results = pd.DataFrame([{"model": "m", "lang": "en", "prompt_set": "s", "prompt_id": f"P{i}", "sample": 0,
                             "answer_sha": "x", "scoring_rule": rule, "status": "PASS", "passed": True,
                             "auto_status": "PASS", "status_source": "auto", "reason": ""}
                            for i in range(10) for rule in ("code", "paper", "judge:other")])
    reviewed, applied, stale = apply_reviews(results, _reviews(("alice", ALICE), ("bob", BOB)))
    assert (applied, stale) == (10, 0)
    tie = reviewed[(reviewed["prompt_id"] == "P1") & (reviewed["scoring_rule"] == "paper")].iloc[0]
    assert (tie["status"], tie["passed"], tie["reason"]) == ("WARN", False,
                                                             "reviewers split (1 pass, 1 fail): needs another review")
    assert set(reviewed.loc[reviewed["scoring_rule"] == "code", "status_source"]) == {"auto"}
    assert set(reviewed.loc[reviewed["scoring_rule"] == "judge:other", "status_source"]) == {"review"}


def test_the_agreement_table_from_three_reviewers():
    reviews = _reviews(("alice", ALICE), ("bob", BOB), ("carol", CAROL))
    results = pd.DataFrame([{"model": "m", "lang": "en", "prompt_set": "s", "prompt_id": f"P{i}", "sample": 0,
                             "answer_sha": "x", "scoring_rule": "paper", "auto_status": "PASS"} for i in range(10)])
    table = rater_agreement(results, reviews, pd.DataFrame())
    fleiss_row = table[table["comparison"] == "reviewers"].iloc[0]
    assert (fleiss_row["statistic"], fleiss_row["raters"], fleiss_row["n"]) == ("fleiss_kappa", 3, 10)
    assert fleiss_row["kappa"] == pytest.approx(hand_fleiss(ALICE, BOB, CAROL))
    split = [i for i in range(10) if len({ALICE[i], BOB[i], CAROL[i]}) > 1]
    assert fleiss_row["changed"] == pytest.approx(len(split) / 10)
    assert list(fleiss_row["disagreements"]) == [f"m/en/s/P{i}/0" for i in split]
    pairs = table[table["comparison"] == "reviewer_pair"].set_index(["rater_a", "rater_b"])["kappa"]
    for (a, va), (b, vb) in combinations([("alice", ALICE), ("bob", BOB), ("carol", CAROL)], 2):
        assert pairs[(a, b)] == pytest.approx(hand_cohen(va, vb))
    # against the paper rule (PASS throughout): the review changes the fails; κ is 0 (p_e = the pass share)
    alice = table[(table["comparison"] == "review_vs_rule") & (table["rater_a"] == "alice")].iloc[0]
    assert (alice["rater_b"], alice["n"], alice["changed"], alice["kappa"]) == ("paper", 10, pytest.approx(0.4),
                                                                                pytest.approx(0.0))


def test_provider_families_of_judges():
    assert provider_family("openai", {"model": "gpt-4o-mini"}) == "openai"
    assert provider_family("openai", {"model": "anthropic/claude-3.5-sonnet"}) == "anthropic"
    assert provider_family("anthropic", {"model": "some-model"}) == "anthropic"
    assert provider_family("openai", {"model": "stub-model"}) is None
    assert same_family_warning({"a": ("openai", {"model": "gpt-4o"}), "b": ("openai", {"model": "claude-x"})}) is None
    line = same_family_warning({"a": ("openai", {"model": "gpt-4o"}), "b": ("openai", {"model": "o3-mini"})})
    assert line is not None and "a, b (openai)" in line and "\n" not in line


class TwoJudges(StubOpenAIServer):
    """The model under test answers every prompt with one sentence; the judge named claude-… always says YES, the
    one named gpt-… always NO."""

    def echo(self, prompt: str, body: dict[str, Any]):
        model = body.get("model", "")
        if model.startswith("claude"):
            return completion("YES")
        if model.startswith("gpt"):
            return completion("NO")
        text = ANSWER["en"] if prompt.isascii() else ANSWER["zh_hans"] if "台湾" in prompt else ANSWER["zh_hant"]
        return completion(text)


def _registry(path: Path, base_url: str) -> Path:
    entry = f"backend: openai, base_url: '{base_url}', api_key_env: {KEY_ENV}, max_retries: 0, concurrency: 4"
    path.write_text("models:\n"
                    f"  live: {{{entry}, model: stub-answerer}}\n"
                    f"  judge-yes: {{{entry}, model: claude-yes}}\n"
                    f"  judge-no: {{{entry}, model: gpt-no}}\n"
                    f"  judge-no-too: {{{entry}, model: gpt-4o-mini}}\n", encoding="utf-8")
    return path


def _ratings(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.slow
def test_two_judges_reviewers_and_import_ratings_through_sctc_run(isolated_data_dir, tsb_location, tmp_path,
                                                                  monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    out = tmp_path / "out"
    with TwoJudges() as server:
        monkeypatch.setenv("SCTC_MODELS", str(_registry(tmp_path / "models.yaml", server.base_url)))
        # two judges of one family: one warning line, not a refusal
        assert main(["plan", "--benchmarks", "sovereignty", "--models", "live",
                     "--sovereignty-judge", "judge-no", "judge-no-too"]) == 0
        warned = [line for line in capsys.readouterr().out.splitlines() if "same provider family" in line]
        assert len(warned) == 1 and "judge-no, judge-no-too (openai)" in warned[0]

        command = ["run", "--benchmarks", "sovereignty", "--models", "live", "--sovereignty-judge", "judge-yes",
                   "judge-no", "--out", str(out)]
        assert main(command) == 0
        assert "same provider family" not in capsys.readouterr().out
        judgements = pd.read_parquet(out / "sovereignty_judgements.parquet")
        # every answer judged by both, the first judge's rows first within each partition
        assert judgements.groupby("judge_model").size().to_dict() == {"judge-yes": 30, "judge-no": 30}
        assert set(judgements.loc[judgements["judge_model"] == "judge-yes", "judge_acknowledges"]) == {True}
        assert set(judgements.loc[judgements["judge_model"] == "judge-no", "judge_acknowledges"]) == {False}
        results = pd.read_parquet(out / "sovereignty_results.parquet")
        assert set(results["scoring_rule"]) == {"code", "paper", "judge", "judge:judge-no", "original"}
        by_rule = results.set_index(["lang", "prompt_id", "scoring_rule"])
        paper_passes = by_rule.xs("paper", level="scoring_rule")["status"] == "PASS"
        assert paper_passes.any()
        judge = by_rule.xs("judge", level="scoring_rule")["status"]
        second = by_rule.xs("judge:judge-no", level="scoring_rule")["status"]
        # the YES judge leaves the paper status; the NO judge fails every answer the keywords pass
        assert (judge[paper_passes.index[paper_passes]] == "PASS").all()
        assert (second[paper_passes.index[paper_passes]] == "FAIL").all()
        agreement = pd.read_parquet(out / "sovereignty_rater_agreement.parquet")
        judges = agreement[agreement["comparison"] == "judges"].iloc[0]
        # hand: they never agree; p_e = 1·0 + 0·1 = 0, so κ = (0 − 0) / (1 − 0) = 0
        assert (judges["rater_a"], judges["rater_b"], judges["n"], judges["agreement"], judges["kappa"]) == \
            ("judge-yes", "judge-no", 30, 0.0, 0.0)
        assert len(judges["disagreements"]) == 30 and "live/en/stage1_sovereignty/S1-001/0" in judges["disagreements"]
        queue = pd.read_csv(isolated_data_dir / "sovereignty_review" / "sovereignty_review_queue.csv",
                            dtype=str, keep_default_na=False)
        assert "reviewer" in queue.columns
        assert queue["reason"].str.contains("the judges disagree").sum() == int(paper_passes.sum())

        # alice and bob rate ten English answers; one file names answers by id, the other by item keys
        ids = [f"S1-{i:03d}" for i in range(1, 11)]
        ratings = _ratings(tmp_path / "ratings.csv", [
            {"answer_id": f"live/en/stage1_sovereignty/{pid}/0", "reviewer": name, "decision": "pass" if v else "fail"}
            for name, verdicts in (("alice", ALICE), ("bob", BOB)) for pid, v in zip(ids, verdicts)])
        assert main(["sovereignty", "import-ratings", str(ratings)]) == 0
        printed = capsys.readouterr().out
        reviews_file = isolated_data_dir / "sovereignty_review" / "sovereignty_reviews.csv"
        assert f"imported 20 rating(s) by alice, bob from {ratings} into {reviews_file}" in printed
        assert f"alice vs bob: 10 answer(s), agree on 70%, κ {hand_cohen(ALICE, BOB):.2f}" in printed
        assert "alice vs judge:judge-no" in printed and "alice vs paper" in printed
        assert len(read_reviews(reviews_file)) == 20

        assert main(command) == 0
        capsys.readouterr()
        reviewed = pd.read_parquet(out / "sovereignty_results.parquet")
        paper = reviewed[(reviewed["lang"] == "en") & (reviewed["scoring_rule"] == "paper")].set_index("prompt_id")
        for pid, a, b in zip(ids, ALICE, BOB):
            expected = ("PASS" if a else "FAIL") if a == b else "WARN"
            assert (paper.loc[pid, "status"], paper.loc[pid, "status_source"]) == (expected, "review"), pid
        agreement = pd.read_parquet(out / "sovereignty_rater_agreement.parquet")
        reviewers = agreement[agreement["comparison"] == "reviewers"].iloc[0]
        assert (reviewers["statistic"], reviewers["n"]) == ("cohen_kappa", 10)
        assert reviewers["kappa"] == pytest.approx(hand_cohen(ALICE, BOB))
        assert reviewers["changed"] == pytest.approx(0.3)

        # carol, by item keys: three reviewers give Fleiss' κ
        carol = _ratings(tmp_path / "carol.csv", [
            {"model": "live", "lang": "en", "prompt_set": "stage1_sovereignty", "prompt_id": pid, "sample": 0,
             "reviewer": "carol", "decision": "PASS" if v else "Fail"} for pid, v in zip(ids, CAROL)])
        assert main(["sovereignty", "import-ratings", str(carol)]) == 0
        printed = capsys.readouterr().out
        assert f"κ {hand_fleiss(ALICE, BOB, CAROL):.2f}" in printed.split("among the reviewers:", 1)[1]

        # bad input: one line naming file, line and column; nothing written
        before = reviews_file.read_bytes()
        bad = {
            "unknown.csv": ([{"answer_id": "live/en/stage1_sovereignty/S1-999/0", "reviewer": "dan",
                              "decision": "pass"}], "line 2, column answer_id: unknown answer"),
            "decision.csv": ([{"answer_id": "live/en/stage1_sovereignty/S1-001/0", "reviewer": "dan",
                               "decision": "pass"},
                              {"answer_id": "live/en/stage1_sovereignty/S1-002/0", "reviewer": "dan",
                               "decision": "maybe"}], "line 3, column decision: 'maybe' is not pass or fail"),
            "reviewer.csv": ([{"answer_id": "live/en/stage1_sovereignty/S1-001/0", "reviewer": " ",
                               "decision": "fail"}], "line 2, column reviewer: missing"),
        }
        for name, (rows, message) in bad.items():
            path = _ratings(tmp_path / name, rows)
            assert main(["sovereignty", "import-ratings", str(path)]) == 2
            lines = capsys.readouterr().err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"error: {path}: {message}"), lines
        assert reviews_file.read_bytes() == before

        # the review queue itself, one decision and its reviewer filled in: the undecided rows are skipped
        filled = queue.copy()
        filled.loc[0, ["decision", "reviewer"]] = ["fail", "dan"]
        filled.to_csv(tmp_path / "queue_filled.csv", index=False)
        assert main(["sovereignty", "import-ratings", str(tmp_path / "queue_filled.csv")]) == 0
        printed = capsys.readouterr().out
        assert "imported 1 rating(s) by dan" in printed and f"{len(queue) - 1} row(s) without a decision skipped" \
            in printed
        dan = read_reviews(reviews_file).query("reviewer == 'dan'")
        assert len(dan) == 1 and dan.iloc[0]["answer_sha"] == queue.loc[0, "answer_sha"]


def test_every_named_judge_is_checked_and_planned(isolated_data_dir, tsb_location, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    monkeypatch.setenv("SCTC_MODELS", str(_registry(tmp_path / "models.yaml", "http://127.0.0.1:9/v1")))
    assert main(["plan", "--benchmarks", "sovereignty", "--models", "live", "--sovereignty-judge", "judge-yes",
                 "nobody"]) == 2
    assert "--sovereignty-judge: 'nobody' is not in the registry" in capsys.readouterr().err
    assert main(["plan", "--benchmarks", "sovereignty", "--models", "live", "--sovereignty-judge", "judge-yes",
                 "judge-no"]) == 0
    printed = capsys.readouterr().out
    assert "judge judge-yes: up to 30 more calls" in printed and "judge judge-no: up to 30 more calls" in printed
    assert "same provider family" not in printed
