"""Numi's MCP server through the official `mcp` client against the live gateway server:
the handshake, the tools a key's uses allow, and each tool doing its work (ask runs a
real turn on the scripted provider and keeps it as a chat the history tools then find;
web_search asks the loopback SearXNG-compatible server of the tool tests)."""

from __future__ import annotations

import json
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest

from numi.testing import Scenario

httpx2 = pytest.importorskip("httpx2")

# The tool tests' loopback web servers (tests/tools/conftest.py imports them the same way).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from tools_web_support import WebServers  # noqa: E402


@pytest.fixture
def session_of(gateway, require_extra):
    """`session_of(secret)(work)`: run `work(session)` in an initialized MCP session of
    `secret`; its result. The `mcp` client is imported here, by the tests that use it: at
    the module's top it cost every xdist worker's collection 2.3 s of CPU (issue 36)."""
    client_session = require_extra("mcp", "mcp").ClientSession
    streamable_http_client = require_extra(
        "mcp.client.streamable_http", "mcp"
    ).streamable_http_client
    return lambda secret: _session(gateway, secret, client_session, streamable_http_client)


def _session(gateway, secret: str, client_session, streamable_http_client):
    def run(work):
        async def main():
            headers = {"Authorization": f"Bearer {secret}"}
            # A deadline only a hang reaches.
            with anyio.fail_after(120):
                return await talk(headers)

        async def talk(headers):
            async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
                async with streamable_http_client(
                    gateway.server.url + "/mcp", http_client=http
                ) as streams:
                    async with client_session(streams[0], streams[1]) as session:
                        init = await session.initialize()
                        return init, await work(session)

        # A thread of its own: a browser test of the same worker may hold this thread's loop.
        with ThreadPoolExecutor(1) as thread:
            return thread.submit(anyio.run, main).result()

    return run


def test_a_desktop_agent_asks_then_finds_and_reads_the_chat(gateway, scripted, session_of):
    secret, _ = gateway.new_key(
        name="Claude Desktop", uses=["chat", "history", "documents", "web", "mcp"]
    )
    scripted.enqueue(Scenario().text("Porridge, with salt.").usage(9, 4), model="scripted-model")
    scripted.enqueue(Scenario().text("Oats and water.").usage(12, 3), model="scripted-model")

    async def work(session):
        tools = await session.list_tools()
        first = await session.call_tool(
            "ask",
            {"message": "What is a good cold-morning breakfast?", "model": "alpha/scripted-model"},
        )
        chat_id = first.structured_content["chat_id"]
        follow = await session.call_tool(
            "ask", {"message": "And what goes in it?", "chat_id": chat_id}
        )
        found = await session.call_tool("search_chats", {"query": "breakfast"})
        listed = await session.call_tool("list_chats", {"limit": 5})
        read = await session.call_tool("read_chat", {"chat_id": chat_id})
        documents = await session.call_tool("search_documents", {"query": "porridge"})
        missing = await session.call_tool("read_chat", {"chat_id": "no-such-chat"})
        await session.send_ping()
        return tools, first, follow, found, listed, read, documents, missing

    init, (tools, first, follow, found, listed, read, documents, missing) = session_of(secret)(work)
    assert init.protocol_version == "2025-11-25" and init.server_info.name == "numi"
    assert {t.name for t in tools.tools} == {
        "search_chats",
        "list_chats",
        "read_chat",
        "search_documents",
        "web_search",
        "ask",
    }
    assert not first.is_error and first.content[0].text == "Porridge, with salt."
    assert first.structured_content["model"] == "scripted-model"
    assert follow.structured_content["chat_id"] == first.structured_content["chat_id"]
    assert follow.content[0].text == "Oats and water."
    chat_id = first.structured_content["chat_id"]
    assert chat_id in {h["chat_id"] for h in found.structured_content["messages"]}
    assert listed.structured_content["chats"][0]["chat_id"] == chat_id
    assert listed.structured_content["chats"][0]["api_key"] == "Claude Desktop"
    assert [m["content"] for m in read.structured_content["messages"]] == [
        "What is a good cold-morning breakfast?",
        "Porridge, with salt.",
        "And what goes in it?",
        "Oats and water.",
    ]
    assert not documents.is_error and documents.structured_content["passages"] == []
    assert missing.is_error and missing.structured_content["error"]["code"] == "not_found"
    # The turn ran through the engine: the page's API sees the same chat, marked with the key.
    status, chat = gateway.api.get(f"/api/session/{chat_id}")
    assert status == 200 and chat["api_key"] == "Claude Desktop"
    # Both answers count under the key on the Usage page, as /v1 calls do, and once
    # under their model.
    status, usage = gateway.api.get("/api/usage?group=key&period=all")
    assert status == 200, usage
    row = next(r for r in usage["rows"] if r["label"] == "Claude Desktop")
    assert (row["answers"], row["input_tokens"], row["output_tokens"]) == (2, 21, 7)
    status, by_chat = gateway.api.get("/api/usage?group=chat&period=all")
    [kept] = [r for r in by_chat["rows"] if r["key"] == chat_id]
    assert (kept["answers"], kept["input_tokens"], kept["output_tokens"]) == (2, 21, 7)


def test_a_key_lists_and_calls_only_the_tools_its_uses_allow(gateway, session_of):
    secret, _ = gateway.new_key(name="docs only", uses=["documents", "mcp"])

    async def work(session):
        tools = await session.list_tools()
        try:
            await session.call_tool("read_chat", {"chat_id": "x"})
        except Exception as exc:  # the SDK raises a JSON-RPC error as McpError
            return tools, exc
        return tools, None

    _init, (tools, refused) = session_of(secret)(work)
    assert [t.name for t in tools.tools] == ["search_documents"]
    assert refused is not None and "history" in str(refused)


@pytest.fixture
def web_servers():
    servers = WebServers()
    yield servers
    servers.close()


def test_web_search_uses_the_users_search_settings(gateway, web_servers, session_of):
    secret, _ = gateway.new_key(name="searcher", uses=["web", "mcp"])

    async def search(session):
        return await session.call_tool("web_search", {"query": "sea otters", "count": 2})

    _init, unset = session_of(secret)(search)
    assert unset.is_error and unset.structured_content["error"]["code"] == "not_configured"
    settings = {
        "search_backend": "searxng",
        "searxng_url": web_servers.search_url,
        "allowed_hosts": ["127.0.0.1"],
    }
    saved = urllib.request.Request(
        gateway.server.url + "/settings/web-search",
        data=json.dumps(settings).encode(),
        headers={
            "Content-Type": "application/json",
            "HX-Request": "true",
            **gateway.server.headers,
        },
    )
    with urllib.request.urlopen(saved, timeout=30) as answer:
        assert answer.status == 200
    try:
        _init, found = session_of(secret)(search)
    finally:
        urllib.request.urlopen(
            urllib.request.Request(
                gateway.server.url + "/settings/web-search",
                data=json.dumps({"search_backend": ""}).encode(),
                headers={
                    "Content-Type": "application/json",
                    "HX-Request": "true",
                    **gateway.server.headers,
                },
            ),
            timeout=30,
        ).close()
    assert not found.is_error
    results = found.structured_content["results"]
    assert results[0]["url"] == f"{web_servers.page_url}/article"
    assert results[0]["snippet"] == "Sea otters hold hands while sleeping."
    assert any(r.startswith("/search?q=sea+otters&format=json") for r in web_servers.requests)
