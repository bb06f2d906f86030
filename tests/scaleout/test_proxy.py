"""docs/nginx.conf in front of two Numi processes: WebSocket upgrade, SSE without
buffering, round robin with no sticky sessions. Runs the real nginx (skipped when it is not
installed: `apt-get install nginx-light`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from numi.testing import Scenario
from server_wait import answers_healthz, wait_until_ready
from turn_support import ACCESS_TOKEN, ROOT, SSE, Api, free_port, make_chat, of_type

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


@dataclass
class Proxy:
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ACCESS_TOKEN}"}


@pytest.fixture(scope="module")
def proxy(pair, tmp_path_factory):
    nginx = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if nginx is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("nginx is missing in CI (.ci/run installs it)")
        pytest.skip("nginx is not installed (apt-get install nginx-light)")
    a, b = pair
    port = free_port()
    site = (ROOT / "docs" / "nginx.conf").read_text()
    site = site.replace("server 127.0.0.1:8765;", f"server 127.0.0.1:{a.port};")
    site = site.replace("server 127.0.0.1:8766;", f"server 127.0.0.1:{b.port};")
    site = site.replace("listen 80;", f"listen 127.0.0.1:{port};")
    prefix = tmp_path_factory.mktemp("nginx")
    (prefix / "site.conf").write_text(site)
    (prefix / "nginx.conf").write_text(f"""
daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    include {prefix}/site.conf;
}}
""")
    proc = subprocess.Popen(
        [nginx, "-p", str(prefix), "-c", str(prefix / "nginx.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    server = Proxy(port)
    wait_until_ready(
        proc,
        answers_healthz(server.url),
        what="nginx",
        log=lambda: (prefix / "error.log").read_text(),
    )
    yield server
    proc.terminate()
    proc.wait(10)


def test_websockets_through_the_proxy_follow_one_turn_from_either_process(proxy, scripted, sockets):
    api = Api(proxy.url)
    chat = make_chat(api, scripted)
    words = " ".join(f"p{i}" for i in range(40))
    scripted.enqueue(Scenario().text(words, chunks=40).delay(0.02))
    # Round robin: consecutive connections land on A and B in turn.
    watchers = [sockets(proxy, chat["id"]) for _ in range(4)]
    for watcher in watchers:
        watcher.send(type="resume", last_event_id=None)
    sender = sockets(proxy, chat["id"])
    sender.send(type="send", message="Through the proxy")
    reference = [e["event_id"] for e in sender.events_until("turn_end")]
    for watcher in watchers:
        events = watcher.events_until("turn_end")
        assert [e["event_id"] for e in events if e["event_id"] >= reference[0]] == reference
        assert "".join(e["data"]["delta"] for e in of_type(events, "content")) == words


def test_sse_through_the_proxy_is_not_buffered(proxy, scripted):
    api = Api(proxy.url)
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text(" ".join(f"s{i}" for i in range(50)), chunks=50).delay(0.1))
    stream = SSE(
        proxy, "POST", "/api/chat_stream", {"message": "SSE via nginx", "session": chat["id"]}
    )
    try:
        assert stream.response.status == 200
        events = stream.events()
        first = next(e for e in events if e["type"] == "content")
        # The first delta arrived while the turn still runs: nothing held it back.
        status, body = api.get(f"/api/chat/stream_status/{chat['id']}")
        assert body["running"] is True, "the proxy buffered the stream until the turn ended"
        # Resume on whichever process the next connection reaches, from that event.
        resumed = SSE(
            proxy,
            "GET",
            f"/api/chat/resume/{chat['id']}",
            headers={"Last-Event-ID": str(first["event_id"])},
        )
        rest = list(resumed.events())
        resumed.close()
        # The turn's events end with turn_end; a new chat's title may follow it.
        turn = [e for e in rest if e["type"] != "title_update"]
        assert rest[0]["event_id"] == first["event_id"] + 1 and turn[-1]["type"] == "turn_end"
    finally:
        stream.close()
