"""Many WebSocket clients in one gevent process, for the load benchmarks (bench/load.py).

    python bench/loadclient.py MODE PORT ORIGIN TOKENS RATE [ACCESS_TOKEN]  < jobs

MODE is `json` or `html` (one Numi chat per client: send one message, read the turn),
`echo` (the floor: send TOKENS frames at RATE per second to bench/echo.py, read them back)
or `idle` (open tabs: connect and resume like the page does, then only wait).
stdin carries one JSON line of jobs, [[index, path], ...]; the client connects them all,
prints "ready", waits for a "go" line, runs every job at once and prints one JSON line:
{"seen": {index: [[token number, first time seen], ...]}, ...} with times from
time.perf_counter(), which is CLOCK_MONOTONIC and so comparable with the provider's stamps
in another process; in the JSON mode also the `error` events' codes and how many turns had
no `turn_end` (BENCH_CLIENT_SECONDS after "go" a client stops waiting).
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402
from numi.testing.websocket_client import WebSocketClient as Client  # noqa: E402

TOKEN = re.compile(r"t(\d{4})(?=[\s<])")  # markdown drops the last space
# The frame a content event of one token is on the JSON view, for the echo floor.
ECHO_FRAME = (
    '{{"event_id": 1764500000000, "turn_id": "0123456789abcdef", "type": "content", '
    '"data": {{"delta": "t{:04d} ", "step": 1}}}}'
)


def main() -> None:
    mode, port, origin, tokens, rate = (
        sys.argv[1],
        int(sys.argv[2]),
        sys.argv[3],
        int(sys.argv[4]),
        float(sys.argv[5]),
    )
    headers = {"Origin": origin}
    if len(sys.argv) > 6:
        headers["Authorization"] = f"Bearer {sys.argv[6]}"
    jobs = json.loads(sys.stdin.readline())
    suffix = "?format=json" if mode == "json" else ""
    sockets = {}

    def connect(index, path):
        sockets[index] = Client.connect(f"ws://127.0.0.1:{port}{path}{suffix}", headers=headers)

    gevent.joinall([gevent.spawn(connect, i, p) for i, p in jobs], raise_error=True)
    if mode in ("html", "idle"):
        for ws in sockets.values():
            ws.send(json.dumps({"type": "resume", "last_event_id": None, "last_message_id": 0}))
    print("ready", flush=True)
    sys.stdin.readline()  # go
    if mode == "idle":
        for ws in sockets.values():
            ws.close()
        print(json.dumps({"seen": {}, "sent": {}}), flush=True)
        return
    seen: dict[int, dict[int, float]] = {i: {} for i in sockets}

    def note(index, text):
        at = time.perf_counter()
        for match in TOKEN.finditer(text):
            seen[index].setdefault(int(match.group(1)), at)

    # A turn still short of tokens this long after "go" is given up (its tokens count as
    # lost): the client answers in time instead of the benchmark's deadline killing it.
    give_up = time.monotonic() + float(os.environ.get("BENCH_CLIENT_SECONDS", 120 + tokens / rate))

    errors: dict[str, int] = {}
    ended: set[int] = set()

    def numi_turn(index):
        ws = sockets[index]
        ws.send(json.dumps({"type": "send", "message": f"Turn {index}"}))
        while True:
            left = give_up - time.monotonic()
            if left <= 0:
                return
            raw = ws.receive(timeout=min(120, left) if len(seen[index]) < tokens else 3)
            if raw is None:
                return
            if mode == "json":
                event = json.loads(raw)
                if event["type"] == "content":
                    note(index, event["data"]["delta"])
                elif event["type"] == "error":  # what went wrong, for the benchmark's report
                    code = str(event.get("data", {}).get("code") or event.get("code"))
                    errors[code] = errors.get(code, 0) + 1
                elif event["type"] == "turn_end":
                    ended.add(index)
                    return
            else:
                note(index, raw)
                if 'data-running="0"' in raw and len(seen[index]) >= tokens:
                    return

    def echo(index):
        ws = sockets[index]

        def reader():
            while len(seen[index]) < tokens:
                raw = ws.receive(timeout=60)
                if raw is None:
                    return
                note(index, raw)

        read = gevent.spawn(reader)
        started = time.perf_counter()
        for n in range(tokens):
            gevent.sleep(max(0.0, started + n / rate - time.perf_counter()))
            sent[index][n] = time.perf_counter()
            ws.send(ECHO_FRAME.format(n))
        read.join()

    sent = {i: {} for i in sockets}
    gevent.joinall([gevent.spawn(echo if mode == "echo" else numi_turn, i) for i in sockets])
    for ws in sockets.values():
        ws.close()
    result = {i: [[n, at] for n, at in by_token.items()] for i, by_token in seen.items()}
    sent_times = {i: [[n, at] for n, at in by_token.items()] for i, by_token in sent.items()}
    unended = len(sockets) - len(ended) if mode == "json" else 0
    print(
        json.dumps({"seen": result, "sent": sent_times, "errors": errors, "unended": unended}),
        flush=True,
    )


if __name__ == "__main__":
    main()
