"""How fast a stop reaches the provider: from ProviderStream.close() to the scripted
server seeing the connection end, per wire protocol (the tests only check that it
happens; the time is measured here).

    python bench/cancel.py [--runs 10]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stats import row  # noqa: E402

from numi.providers import ChatRequest, RetryPolicy, TextDelta, get_adapter  # noqa: E402
from numi.testing import Scenario, ScriptedProvider  # noqa: E402

KINDS = ("openai_chat", "openai_responses", "anthropic")


def one_close(server: ScriptedProvider, kind: str) -> float:
    """Seconds from close() (another thread, the consumer blocked reading) to the disconnect."""
    url = server.anthropic_base_url if kind == "anthropic" else server.openai_base_url
    server.enqueue(Scenario().text("Start").stall())
    adapter = get_adapter(kind, url, "k", retry=RetryPolicy(max_retries=0))
    stream = adapter.stream(ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}]))
    seen = threading.Event()

    def consume() -> None:
        for event in stream:
            if isinstance(event, TextDelta):
                seen.set()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    seen.wait(10)
    request = server.last_request
    started = time.perf_counter()
    stream.close()
    request.disconnected.wait(10)
    took = time.perf_counter() - started
    consumer.join(10)
    adapter.close()
    server.release()
    server.reset()
    return took


def measure(runs: int = 10) -> list[dict]:
    rows = []
    with ScriptedProvider() as server:
        for kind in KINDS:
            one_close(server, kind)  # warm-up: the SDK import
            values = [one_close(server, kind) * 1000 for _ in range(runs)]
            rows.append(row("cancel", f"close → disconnect ({kind})", values, "ms", "≤ 1000 ms"))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    for result in measure(parser.parse_args().runs):
        print(result)
