"""Helpers for tests that drive a live server: a JSON API client, WebSocket and SSE clients,
chat set-up, and direct reads of the server's database."""

from __future__ import annotations

import http.client
import json
import os
import socket
import sqlite3
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator

from numi.testing.websocket_client import WebSocketClient as Client

from numi.testing import ScriptedProvider

# The access token of every app and live server the tests start in single-user mode
# (conftest sets NUMI_ACCESS_TOKEN to it); the clients below send it by default.
ACCESS_TOKEN = "numi-test-access-token"

# The NUMI_PLUGINS module with the turn tests' tools lives in tests/turns/.
PLUGINS = Path(__file__).resolve().parent / "turns"
ROOT = Path(__file__).resolve().parent.parent  # the repository (app.py, docs/)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def turn_server_env(**extra: Any) -> dict[str, str]:
    env = {
        "NUMI_PLUGINS": "plugin_tools",
        # Keep the caller's PYTHONPATH: it may put a working copy's numi first.
        "PYTHONPATH": os.pathsep.join(p for p in (str(PLUGINS), os.environ.get("PYTHONPATH")) if p),
        "NUMI_GENERATE_TITLES": "0",
        "NUMI_FRAME_INTERVAL_MS": "10",
        "NUMI_PROVIDER_MAX_RETRIES": "0",
        "NUMI_TURN_RETENTION_SECONDS": "30",
        # With Redis, a turn whose heartbeat misses its lease is closed as interrupted by any
        # process's sweeper. Four xdist workers on two cores can starve a heartbeat for
        # seconds; the tests of dead owners set their own short lease.
        "NUMI_TURN_LEASE_MS": "20000",
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env


def wait_until(condition, timeout: float = 15.0, what: str = "the condition"):
    """Poll `condition` until it returns something true, and return that; fail after
    `timeout` seconds. For tests that wait on a state (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Api:
    """A tiny JSON client for the server's HTTP API; sends the access token as a bearer
    header (`token=None`: none)."""

    def __init__(self, base: str, token: str | None = ACCESS_TOKEN):
        self.base = base
        self.auth = {"Authorization": f"Bearer {token}"} if token else {}

    def call(
        self, method: str, path: str, body: Any = None, headers: dict | None = None
    ) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", **self.auth, **(headers or {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            return exc.code, json.loads(raw) if raw else None

    def post(self, path, body=None):
        return self.call("POST", path, body)

    def get(self, path):
        return self.call("GET", path)

    def history(self, chat_id: str) -> list[dict]:
        status, body = self.get(f"/api/history/{chat_id}?limit=1000")
        assert status == 200, body
        return body["messages"]


def page_retry(api: Api, chat_id: str, message_id: int) -> tuple[int, str]:
    """The page's Retry (an HTMX form post naming the message it was drawn after)."""
    request = urllib.request.Request(
        f"{api.base}/c/{chat_id}/retry",
        data=urllib.parse.urlencode({"message_id": message_id}).encode(),
        method="POST",
        headers={"HX-Request": "true", **api.auth},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def make_chat(
    api: Api,
    provider: ScriptedProvider,
    *,
    kind: str = "openai_chat",
    model: str = "fake-model",
    settings: dict | None = None,
    name: str | None = None,
) -> dict:
    base_url = provider.anthropic_base_url if kind == "anthropic" else provider.openai_base_url
    status, endpoints = api.get("/api/endpoints")
    endpoint_name = name or f"scripted-{kind}"
    endpoint = next((e for e in endpoints["endpoints"] if e["name"] == endpoint_name), None)
    if endpoint is None:
        status, endpoint = api.post(
            "/api/endpoints",
            {
                "name": endpoint_name,
                "kind": kind,
                "base_url": base_url,
                "api_key": "test-key",
                "default_model": model,
            },
        )
        assert status == 201, endpoint
    status, chat = api.post(
        "/api/session", {"endpoint_id": endpoint["id"], "model": model, "settings": settings or {}}
    )
    assert status == 201, chat
    chat["endpoint"] = endpoint
    return chat


class Socket:
    """A real WebSocket client on /ws/<chat_id> (JSON view unless html=True)."""

    def __init__(self, server, chat_id: str, *, html: bool = False):
        suffix = "" if html else "?format=json"
        self.ws = Client.connect(
            f"ws://127.0.0.1:{server.port}/ws/{chat_id}{suffix}",
            headers={"Origin": server.url, **server.headers},
        )
        self.html = html
        self.frames: list[str] = []

    def send(self, **message) -> None:
        self.ws.send(json.dumps(message))

    def receive(self, timeout: float = 10) -> Any:
        raw = self.ws.receive(timeout=timeout)
        if raw is None:
            raise TimeoutError("no message from the server in time")
        self.frames.append(raw)
        return raw if self.html else json.loads(raw)

    def events_until(self, kind: str = "turn_end", timeout: float = 15) -> list[dict]:
        events = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {kind} event; got {[e['type'] for e in events]}")
            event = self.receive(timeout=left)
            events.append(event)
            if event["type"] == kind:
                return events

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass


def types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def of_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def db_rows(server, sql: str, *params) -> list[tuple]:
    """Read the live server's SQLite database directly (the database is the truth)."""
    path = server.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path, timeout=10) as connection:
        return connection.execute(sql, params).fetchall()


class SSE:
    """A minimal Server-Sent Events client over http.client."""

    def __init__(
        self, server, method: str, path: str, body: Any = None, headers: dict | None = None
    ):
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=15)
        data = json.dumps(body) if body is not None else None
        self.connection.request(
            method,
            path,
            body=data,
            headers={"Content-Type": "application/json", **server.headers, **(headers or {})},
        )
        self.response = self.connection.getresponse()

    def events(self) -> Iterator[dict]:
        buffer: dict[str, str] = {}
        while True:
            line = self.response.readline()
            if not line:
                return
            line = line.decode().rstrip("\n")
            if not line:
                if "data" in buffer:
                    yield json.loads(buffer["data"])
                buffer = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(": ")
                buffer[name] = value

    def close(self):
        self.connection.close()
