"""`sctc sovereignty import-ratings FILE`: a person's pass/fail decisions on stored answers, checked row by row and
written into the reviews file the next run reads (beside the other reviewers' decisions there).

The ratings file (CSV, UTF-8) has a `reviewer` and a `decision` (`pass` or `fail`) on every row, and names the
answer either by its item keys (`model`, `lang`, `prompt_set`, `prompt_id`, `sample`, as the review queue has them)
or by one `answer_id` column (model/lang/prompt_set/prompt_id/sample[/condition], as `sovereignty_rater_agreement`
lists answers); without a condition (column or id part) an answer is the baseline `none`'s. An optional `answer_sha` must be the stored answer's (a decision made for another text is refused);
without it, the decision is for the answer stored now. A `note` column is kept. A row with an empty decision is
not a rating and is skipped, so a filled copy of the review queue (with its `reviewer` column filled) imports as it
is. A bad row stops the import with one line naming the file, the line (the header is line 1) and the column;
nothing is written then.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from sctc_assets.lib.atomic_files import replacing
from sctc_assets.lib.paths import data_dir
from sctc_assets.lib.sovereignty.answer_review import DECISIONS, REVIEW_KEYS, REVIEWER
from sctc_assets.lib.sovereignty.prompts import BASELINE_CONDITION, ITEM_KEYS, with_condition
from sctc_assets.lib.text_files import check_utf8
from sctc_assets.lib.upstream_source import UpstreamSchemaError

REVIEWS_ENV_VAR = "SCTC_TSB_REVIEWS"  # as `sovereignty_results` reads it
QUEUE_ENV_VAR = "SCTC_TSB_REVIEW_QUEUE"
ANSWER_ID = "answer_id"


class RatingsError(UpstreamSchemaError):
    """A ratings file that cannot be imported: one line naming the file, the line and the column."""


def reviews_file(configured: str | os.PathLike | None = None) -> Path:
    """The reviews file `sovereignty_results` reads: the option, else $SCTC_TSB_REVIEWS, else the data folder's."""
    return Path(configured or os.environ.get(REVIEWS_ENV_VAR)
                or data_dir() / "sovereignty_review" / "sovereignty_reviews.csv")


def queue_file(configured: str | os.PathLike | None = None) -> Path:
    return Path(configured or os.environ.get(QUEUE_ENV_VAR) or reviews_file().with_name("sovereignty_review_queue.csv"))


def read_ratings(path: Path, answers: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The ratings of `path` as reviews rows (item keys, `answer_sha`, `reviewer`, `decision`, `note`), each checked
    against `answers` (the stored answers: item keys and `answer_sha`), and the number of rows skipped as
    undecided."""
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except UnicodeDecodeError as exc:
        check_utf8(path, error=RatingsError)
        raise RatingsError(f"{path}: unreadable ratings file ({exc})") from exc
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise RatingsError(f"{path}: unreadable ratings file ({exc})") from exc
    by_id = ANSWER_ID in frame.columns
    if not by_id and "model" in frame.columns:  # item keys without a condition column: the baseline's answers
        frame = with_condition(frame)
    required = ([ANSWER_ID] if by_id else ITEM_KEYS) + [REVIEWER, "decision"]
    missing = [column for column in required if column not in frame.columns]
    if missing:
        raise RatingsError(f"{path}: missing column(s) {', '.join(missing)} (an answer is named by {ANSWER_ID} or by "
                           f"{', '.join(ITEM_KEYS)}; every row needs a reviewer and a decision)")
    stored = {tuple(str(value) for value in key): sha
              for key, sha in zip(answers[ITEM_KEYS].itertuples(index=False, name=None), answers["answer_sha"])}
    rows, skipped = [], 0
    for line, record in enumerate(frame.to_dict("records"), start=2):
        if not str(record["decision"]).strip():
            skipped += 1
            continue
        if by_id:
            key, column = tuple(part.strip() for part in record[ANSWER_ID].split("/")), ANSWER_ID
            if len(key) == len(ITEM_KEYS) - 1:  # no condition: the baseline's answer
                key += (BASELINE_CONDITION,)
            shown = record[ANSWER_ID]
        else:
            key, column = tuple(record[name].strip() for name in ITEM_KEYS), "prompt_id"
            shown = "/".join(key)
        if len(key) != len(ITEM_KEYS) or key not in stored:
            raise RatingsError(f"{path}: line {line}, column {column}: unknown answer {shown!r} (no stored "
                               f"sovereignty answer has it; ids are {'/'.join(ITEM_KEYS)})")
        sha = stored[key]
        given = str(record.get("answer_sha", "")).strip()
        if given and given != sha:
            raise RatingsError(f"{path}: line {line}, column answer_sha: {given!r} is not the stored answer's "
                               f"({sha}): the rating was made for another answer text")
        decision = str(record["decision"]).strip().lower()
        if decision not in DECISIONS:
            raise RatingsError(f"{path}: line {line}, column decision: {record['decision']!r} is not pass or fail")
        reviewer = str(record[REVIEWER]).strip()
        if not reviewer:
            raise RatingsError(f"{path}: line {line}, column reviewer: missing (every rating names its reviewer)")
        rows.append({**dict(zip(ITEM_KEYS, key)), "answer_sha": sha, REVIEWER: reviewer, "decision": decision,
                     "note": str(record.get("note", ""))})
    ratings = pd.DataFrame(rows, columns=REVIEW_KEYS + [REVIEWER, "decision", "note"])
    return ratings.astype({"sample": "int64"}), skipped


def write_reviews(ratings: pd.DataFrame, target: Path) -> tuple[int, int]:
    """`ratings` merged into the reviews file `target` (created if absent; a reviewer's new decision on an answer
    replaces their earlier one, other reviewers' stay). Returns (rows added, rows replaced)."""
    columns = REVIEW_KEYS + [REVIEWER, "decision", "note"]
    parquet = target.suffix.lower() == ".parquet"
    if target.is_file():
        existing = pd.read_parquet(target) if parquet else pd.read_csv(target, dtype=str, keep_default_na=False)
        existing = existing.fillna("").astype(str)
        if REVIEWER not in existing.columns:
            existing[REVIEWER] = ""
    else:
        existing = pd.DataFrame(columns=columns)
    new = ratings.astype(str)
    keys = REVIEW_KEYS + [REVIEWER]
    replaced = len(existing.merge(new[keys], on=keys)) if not existing.empty else 0
    merged = pd.concat([existing, new], ignore_index=True).fillna("")
    merged = merged.drop_duplicates(keys, keep="last")
    ordered = merged[[*columns, *[column for column in merged.columns if column not in columns]]]
    target.parent.mkdir(parents=True, exist_ok=True)
    with replacing(target) as staging:
        if parquet:
            ordered.to_parquet(staging, index=False)
        else:
            ordered.to_csv(staging, index=False)
    return len(new) - replaced, replaced
