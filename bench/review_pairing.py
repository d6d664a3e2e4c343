"""Time and memory of the review pairing on synthetic exports of 50k, 100k and 200k reviews, side by side.

Each size runs in its own process (so peak memory is that run's): it generates a Booking-like export (hotels of
very different sizes, 80 % Taiwan reviewers, scores skewed to 8–10, 1–600 characters of Han text with some English
words and emoji), then times `review_varieties` (classification, token and character counts, script composition)
and `pair_reviews` + `unpaired_reviews` (the pairing and its report of unpaired reviews), and, for comparison, a
plain-Python pairing without the report (a dict of cells and a list per variety, the obvious way to write it). It
prints seconds, and peak memory measured in a second, traced run.

    python bench/review_pairing.py                 # 50k, 100k, 200k
    python bench/review_pairing.py --sizes 200000
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pandas as pd

HAN = "房間乾淨服務親切早餐豐富位置方便捷運車站櫃檯人員熱情床舒適浴室熱水隔音冷氣價格便宜推薦下次還會再來" \
      "房间干净服务热情早餐丰富位置方便地铁车站前台人员床舒适浴室热水隔音空调价格便宜推荐下次还会再来的了很是不"
WORDS = np.array([" nice ", " good location ", " CP值 ", "👍", "😡", "，", "。", "！"])


def synthetic_export(size: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    hotels = rng.zipf(1.6, size) % max(size // 20, 1)  # a few big hotels, many small ones
    lengths = np.clip(rng.lognormal(3.6, 0.9, size).astype(int), 1, 600)
    chars = np.array(list(HAN))[rng.integers(0, len(HAN), int(lengths.sum()))]
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    texts = ["".join(chars[bounds[i]:bounds[i + 1]]) for i in range(size)]
    extras = WORDS[rng.integers(0, len(WORDS), size)]
    texts = [text + extra if flag else text for text, extra, flag in zip(texts, extras, rng.random(size) < 0.3)]
    return pd.DataFrame({
        "review_id": [f"r{i}" for i in range(size)], "hotel_id": [f"h{h}" for h in hotels],
        "nationality": np.where(rng.random(size) < 0.8, "tw", "cn"),
        "score": rng.choice(np.arange(1, 11), size, p=[.02, .02, .03, .03, .05, .07, .1, .18, .2, .3]),
        "title": "", "positive": texts, "negative": "", "review_time": None,
    })


def plain_python_pairing(reviews: pd.DataFrame, seed: int = 0, max_tokens: int = 500) -> int:
    cells: dict[tuple, dict[str, list[str]]] = {}
    for review_id, hotel, variety, score, tokens in reviews[["review_id", "hotel_id", "variety", "score",
                                                              "tokens"]].itertuples(index=False):
        if tokens > max_tokens:
            continue
        rating = 0 if score <= 3 else 1 if score <= 7 else 2
        cells.setdefault((hotel, rating, (tokens - 1) // 10), {"tw": [], "cn": []})[variety].append(review_id)
    chooser = random.Random(seed)
    pairs = []
    for sides in cells.values():
        for side in sides.values():
            chooser.shuffle(side)
        pairs += list(zip(sides["tw"], sides["cn"]))
    return len(pairs)


def _timed(work) -> tuple[object, float]:
    started = time.perf_counter()
    result = work()
    return result, time.perf_counter() - started


def _peak_mib(work) -> float:
    """Peak traced allocation of `work` in MiB, measured in a second run (tracing slows the first one down)."""
    tracemalloc.start()
    work()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def measure(size: int) -> dict:
    from sctc_assets.lib.reviews.pairing import pair_reviews, unpaired_reviews
    from sctc_assets.lib.reviews.varieties import review_varieties

    raw = synthetic_export(size)
    varieties, varieties_s = _timed(lambda: review_varieties(raw))

    def pairing() -> tuple[pd.DataFrame, pd.DataFrame]:
        pairs = pair_reviews(varieties, seed=0)
        return pairs, unpaired_reviews(raw, varieties, pairs)

    (pairs, unpaired), pairing_s = _timed(pairing)
    plain_pairs, plain_s = _timed(lambda: plain_python_pairing(varieties))
    assert plain_pairs == len(pairs), (plain_pairs, len(pairs))  # both are maximal
    return {"reviews": size, "pairs": len(pairs), "unpaired": len(unpaired), "varieties_s": varieties_s,
            "pairing_s": pairing_s, "pairing_peak_mib": _peak_mib(pairing), "plain_python_s": plain_s,
            "plain_python_peak_mib": _peak_mib(lambda: plain_python_pairing(varieties)),
            "process_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50_000, 100_000, 200_000])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return
    rows = []
    for size in args.sizes:
        output = subprocess.run([sys.executable, __file__, "--one", str(size)], capture_output=True, text=True,
                                check=True).stdout
        rows.append(json.loads(output.strip().splitlines()[-1]))
    from tabulate import tabulate

    print(tabulate([{"reviews": r["reviews"], "pairs": r["pairs"], "unpaired": r["unpaired"],
                     "varieties s": f"{r['varieties_s']:.1f}", "pairing s": f"{r['pairing_s']:.2f}",
                     "pairing peak MiB": f"{r['pairing_peak_mib']:.0f}",
                     "plain Python pairing s": f"{r['plain_python_s']:.2f}",
                     "plain Python peak MiB": f"{r['plain_python_peak_mib']:.0f}",
                     "process peak RSS MiB": f"{r['process_peak_rss_mib']:.0f}"} for r in rows],
                   headers="keys", tablefmt="github"))
    print("varieties = classification, token/character counts and script composition; pairing = pair_reviews + "
          "unpaired_reviews; peaks from tracemalloc (numpy buffers included), RSS for the whole process")


if __name__ == "__main__":
    main()
