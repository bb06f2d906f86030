"""The per-script token estimate on the hub (issue 35): what a cold estimate of a long
history costs, and whether other greenlets keep running meanwhile.

A history of mixed English, code, German and Japanese (about 400,000 characters in 200
messages, the size PROMPT_MAX_HISTORY_CHARS allows) is estimated cold, then again (cached),
against the old baseline of four characters a token in the same run. A ticker greenlet
sleeping 1 ms measures the hub's largest gap during the cold estimate.

    python bench/token_estimate.py [--runs 5]
"""

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from numi.chat import token_estimate  # noqa: E402
from numi.chat.context import estimate_tokens  # noqa: E402

PIECES = [
    "The answer is in the second paragraph of the report.",
    "def total(items):\n    return sum(item.price for item in items)",
    "Die Größenordnung der Änderung ist überraschend groß.",
    "日本語の文章を少し書きます。名前はまだ無い。",
]


def history(seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [
        {
            "role": "user" if n % 2 == 0 else "assistant",
            "content": " ".join(rng.choice(PIECES) for _ in range(40)) + f" ({seed}-{n})",
        }
        for n in range(200)
    ]


def largest_gap(work) -> tuple[float, float]:
    """(the work's wall time, the largest gap between a ticker's 1 ms ticks) in ms."""
    gaps, running = [], True

    def tick():
        last = time.perf_counter()
        while running:
            gevent.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = gevent.spawn(tick)
    gevent.sleep(0.01)
    started = time.perf_counter()
    work()
    wall = time.perf_counter() - started
    running = False
    ticker.join()
    return wall * 1000, max(gaps) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for run in range(args.runs):
        messages = history(run)
        chars = sum(len(m["content"]) for m in messages)
        base_wall, base_gap = largest_gap(
            lambda: sum(len(m["content"]) for m in messages) // 4 + 4 * len(messages)
        )
        cold_wall, cold_gap = largest_gap(lambda: estimate_tokens(messages))
        warm_wall, _ = largest_gap(lambda: estimate_tokens(messages))
        print(
            f"run {run + 1}: {chars:,} chars; cold estimate {cold_wall:.1f} ms (hub's largest "
            f"gap {cold_gap:.1f} ms; the 4-chars baseline's {base_gap:.1f} ms, ratio "
            f"{cold_gap / base_gap:.1f}); cached {warm_wall:.2f} ms"
        )
    print(f"off the hub above {token_estimate.OFF_HUB_CHARS:,} characters not yet estimated")


if __name__ == "__main__":
    main()
