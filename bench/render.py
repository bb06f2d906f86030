"""Streaming render cost: server CPU per token of one long markdown answer watched in the
HTML view (markdown blocks rendered as they complete) against the JSON view (no render).

    python bench/render.py [--tokens 20000] [--runs 3]

The same paced stream runs once per view with one WebSocket client; the server's CPU time
(user + system, from /proc) over the turn is divided by the tokens. Everything but the
view (the SDK reading the stream, the agent, coalescing, saving) is common to both.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from numi.testing.websocket_client import WebSocketClient as Client  # noqa: E402

from live import LiveNumi  # noqa: E402
from numi.testing import Scenario, ScriptedProvider  # noqa: E402
from load import cpu_seconds  # noqa: E402


def markdown_answer(tokens: int) -> list[str]:
    """A realistic answer as `tokens` chunks of about four characters: paragraphs, lists,
    code, tables and math, repeated."""
    section = (
        "## A section\n\nThis paragraph explains a point with **bold words**, `inline code`, a link to "
        "https://example.org/docs and math $x^2 + y^2 = z^2$. It goes on for a while so that it wraps "
        "over several lines, as answers do.\n\n- first point with a few words\n- second point, a little "
        "longer than the first one\n- third point\n\n```python\ndef area(r):\n    return 3.14159 * r * r\n```\n\n"
        "| name | value |\n|:--|--:|\n| alpha | 1.5 |\n| beta | 20 |\n\n$$\n\\frac{a}{b} = c\n$$\n\n"
    )
    text = section * (tokens * 4 // len(section) + 1)
    return [text[i * 4 : (i + 1) * 4] for i in range(tokens)]


def one_turn(
    numi: LiveNumi, provider: ScriptedProvider, chunks: list[str], html: bool, rate: float
) -> float:
    """Server CPU seconds per token for one turn watched by one client."""
    chat_id = numi.chat_on(provider.openai_base_url)
    scenario = Scenario().tokens_per_second(rate)
    for chunk in chunks:
        scenario.text(chunk)
    provider.enqueue(scenario)
    suffix = "" if html else "?format=json"
    ws = Client.connect(
        f"ws://127.0.0.1:{numi.port}/ws/{chat_id}{suffix}", headers=numi.ws_headers()
    )
    if html:
        ws.send(json.dumps({"type": "resume", "last_event_id": None, "last_message_id": 0}))
    time.sleep(0.5)  # the subscription settles before the clock starts
    cpu_before = cpu_seconds(numi.proc.pid)
    ws.send(json.dumps({"type": "send", "message": "go"}))
    while True:
        raw = ws.receive(timeout=120)
        if (html and 'data-running="0"' in raw) or (not html and '"turn_end"' in raw):
            break
    cpu = cpu_seconds(numi.proc.pid) - cpu_before
    ws.close()
    return cpu / len(chunks)


def measure(tokens: int = 20000, runs: int = 3, rate: float = 2000) -> list[dict]:
    """Rows for bench/run.py: CPU per token in each view and their ratio (target ≤ 1.5)."""
    from stats import row

    chunks = markdown_answer(tokens)
    per_view: dict[bool, list[float]] = {False: [], True: []}
    ratios = []
    with ScriptedProvider() as provider, LiveNumi() as numi:
        one_turn(
            numi, provider, chunks[:200], html=True, rate=rate * 10
        )  # warm up: imports, templates
        for _ in range(runs):
            results = {html: one_turn(numi, provider, chunks, html, rate) for html in (False, True)}
            for html, value in results.items():
                per_view[html].append(value * 1e6)
            ratios.append(results[True] / results[False])
    label = f"{tokens:,} markdown tokens at {rate:,.0f} tokens/s"
    return [
        row("render", f"server CPU per token, JSON view, {label}", per_view[False], "µs"),
        row("render", f"server CPU per token, HTML view, {label}", per_view[True], "µs"),
        row("render", "HTML view CPU / JSON view CPU (same run)", ratios, "", "≤ 1.5"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=float, default=2000)
    args = parser.parse_args()
    for r in measure(args.tokens, args.runs, args.rate):
        print(
            f"{r['metric']}: median {r['median']:.2f} {r['unit']} (min {r['min']:.2f}, max "
            f"{r['max']:.2f}, {r['runs']} runs)"
        )


if __name__ == "__main__":
    main()
