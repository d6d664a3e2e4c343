"""Cost of the content-hash data versions (`sctc_assets.lib.content_hash.table_hash`) against writing the same
table as Parquet in memory, measured side by side in one process, CPU seconds (best of `--repeat`).

Synthetic tables shaped like the largest hashed assets: prompts (text and ints, as `name_prompts`), candidate lists
(three list columns of 20 names, as `name_candidate_lists`) and answers (text, nullable ints, booleans, as
`term_responses`).

    python bench/content_hash.py --rows 150000 --repeat 3
"""

from __future__ import annotations

import argparse
import io
import random
import time

import pandas as pd

from sctc_assets.lib.content_hash import table_hash

NAMES = [chr(0x4E00 + i) + chr(0x4E00 + 7 * i % 20000) + chr(0x4E00 + 13 * i % 20000) for i in range(352)]


def _tables(rows: int) -> dict[str, pd.DataFrame]:
    rng = random.Random(0)
    prompts = pd.DataFrame({"experiment": "main", "list_id": [i // 180 for i in range(rows)],
                            "shuffle": [i % 180 for i in range(rows)],
                            "prompt": ["这里有20名员工的名字。" + "，".join(rng.sample(NAMES, 20)) for _ in range(rows)]})
    lists_rows = rows // 3
    candidates = [rng.sample(NAMES, 20) for _ in range(lists_rows)]
    lists = pd.DataFrame({"row": range(lists_rows), "candidates": candidates,
                          "mainland_names": [names[:10] for names in candidates],
                          "taiwan_names": [names[10:] for names in candidates]})
    answers = pd.DataFrame({"model": "m", "trial": range(rows),
                            "response": [None if i % 50 == 0 else rng.choice(NAMES) for i in range(rows)],
                            "input_tokens": pd.array([None if i % 50 == 0 else 30 + i % 7 for i in range(rows)],
                                                     dtype="Int64"),
                            "cached": [i % 2 == 0 for i in range(rows)]})
    return {"prompts": prompts, "candidate lists": lists, "answers": answers}


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=150_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for name, frame in _tables(args.rows).items():
        hashing = _best(lambda: table_hash(frame), args.repeat)
        writing = _best(lambda: frame.to_parquet(io.BytesIO(), index=False), args.repeat)
        print(f"{name:16s} {len(frame):>8,} rows: hash {hashing:.3f} s, Parquet write {writing:.3f} s CPU; "
              f"hash / write = {hashing / writing:.2f}")


if __name__ == "__main__":
    main()
