"""CPU per delta of the per-event layers, in one process (CPU time, no network timing):
a turn's `emit_delta` -> `publish` -> a subscriber's `get` -> the JSON text -> a WebSocket
frame on a socketpair (drained by a greenlet), and the HTML view's per-delta fragment and
cursor. Steadier than `load.py` on a busy machine; run it against two trees to compare.

    python bench/eventpath.py
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

os.environ["NUMI_DATA_DIR"] = tempfile.mkdtemp()

import gevent  # noqa: E402

from numi import create_app  # noqa: E402

app = create_app()
from wsproto import ConnectionType, WSConnection  # noqa: E402
from wsproto.events import AcceptConnection, Request, TextMessage  # noqa: E402

import numi.web.live.ws as wsmod  # noqa: E402
from numi.extensions import turn_manager  # noqa: E402
from numi.turns.channel import encoded  # noqa: E402
from numi.turns.turn import Turn, TurnRequest  # noqa: E402
from numi.web.live.fragments import HtmlView  # noqa: E402

N = 20000
manager = turn_manager(app)
manager.frame_interval = 0.0

# a real wsproto server connection, opened by a real handshake, over a socketpair
a, b = socket.socketpair()
server = WSConnection(ConnectionType.SERVER)
client = WSConnection(ConnectionType.CLIENT)
server.receive_data(client.send(Request(host="x", target="/")))
list(server.events())
client.receive_data(server.send(AcceptConnection()))
list(client.events())


class Socket:
    """What the view uses of simple_websocket.Server (.ws, .sock, .connected, send()),
    over the socketpair; send() is simple_websocket's own per-message path."""

    connected = True

    def __init__(self):
        self.ws, self.sock = server, a

    def send(self, data):
        self.sock.send(self.ws.send(TextMessage(data=data)))


ws = Socket()


def drain():
    while b.recv(1 << 20):
        pass


gevent.spawn(drain)


def relay(sub, send):
    # Until the turn ends: a subscriber that falls behind gets a snapshot for what it
    # missed (as in the server), so the number of events it sees may be below N.
    while True:
        event = sub.get()
        send(encoded(event))
        if event["type"] in ("turn_end", "snapshot") and event["data"].get("finished", True):
            return


def run(send):
    channel = manager.channel(f"chat-{time.monotonic_ns()}")
    turn = Turn(
        channel,
        TurnRequest(user_id=1, chat_id=channel.chat_id, message="x"),
        frame_interval=manager.frame_interval,
    )
    channel.begin_turn(turn.id)
    sub, _ = channel.subscribe(channel.last_event_id)
    g = gevent.spawn(relay, sub, send)
    gevent.sleep(0)
    t0 = time.process_time()
    for i in range(N):
        turn.emit_delta("content", f"t{i:04d} ", 0)
        gevent.sleep(0)  # the subscriber runs, as when tokens arrive apart
    turn.emit("turn_end", {})
    g.join()
    return (time.process_time() - t0) / N * 1e6


# The tree's own frame write: direct framing where it exists, else simple_websocket's path.
if getattr(wsmod, "_frame_protocol", None) is not None:
    conn = type("C", (), {})()
    conn.ws, conn.frames = ws, wsmod._frame_protocol(ws)

    def send(data):
        wsmod.Connection._write_text(conn, data)
else:
    send = ws.send


class Chat:
    id = "c"
    user_id = 1
    title = "t"


def html():
    with app.test_request_context("/"):
        v = HtmlView(Chat())
        v.render({"event_id": 1, "turn_id": "abc", "type": "turn_start", "data": {}})
        v.render(
            {
                "event_id": 2,
                "turn_id": "abc",
                "type": "content",
                "data": {"delta": "Hello\n\n", "step": 0},
            }
        )
        t0 = time.process_time()
        for i in range(2000):
            # a fresh paragraph every 20 tokens, so the open block stays short (as in prose)
            v.render(
                {
                    "event_id": i + 3,
                    "turn_id": "abc",
                    "type": "content",
                    "data": {"delta": "word " if i % 20 else "end.\n\n", "step": 0},
                }
            )
            v.cursor(i + 3)
        return (time.process_time() - t0) / 2000 * 1e6


res = {
    "json_path_us": [round(run(send), 1) for _ in range(5)],
    "html_delta_us": [round(html(), 1) for _ in range(3)],
}
print(json.dumps(res))
