"""Anthropic turns are sent by Numi's own wire code (numi/providers/anthropic_wire.py), not
the anthropic SDK, whose import costs a server ~42 MiB (issue 45). What goes on the wire
must be what the pinned SDK sends, and a turn must not load the SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from provider_test_support import request, user
from test_provider_requests import TOOL_TRANSCRIPT, WEATHER

from numi.providers import TextDelta
from numi.providers.anthropic_messages import _model_info
from numi.providers.anthropic_wire import API_VERSION
from numi.providers.model_lists import with_llama_server_props
from numi.testing import Scenario

ROOT = Path(__file__).resolve().parents[2]


def test_the_version_header_is_the_pinned_sdks(anthropic_sdk):
    assert API_VERSION == anthropic_sdk._constants.ANTHROPIC_API_VERSION


def test_the_request_is_what_the_sdk_sends(scripted, make_adapter, anthropic_sdk):
    adapter = make_adapter("anthropic")
    req = request(
        *TOOL_TRANSCRIPT,
        user("Thanks. And tomorrow?"),
        model="claude-test-4",
        system="Be terse.",
        tools=[WEATHER],
        temperature=0.3,
    )
    scripted.enqueue(Scenario().text("ok"))
    list(adapter.stream(req))
    numi = scripted.last_request

    body = adapter.build_body(req)
    assert body["tools"] and body["temperature"] == 0.3
    client = anthropic_sdk.Anthropic(
        base_url=scripted.anthropic_base_url, api_key="test-key", max_retries=0
    )
    scripted.enqueue(Scenario().text("ok"))
    # How the adapter sent it through the SDK before: the body as extra_body.
    with client.messages.with_streaming_response.create(
        model=body.pop("model"),
        max_tokens=body.pop("max_tokens"),
        messages=[],
        stream=True,
        extra_body=body,
    ) as response:
        response.read()
    client.close()
    sdk = scripted.last_request

    assert (numi.method, numi.path) == (sdk.method, sdk.path) == ("POST", "/v1/messages")
    assert numi.body == sdk.body
    assert numi.body["stream"] is True
    for header in ("authorization", "x-api-key", "anthropic-version", "content-type", "accept"):
        assert numi.headers.get(header) == sdk.headers.get(header), header


def test_the_endpoints_query_is_kept(scripted, make_adapter):
    adapter = make_adapter("anthropic", base_url=scripted.anthropic_base_url + "?tenant=t1")
    scripted.enqueue(Scenario().text("ok"))
    events = list(adapter.stream(request(user("Hi"), model="claude-test-4")))

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ok"]
    assert scripted.last_request.path == "/v1/messages?tenant=t1"


def test_a_turn_does_not_load_the_sdk(scripted):
    """In a fresh interpreter: a model list, a streamed Anthropic answer, an error answer
    and a refused connection, with the anthropic SDK never imported."""
    script = textwrap.dedent(
        """
        import json, sys
        from provider_test_support import request, user
        from numi.providers import RetryPolicy, StreamError, TextDelta, get_adapter
        base, dead = sys.argv[1], sys.argv[2]
        found = [[m.id for m in get_adapter("anthropic", base, "test-key").list_models()]]
        for url in (base, base, dead):
            adapter = get_adapter(
                "anthropic", url, "test-key", retry=RetryPolicy(max_retries=0), timeout=10
            )
            events = adapter.stream(request(user("Hi"), model="claude-test-4"))
            found.append([
                f"{type(e).__name__}:{getattr(e, 'code', '')}"
                for e in events
                if isinstance(e, (TextDelta, StreamError))
            ])
            adapter.close()
        loaded = sorted(m for m in sys.modules if m.split(".")[0] == "anthropic")
        print(json.dumps({"events": found, "loaded": loaded}))
        """
    )
    scripted.models = [{"id": "claude-test-4"}]
    scripted.enqueue(Scenario().text("ok"))
    scripted.enqueue(Scenario.http_error(400, "bad_request"))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(Path(__file__).parent)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", script, scripted.anthropic_base_url, "http://127.0.0.1:9"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])

    assert result["events"] == [
        ["claude-test-4"],
        ["TextDelta:"],
        ["StreamError:bad_request"],
        ["StreamError:provider_unavailable"],
    ]
    assert result["loaded"] == []


PAGES = {
    None: {
        "data": [
            {
                "type": "model",
                "id": "claude-test-4",
                "display_name": "Claude Test 4",
                "created_at": "2025-01-01T00:00:00Z",
                "max_input_tokens": 200000,
                "max_tokens": 64000,
                "capabilities": {
                    "image_input": {"supported": True},
                    "thinking": {"supported": False},
                },
            }
        ],
        "has_more": True,
        "first_id": "claude-test-4",
        "last_id": "claude-test-4",
    },
    "claude-test-4": {
        # llama-server's own entry, listed on its /v1/messages-serving port.
        "data": [
            {"id": "qwen", "object": "model", "owned_by": "llamacpp", "meta": {"n_ctx": 8192}}
        ],
        "has_more": False,
        "first_id": "qwen",
        "last_id": "qwen",
    },
}
PROPS = {"chat_template_caps": {"supports_tool_calls": True}, "modalities": {"vision": False}}


class _PagedModels(BaseHTTPRequestHandler):
    """GET /v1/models in two pages (after_id), and llama-server's /props."""

    seen: list[str] = []

    def do_GET(self):
        type(self).seen.append(self.path)
        url = urlsplit(self.path)
        if url.path == "/props":
            body = PROPS
        else:
            body = PAGES[dict(parse_qsl(url.query)).get("after_id")]
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_model_lists_read_as_the_sdks(make_adapter, anthropic_sdk):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PagedModels)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        _PagedModels.seen = []
        numi = make_adapter("anthropic", base_url=base).list_models()
        numi_paths = _PagedModels.seen
        _PagedModels.seen = []
        client = anthropic_sdk.Anthropic(base_url=base, api_key="test-key", max_retries=0)
        sdk = with_llama_server_props(client, base, list(client.models.list()), _model_info)
        client.close()
    finally:
        server.shutdown()
        server.server_close()

    assert numi == sdk
    assert (
        numi_paths
        == _PagedModels.seen
        == [
            "/v1/models",
            "/v1/models?after_id=claude-test-4",
            "/props",
        ]
    )
    claude, qwen = numi
    assert (claude.context_window, claude.supports_vision, claude.supports_reasoning) == (
        200000,
        True,
        False,
    )
    assert (qwen.context_window, qwen.supports_tools) == (8192, True)
