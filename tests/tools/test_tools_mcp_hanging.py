"""A hanging MCP server costs nobody but its own user (issue 28, item 7).

The hanging server is a plain TCP listener on loopback that accepts and never answers, so
every MCP session to it runs into NUMI_MCP_TIMEOUT_SECONDS. A live multi-user `numi serve`:
alice (an admin, so her server may be on loopback) has it; bob only chats.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from numi.testing.websocket_client import WebSocketClient

# Compares timings within one run: runs alone, after the parallel suite (Makefile).
pytestmark = pytest.mark.alone

TIMEOUT = 6.0  # NUMI_MCP_TIMEOUT_SECONDS of the server under test
RETRY = 5.0  # NUMI_MCP_RETRY_SECONDS


@pytest.fixture(autouse=True)
def _mcp_sdk(require_extra):
    require_extra("mcp", "mcp")


class HangingServer:
    """Accepts connections, counts them, never answers; closes them when stopped."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(conn)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self):
        self.listener.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def hanging():
    server = HangingServer()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def numi(live_server_factory, provider):
    from turn_support import turn_server_env

    server = live_server_factory(
        **turn_server_env(
            NUMI_AUTH="multi", NUMI_MCP_TIMEOUT_SECONDS=TIMEOUT, NUMI_MCP_RETRY_SECONDS=RETRY
        )
    )
    tokens = {}
    for name, admin in (("alice", ("--admin",)), ("bob", ())):
        server.cli(
            "user", "create", name, *admin, "--password-stdin", input="long enough password\n"
        )
        tokens[name] = {
            "Authorization": "Bearer "
            + server.cli("token", "create", "--user", name).stdout.strip()
        }
    # By name, as real providers are: resolving it takes a thread of the hub's shared pool.
    base_url = provider.openai_base_url.replace("127.0.0.1", "localhost")
    server.cli(
        "endpoint", "add", "Scripted", "--base-url", base_url, "--default-model", "fake-model"
    )
    yield server, tokens
    server.stop()


def _http(server, auth, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        server.url + path,
        data=data,
        method=method,
        headers={"Content-Type": "application/json", **auth},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        raw = response.read()
        return response.status, (
            json.loads(raw) if raw and "json" in response.headers["Content-Type"] else raw.decode()
        )


def _chat(server, auth, settings=None) -> str:
    endpoints = _http(server, auth, "GET", "/api/endpoints")[1]["endpoints"]
    endpoint = next(e for e in endpoints if e["name"] == "Scripted")
    status, chat = _http(
        server,
        auth,
        "POST",
        "/api/session",
        {"endpoint_id": endpoint["id"], "model": "fake-model", "settings": settings or {}},
    )
    assert status == 201, chat
    return chat["id"]


def _page(server, auth, chat_id) -> tuple[float, str]:
    started = time.monotonic()
    status, html = _http(server, auth, "GET", f"/c/{chat_id}")
    assert status == 200
    return time.monotonic() - started, html


def _turn_seconds(server, auth, chat_id, scripted) -> float:
    from numi.testing import Scenario

    scripted.enqueue(Scenario().text("Hello."))
    ws = WebSocketClient.connect(
        f"ws://127.0.0.1:{server.port}/ws/{chat_id}?format=json",
        headers={"Origin": server.url, **auth},
    )
    try:
        started = time.monotonic()
        ws.send(json.dumps({"type": "send", "message": "Hi"}))
        while True:
            raw = ws.receive(timeout=60)
            assert raw is not None, "the turn did not end"
            if json.loads(raw)["type"] == "turn_end":
                return time.monotonic() - started
    finally:
        ws.close()


def _add_hanging_server(server, auth, hanging, name) -> int:
    status, row = _http(
        server,
        auth,
        "POST",
        "/api/mcp_servers",
        {"name": name, "transport": "http", "url": hanging.url},
    )
    assert status == 201, row
    return row["id"]


def test_chat_pages_and_other_users_never_wait_for_a_hanging_mcp_server(
    numi, scripted, hanging, until
):
    server, tokens = numi
    alice_chat = _chat(server, tokens["alice"], {"tools": ["mcp__stuck"]})
    bob_chat = _chat(server, tokens["bob"])
    _turn_seconds(server, tokens["bob"], bob_chat, scripted)  # warm up
    before = _turn_seconds(server, tokens["bob"], bob_chat, scripted)
    with ThreadPoolExecutor(12) as pool:
        pages_before = max(
            seconds
            for seconds, _ in pool.map(
                lambda _: _page(server, tokens["alice"], alice_chat), range(12)
            )
        )
    server_id = _add_hanging_server(server, tokens["alice"], hanging, "stuck")

    # Twelve of alice's chat pages at once, while her MCP server hangs.
    with ThreadPoolExecutor(12) as pool:
        loads = [pool.submit(_page, server, tokens["alice"], alice_chat) for _ in range(12)]
        # Before the fix each page opened its own session in the hub's shared pool (10 threads).
        until(
            lambda: (
                len(hanging.accepted) >= 10
                or (hanging.accepted and all(load.done() for load in loads))
            ),
            what="sessions to the hanging MCP server",
        )
        during = _turn_seconds(server, tokens["bob"], bob_chat, scripted)  # bob's turn, meanwhile
        pages = [load.result() for load in loads]
    slowest = max(seconds for seconds, _ in pages)
    assert slowest < pages_before + TIMEOUT / 2, (
        f"a chat page took {slowest:.2f} s with alice's MCP server hanging, {pages_before:.2f} s before"
    )
    assert during < before + TIMEOUT / 4, (
        f"bob's turn took {during:.2f} s during the hang, {before:.2f} s before"
    )
    # The page tells alice what the catalog knows: listing, then unreachable since ...
    assert any(
        f'id="mcp-server-{server_id}-state"' in html and "refreshing its tools" in html
        for _, html in pages
    )
    html = until(
        lambda: (
            (h := _page(server, tokens["alice"], alice_chat)[1]) and "unreachable since" in h and h
        ),
        timeout=TIMEOUT + 10,
        what="the failure on alice's page",
    )
    assert "mcp_timeout" in html


def test_a_failing_mcp_server_is_contacted_once_per_back_off_not_per_page(numi, hanging, until):
    server, tokens = numi
    alice_chat = _chat(server, tokens["alice"])
    _add_hanging_server(server, tokens["alice"], hanging, "again")
    for _ in range(12):
        _page(server, tokens["alice"], alice_chat)
    until(
        lambda: "unreachable since" in _page(server, tokens["alice"], alice_chat)[1],
        timeout=TIMEOUT + 10,
        what="the first listing to fail",
    )
    assert len(hanging.accepted) == 1, "twelve page loads and the wait: one session"
    # During the back-off, pages do not try again; after it, one page starts one new try.
    loads = 0

    def retried():
        nonlocal loads
        _page(server, tokens["alice"], alice_chat)
        loads += 1
        return len(hanging.accepted) > 1

    until(retried, timeout=RETRY + 10, what="the retry after the back-off")
    assert len(hanging.accepted) == 2 and loads > 1, (len(hanging.accepted), loads)


def test_a_hanging_mcp_server_costs_its_own_turn_the_timeout_once(numi, scripted, hanging, until):
    server, tokens = numi
    _add_hanging_server(server, tokens["alice"], hanging, "slow")
    alice_chat = _chat(server, tokens["alice"], {"tools": ["mcp__slow"]})
    # The first turn waits for the listing (the time limit), then answers without those tools.
    _turn_seconds(server, tokens["alice"], alice_chat, scripted)
    assert "tools" not in scripted.requests[-1].body, "no tools of the server that did not answer"
    assert len(hanging.accepted) == 1
    # The next turn, in the back-off, does not wait for it again.
    _turn_seconds(server, tokens["alice"], alice_chat, scripted)
    assert len(hanging.accepted) == 1, (
        "the failure is cached: no second session during the back-off"
    )
