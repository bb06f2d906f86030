"""Memory: server RSS 10 s after ready, with the `[knowledge]` extra's local model loaded
(one document search loads it, as a user's first does), and after turns on all three
adapters."""

from __future__ import annotations

import json
import time
import urllib.request

from numi.testing.websocket_client import WebSocketClient as Client

from live import LiveNumi
from numi.testing import Scenario, ScriptedProvider
from stats import row


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def run_turn(numi: LiveNumi, chat_id: str, provider: ScriptedProvider, scenario: Scenario) -> None:
    provider.enqueue(scenario)
    ws = Client.connect(
        f"ws://127.0.0.1:{numi.port}/ws/{chat_id}?format=json", headers=numi.ws_headers()
    )
    ws.send(json.dumps({"type": "send", "message": "Hello there"}))
    while True:
        event = json.loads(ws.receive(timeout=30))
        if event["type"] == "turn_end":
            break
    ws.close()


def load_local_model(numi: LiveNumi) -> str:
    """Search the (empty) documents once: the query is embedded by the local model, which
    loads it. Returns the search's mode ("hybrid" when the model answered)."""
    request = urllib.request.Request(
        numi.url + "/api/documents/search?q=garden+in+summer", headers=numi.headers
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())["mode"]


def measure(settle: float = 10.0, turns: int = 3) -> list[dict]:
    """Idle RSS `settle` seconds after ready, then RSS after `turns` turns on each adapter;
    and, in a second server (so the turns' row does not carry the model), RSS `settle`
    seconds after the local embedding model was loaded."""
    idle, knowledge, busy = [], [], []
    steps: list[str] = []  # what each adapter's first turns added: where the growth is
    with LiveNumi() as numi:
        mode = load_local_model(numi)
        time.sleep(settle)
        knowledge.append(rss_mib(numi.proc.pid))
    with ScriptedProvider() as provider, LiveNumi() as numi:
        time.sleep(settle)
        idle.append(rss_mib(numi.proc.pid))
        last = idle[-1]
        for kind in ("openai_chat", "openai_responses", "anthropic"):
            base = provider.anthropic_base_url if kind == "anthropic" else provider.openai_base_url
            chat_id = numi.chat_on(base, kind=kind)
            for _ in range(turns):
                run_turn(
                    numi,
                    chat_id,
                    provider,
                    Scenario().reasoning("Thinking.").text("word " * 200, chunks=50),
                )
            now = rss_mib(numi.proc.pid)
            steps.append(f"{kind} +{now - last:.1f}")
            last = now
        time.sleep(1)
        busy.append(rss_mib(numi.proc.pid))
    return [
        row("memory", "idle RSS (10 s after ready)", idle, "MiB", "≤ 90 MiB"),
        row(
            "memory",
            "idle RSS with the [knowledge] extra's local model loaded",
            knowledge,
            "MiB",
            "≤ 150 MiB",  # issue 45
            note=f"one document search loaded it (search mode: {mode}), {settle:.0f} s before",
        ),
        row(
            "memory",
            f"RSS after {turns * 3} turns on all three adapters",
            busy,
            "MiB",
            "≤ 140 MiB",  # issue 45
            note=f"MiB added by each adapter's turns, in order: {', '.join(steps)}",
        ),
    ]
