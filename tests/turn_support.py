"""Helpers for tests that drive a live server: a JSON API client, WebSocket and SSE clients,
chat set-up, and direct reads of the server's database."""

from __future__ import annotations

import http.client
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from numi.testing.websocket_client import WebSocketClient as Client
from server_wait import WAIT_SECONDS

from numi.testing import ScriptedProvider
from server_wait import answers_healthz, wait_until_ready

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


def upload(
    base_url: str, filename: str, data: bytes, mime: str, token: str | None = ACCESS_TOKEN
) -> tuple[int, dict]:
    """POST one file to /api/upload as multipart form data, as the page does:
    (status, body)."""
    import uuid

    boundary = uuid.uuid4().hex
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"'
        f"\r\nContent-Type: {mime}\r\n\r\n"
    )
    request = urllib.request.Request(
        base_url + "/api/upload",
        data=head.encode() + data + f"\r\n--{boundary}--\r\n".encode(),
        method="POST",
        headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Authorization": f"Bearer {token}",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, json.loads(response.read())


def upload_attachment(
    base_url: str, filename: str, data: bytes, mime: str, token: str | None = ACCESS_TOKEN
) -> int:
    """`upload`'s attachment id."""
    return upload(base_url, filename, data, mime, token)[1]["attachments"][0]["id"]


def wait_until(condition, timeout: float = WAIT_SECONDS, what: str = "the condition"):
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
    """A new chat on `model` of the endpoint `name` (default `scripted-<kind>`) on the
    scripted provider, the endpoint made on first use. A server's endpoint is made once and
    reused as it is: its default model is the `model` of the first call, so a test that
    depends on the default model names an endpoint of its own."""
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


@contextmanager
def models_listed(provider: ScriptedProvider, models: list[dict]) -> Iterator[None]:
    """Within the block the scripted provider lists `models` (an endpoint made or refreshed
    there keeps that list); its own list again after."""
    listed = provider.models
    provider.models = models
    try:
        yield
    finally:
        provider.models = listed


def refresh_models(api: Api, provider: ScriptedProvider, endpoint_id: int, names) -> None:
    """Endpoint `endpoint_id` lists the models `names` (its cached list refreshed)."""
    with models_listed(provider, [{"id": name} for name in names]):
        assert api.get(f"/api/endpoints/{endpoint_id}/models?refresh=1")[0] == 200


def chat_with_backup(api, scripted, *, primary="primary-model", endpoint_id=None):
    """A chat on `primary` whose one fallback is backup-model on the scripted endpoint."""
    chat = make_chat(api, scripted, model=primary)
    backup_endpoint = chat["endpoint"]["id"]
    if endpoint_id is not None:
        status, body = api.call("PATCH", f"/api/session/{chat['id']}", {"endpoint_id": endpoint_id})
        assert status == 200, body
    status, body = api.call(
        "PATCH",
        f"/api/session/{chat['id']}",
        {"settings": {"fallbacks": [{"endpoint_id": backup_endpoint, "model": "backup-model"}]}},
    )
    assert status == 200, body
    return chat


def run_turn(
    server, chat_id: str, message: str = "Hello", timeout: float = WAIT_SECONDS
) -> list[dict]:
    """Send `message` on a new WebSocket and return the turn's events up to `turn_end`."""
    ws = Socket(server, chat_id)
    try:
        ws.send(type="send", message=message)
        return ws.events_until("turn_end", timeout=timeout)
    finally:
        ws.close()


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

    def receive(self, timeout: float = WAIT_SECONDS) -> Any:
        raw = self.ws.receive(timeout=timeout)
        if raw is None:
            raise TimeoutError("no message from the server in time")
        self.frames.append(raw)
        return raw if self.html else json.loads(raw)

    def events_until(self, kind: str = "turn_end", timeout: float = WAIT_SECONDS) -> list[dict]:
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


def streamed_answer(events: list[dict]) -> str:
    """The answer as a client reads it from its events: a `snapshot` stands for the turn up
    to its id (a Redis writer that fell behind writes one in place of the deltas it drops),
    the `content` deltas after it extend it."""
    answer = ""
    for event in events:
        if event["type"] == "snapshot":
            answer = event["data"]["content"]
        elif event["type"] == "content":
            answer += event["data"]["delta"]
    return answer


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


class Gunicorn:
    """`gunicorn -k gevent -w N -c python:numi.gunicorn_config app:app` on `data_dir` (with
    its database already there); a new Gunicorn on the same directory is a restart."""

    def __init__(self, data_dir: Path, workers: int = 1, **env: Any):
        self.port, self.data_dir = free_port(), data_dir
        self.url = f"http://127.0.0.1:{self.port}"
        self.headers = {"Authorization": f"Bearer {ACCESS_TOKEN}"}
        self.database_url = f"sqlite:///{data_dir / 'numi.db'}"
        self.log_path = data_dir.parent / f"gunicorn-{self.port}.log"
        environment = {k: v for k, v in os.environ.items() if not k.startswith("NUMI_")}
        environment.update(
            NUMI_DATA_DIR=str(data_dir),
            NUMI_ACCESS_TOKEN=ACCESS_TOKEN,
            NUMI_AUTO_ENDPOINTS="0",
            NUMI_TEST_FAST_PASSWORD_HASHES="1",
            **turn_server_env(**env),
        )
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(Path(sys.executable).with_name("gunicorn")), "-k", "gevent"]
                + ["-w", str(workers), "-c", "python:numi.gunicorn_config"]
                + ["-b", f"127.0.0.1:{self.port}", "app:app"],
                env=environment,
                cwd=str(ROOT),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until_ready(self.proc, answers_healthz(self.url), what="gunicorn", log=self.log)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """SIGKILL, if it still runs (a test's clean-up)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
