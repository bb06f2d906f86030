"""What a question's request asked for is kept with it (issue 35, seeds clause 20): its
`content_parts` hold the stored attachment references and a `request` part with the time
zone and offset, the tools and flags asked for, the client (and an API key's name) and the
mode. Rows saved before (attachments only, or NULL) still read and export. A live
multi-user server, a real API token, HTTP and WebSocket clients."""

from __future__ import annotations

import json
import sqlite3
import urllib.request

import pytest

from context_support import upload
from numi.testing import Scenario
from numi.testing.websocket_client import WebSocketClient
from turn_support import SSE, Api, make_chat, turn_server_env


@pytest.fixture(scope="module")
def server_and_token(live_server_factory):
    server = live_server_factory(NUMI_AUTH="multi", **turn_server_env())
    server.cli("user", "create", "ada", "--admin", "--password-stdin", input="long enough pw\n")
    token = server.cli("token", "create", "--user", "ada", "--name", "laptop script")
    yield server, token.stdout.strip()
    server.stop()


def request_part(message: dict) -> dict:
    return next(p for p in message["content_parts"] if p["type"] == "request")


def exported(server, token: str, chat_id: str, fmt: str) -> str:
    request = urllib.request.Request(
        f"{server.url}/api/session/{chat_id}/export?fmt={fmt}",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def test_a_question_keeps_its_attachments_and_what_its_request_asked_for(
    server_and_token, scripted
):
    server, token = server_and_token
    api = Api(server.url, token=token)
    chat = make_chat(api, scripted)
    status, body = upload(server.url, "notes.txt", b"some notes", "text/plain", token=token)
    assert status == 201, body
    attachment = body["attachments"][0]
    scripted.enqueue(Scenario().text("Seen."), Scenario().text("Again."))
    stream = SSE(
        server,
        "POST",
        "/api/chat_stream",
        {
            "session": chat["id"],
            "message": "Read this",
            "request_id": "with-file",
            "attachments": [attachment["id"]],
            "allow_web_search": True,
        },
        headers={
            "Authorization": f"Bearer {token}",
            "X-Timezone": "Europe/Berlin",
            "X-Tz-Offset": "60",
        },
    )
    assert "turn_end" in [e["type"] for e in stream.events()]
    stream.close()
    socket = WebSocketClient.connect(
        f"ws://127.0.0.1:{server.port}/ws/{chat['id']}?format=json",
        headers={"Origin": server.url, "Authorization": f"Bearer {token}"},
    )
    socket.send(json.dumps({"type": "send", "message": "And this", "tz_offset": -300}))
    while True:
        raw = socket.receive(timeout=15)
        assert raw is not None, "the turn did not end"
        if json.loads(raw)["type"] == "turn_end":
            break
    socket.close()

    first, second = [m for m in api.history(chat["id"]) if m["role"] == "user"]
    assert {"type": "attachment", "id": attachment["id"]} in first["content_parts"]
    asked = request_part(first)
    assert asked["timezone"] == "Europe/Berlin" and asked["tz_offset"] == 60
    assert {"web_search", "fetch_page"} <= set(asked["tools"])
    assert asked["flags"] == {"allow_web_search": True}
    assert asked["client"] == {"kind": "api", "via": "chat_stream", "api_key": "laptop script"}
    assert asked["mode"] == "chat"
    asked = request_part(second)
    assert asked["tz_offset"] == -300 and asked["timezone"] is None
    assert asked["client"] == {"kind": "api", "via": "websocket", "api_key": "laptop script"}
    assert [p["type"] for p in second["content_parts"]] == ["request"]

    document = json.loads(exported(server, token, chat["id"], "json"))
    saved = [m for m in document["messages"] if m["role"] == "user"][0]
    assert request_part(saved)["client"]["api_key"] == "laptop script"
    markdown = exported(server, token, chat["id"], "md")
    assert "Sent from the API (API key “laptop script”) · Europe/Berlin (UTC+01:00)" in markdown
    assert "UTC-05:00" in markdown
    assert "[request]" not in markdown  # shown as the line above, not as an unknown part


def test_questions_saved_before_the_metadata_still_read_and_export(server_and_token, scripted):
    server, token = server_and_token
    api = Api(server.url, token=token)
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text("One."), Scenario().text("Two."))
    for text in ("Old with a file", "Old without"):
        stream = SSE(
            server,
            "POST",
            "/api/chat_stream",
            {"session": chat["id"], "message": text},
            headers={"Authorization": f"Bearer {token}"},
        )
        list(stream.events())
        stream.close()
    # As an older Numi wrote them: attachments only, and NULL.
    path = server.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path, timeout=10) as connection:
        connection.execute(
            "UPDATE messages SET content_parts_json = ? WHERE chat_id = ? AND content = ?",
            ('[{"type": "attachment", "id": 987654}]', chat["id"], "Old with a file"),
        )
        connection.execute(
            "UPDATE messages SET content_parts_json = NULL WHERE chat_id = ? AND content = ?",
            (chat["id"], "Old without"),
        )
    questions = [m for m in api.history(chat["id"]) if m["role"] == "user"]
    assert [m["content_parts"] for m in questions] == [[{"type": "attachment", "id": 987654}], []]
    markdown = exported(server, token, chat["id"], "md")
    assert "Old with a file" in markdown and "Sent from" not in markdown


@pytest.mark.browser
def test_the_pages_send_keeps_the_browsers_time_zone_and_says_it_came_from_the_page(
    browser_page, server, api, scripted, until
):
    chat = make_chat(api, scripted)
    scripted.enqueue(Scenario().text("Konnichiwa."))
    page = browser_page(server, timezone_id="Asia/Tokyo", viewport={"width": 390, "height": 844})
    page.goto(f"{server.url}/c/{chat['id']}")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    page.fill("#composer-input", "What time is it?")
    page.press("#composer-input", "Enter")
    page.wait_for_function("() => document.body.innerText.includes('Konnichiwa.')")
    question = until(lambda: [m for m in api.history(chat["id"]) if m["role"] == "user"])[0]
    asked = request_part(question)
    assert asked["timezone"] == "Asia/Tokyo" and asked["tz_offset"] == 9 * 60
    assert asked["client"] == {"kind": "page", "via": "websocket"}
    assert asked["flags"] == {"queue": True}  # the page always lets a send queue
    assert asked["mode"] == "chat"
