"""Prompt caching on Anthropic (issue 41): a 20-turn chat on the scripted Anthropic
endpoint, which plays Anthropic's cache accounting (numi/testing/prompt_cache.py), and the
share of each turn's input tokens read from the cache. Target: at least 80 % from turn 3.

A live `numi serve` on a fresh data directory; the chat has a system prompt of about 1,500
tokens and every turn a question of about 60 tokens and an answer of about 250. The same
chat is run on an endpoint with prompt caching turned off: its share (0 %) is the floor.

    python bench/prompt_cache.py [--turns 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from live import LiveNumi  # noqa: E402
from turns import JsonSocket  # noqa: E402

from numi.testing import Scenario, ScriptedProvider  # noqa: E402

SYSTEM = " ".join(f"Rule {n}: answer briefly, cite the source, and keep units." for n in range(150))


def history(numi: LiveNumi, chat_id: str) -> list[dict]:
    request = urllib.request.Request(
        f"{numi.url}/api/history/{chat_id}?limit=1000", headers=numi.headers
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["messages"]


def run_chat(numi: LiveNumi, provider: ScriptedProvider, caching: bool, turns: int) -> list[float]:
    endpoint = numi.post(
        "/api/endpoints",
        {
            "name": f"bench-anthropic-{caching}",
            "kind": "anthropic",
            "base_url": provider.anthropic_base_url,
            "api_key": "bench",
            "default_model": "claude-bench",
        },
    )["id"]
    request = urllib.request.Request(
        f"{numi.url}/api/endpoints/{endpoint}",
        data=json.dumps({"prompt_caching": caching}).encode(),
        headers={"Content-Type": "application/json", **numi.headers},
        method="PATCH",
    )
    urllib.request.urlopen(request, timeout=60).read()
    chat_id = numi.post(
        "/api/session",
        {"endpoint_id": endpoint, "model": "claude-bench", "settings": {"system_prompt": SYSTEM}},
    )["id"]
    shares = []
    socket = JsonSocket(numi, chat_id)
    for turn in range(1, turns + 1):
        answer = " ".join(f"Point {turn}.{n} holds for the second case as well." for n in range(30))
        provider.enqueue(Scenario().text(answer, chunks=8).usage(None, 250))
        socket.send(
            type="send",
            message=f"Question {turn}: " + "what follows from the rules above for this case? " * 6,
            request_id=f"{chat_id}-{turn}",
        )
        for _received, _event in socket.events():
            pass
        usage = history(numi, chat_id)[-1]["meta"]["usage"]
        shares.append(100 * (usage.get("cached_input_tokens") or 0) / usage["input_tokens"])
    socket.close()
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    with ScriptedProvider() as provider, LiveNumi() as numi:
        cached = run_chat(numi, provider, True, args.turns)
        floor = run_chat(numi, provider, False, args.turns)
    print("turn  cached share of input (caching on / off)")
    for turn, (on, off) in enumerate(zip(cached, floor, strict=True), 1):
        print(f"{turn:>4}  {on:5.1f} % / {off:5.1f} %")
    later = cached[2:]
    print(
        f"from turn 3: median {statistics.median(later):.1f} %, lowest {min(later):.1f} % "
        f"(floor, caching off: {statistics.median(floor[2:]):.1f} %; target >= 80 %)"
    )


if __name__ == "__main__":
    main()
