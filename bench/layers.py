"""Sum a py-spy profile of the server (raw/collapsed stacks, e.g. from
`bench/load.py --profile FILE`) into the layers one delivered token crosses.

    python bench/layers.py FILE [TOKENS_IN_WINDOW]

Each sample goes to the first rule that matches its stack (innermost layer first), so the
shares add up to 100 % of the samples py-spy took while the process was on CPU.
"""

from __future__ import annotations

import sys
from collections import Counter

# (layer, any of these frame names in the stack). Checked in order; first match wins.
RULES = [
    (
        "start/end of turns (DB, history, request)",
        (
            "ChatContextService.",
            "Agent._save_step",
            "ContextWindow.messages",
            "chat_routes",
            "start_turn",
            "get_chat",
            "_identify",
            "SSEStream.open",
            "Connection.__init__",
            "Server.__init__",
            "Agent._answer_after",
            "Agent._schedule_title",
        ),
    ),
    ("frame write (WebSocket send)", ("Base.send",)),
    ("encode/render (JSON or HTML)", ("Connection._send_events", "HtmlView.")),
    ("queue (subscriber get/deliver)", ("Subscription.", "Queue.")),
    ("publish (channel, buffer, state)", ("ChatChannel.publish",)),
    ("socket read (provider recv, wait)", ("SocketMixin.recv", "SyncStream.read")),
    (
        "decode (httpx, h11, SSE, JSON, adapter)",
        ("ProviderStream.", "iter_json_events", "OpenAIChatAdapter._events"),
    ),
    ("coalesce (emit_delta, flush timer)", ("Turn.emit_delta", "Turn.flush", "Turn._timed_flush")),
    ("agent loop (per event)", ("Agent._call_model",)),
    ("hub, timers, greenlet switches", ("Hub.", "Waiter.", "switch", "Timeout.")),
    ("HTTP server (other requests)", ("WSGIHandler.",)),
]


def layers(path: str) -> tuple[Counter, int]:
    counts: Counter = Counter()
    total = 0
    for line in open(path):
        stack, _, n = line.rstrip().rpartition(" ")
        samples = int(n)
        total += samples
        names = [frame.split(" (")[0] for frame in stack.split(";") if frame]
        if not names:  # no Python frame: the hub's C loop (libev, epoll, callbacks)
            counts["hub, timers, greenlet switches"] += samples
            continue
        if any(name.startswith(("_writer", "_lag_sampler", "Counters.")) for name in names):
            counts["the benchmark's own probe"] += samples
            continue
        for layer, marks in RULES:
            if any(mark in name for name in names for mark in marks):
                counts[layer] += samples
                break
        else:
            counts["other"] += samples
    return counts, total


def main() -> None:
    counts, total = layers(sys.argv[1])
    print(f"{total} samples")
    for layer, samples in counts.most_common():
        print(f"{samples / total * 100:5.1f} %  {layer}")


if __name__ == "__main__":
    main()
