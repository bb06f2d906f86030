"""Compaction, auto-compaction, trimming, overflow recovery and attachments in real turns:
a live server, the scripted provider through the real SDK, a real WebSocket client."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from numi.chat.context import LEFT_OUT_QUESTION
from numi.testing import Scenario
from turn_support import db_rows, make_chat, of_type, turn_server_env, types

from context_support import minimal_pdf, png, upload

# A small assumed window so that a few kilobytes of history cross the threshold:
# 2000 tokens * 0.5 = 1000 estimated tokens, about 4000 characters.
SMALL_WINDOW = {
    "NUMI_DEFAULT_CONTEXT_WINDOW": "2000",
    "NUMI_AUTO_COMPACT_FRACTION": "0.5",
    "NUMI_COMPACT_KEEP_MESSAGES": "2",
}


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(**turn_server_env(**SMALL_WINDOW))
    yield started
    started.stop()


def db_exec(server, sql: str, *params) -> int:
    path = server.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path, timeout=10) as connection:
        cursor = connection.execute(sql, params)
        return cursor.lastrowid


def seed(server, chat_id: str, turns: int, size: int = 20) -> list[int]:
    """Write `turns` question/answer pairs straight into the server's database."""
    ids = []
    for n in range(turns):
        ids.append(
            db_exec(
                server,
                "INSERT INTO messages (chat_id, role, content, created_at) VALUES (?, 'user', ?, CURRENT_TIMESTAMP)",
                chat_id,
                f"question {n} " + "q" * size,
            )
        )
        ids.append(
            db_exec(
                server,
                "INSERT INTO messages (chat_id, role, content, created_at) VALUES (?, "
                "'assistant', ?, CURRENT_TIMESTAMP)",
                chat_id,
                f"answer {n} " + "a" * size,
            )
        )
    return ids


def sent_text(request) -> str:
    return json.dumps(request.body["messages"])


def count_messages(server, chat_id: str) -> int:
    return db_rows(server, "SELECT COUNT(*) FROM messages WHERE chat_id = ?", chat_id)[0][0]


# --- compaction by API ------------------------------------------------------------------------


def test_compact_by_api_stores_a_checkpoint_with_counts(server, api, scripted, sockets):
    chat = make_chat(api, scripted)
    ids = seed(server, chat["id"], 6)
    scripted.enqueue(Scenario().text("SUMMARY: six questions about q.", chunks=2))
    status, checkpoint = api.post(f"/api/session/{chat['id']}/compact")
    assert status == 201, checkpoint
    assert checkpoint["through_message_id"] == ids[9]  # the last two messages are kept
    assert checkpoint["messages_before"] == 12 and checkpoint["messages_after"] == 4
    assert checkpoint["tokens_before"] > checkpoint["tokens_after"] > 0
    summariser = scripted.requests[-1].body
    assert (
        "question 0" in sent_text(scripted.requests[-1])
        and "compact" in summariser["messages"][0]["content"].lower()
    )
    rows = db_rows(
        server,
        "SELECT summary, messages_before, messages_after FROM checkpoints WHERE chat_id = ?",
        chat["id"],
    )
    assert rows == [("SUMMARY: six questions about q.", 12, 4)]
    assert count_messages(server, chat["id"]) == 12, "the transcript stays whole"

    status, context = api.get(f"/api/session/{chat['id']}/context")
    assert status == 200
    contents = [m["content"] for m in context["messages"]]
    assert "SUMMARY: six questions about q." in contents[0]
    assert contents[2:] == [f"question 5 {'q' * 20}", f"answer 5 {'a' * 20}"]
    assert not any(k.startswith("_") for m in context["messages"] for k in m)
    status, info = api.get(f"/api/session/{chat['id']}/context_info")
    assert status == 200 and info["checkpoint"]["id"] and info["messages_included"] == 2
    assert info["context_window"] == 2000 and info["window_assumed"] is True

    # The next turn sends the summary, not the summarised messages.
    ws = sockets(chat["id"])
    ws.send(type="send", message="and now?")
    assert of_type(ws.events_until("turn_end"), "done")
    text = sent_text(scripted.requests[-1])
    assert "SUMMARY: six questions" in text and "question 0" not in text and "question 5" in text

    # The transcript page shows the divider, expandable to the summary.
    import urllib.request

    page_request = urllib.request.Request(server.url + f"/c/{chat['id']}", headers=server.headers)
    html = urllib.request.urlopen(page_request).read().decode()
    assert "Earlier messages summarised" in html and "six questions about q." in html


def test_compact_with_nothing_older_is_refused(api, scripted):
    chat = make_chat(api, scripted)
    status, body = api.post(f"/api/session/{chat['id']}/compact")
    assert status == 409 and body["error"]["code"] == "nothing_to_compact"
    assert scripted.requests == []
    status, body = api.post("/api/session/not-a-chat/compact")
    assert status == 404


# --- auto-compaction and trimming -----------------------------------------------------------


def test_auto_compaction_starts_above_the_threshold_only(server, api, scripted, sockets):
    below = make_chat(api, scripted)
    seed(server, below["id"], 3, size=100)  # ~700 characters: far below 1000 tokens
    ws = sockets(below["id"])
    ws.send(type="send", message="small")
    events = ws.events_until("turn_end")
    assert "context_compacting" not in types(events) and len(scripted.requests) == 1

    scripted.reset()
    above = make_chat(api, scripted)
    seed(server, above["id"], 6, size=400)  # ~5000 characters: above the threshold
    scripted.enqueue(
        Scenario().text("AUTO SUMMARY", chunks=1), Scenario().text("Answer after compaction.")
    )
    ws = sockets(above["id"])
    ws.send(type="send", message="big")
    events = ws.events_until("turn_end")
    names = types(events)
    assert (
        names.index("accepted")
        < names.index("context_compacting")
        < names.index("context_compacted")
        < names.index("content")
    )
    compacted = of_type(events, "context_compacted")[0]["data"]
    assert compacted["ok"] and compacted["reason"] == "auto"
    assert (
        compacted["messages_before"] == 13
        and compacted["tokens_before"] > compacted["tokens_after"]
    )
    assert len(scripted.requests) == 2
    answer_request = sent_text(scripted.requests[1])
    assert (
        "AUTO SUMMARY" in answer_request
        and "question 0" not in answer_request
        and "big" in answer_request
    )
    assert (
        db_rows(server, "SELECT COUNT(*) FROM checkpoints WHERE chat_id = ?", above["id"])[0][0]
        == 1
    )


def test_without_auto_compaction_older_turns_are_trimmed_from_the_request(
    server, api, scripted, sockets
):
    chat = make_chat(api, scripted, settings={"auto_compact": False})
    seed(server, chat["id"], 6, size=400)
    ws = sockets(chat["id"])
    ws.send(type="send", message="trim please")
    events = ws.events_until("turn_end")
    assert "context_compacting" not in types(events)
    trimmed = of_type(events, "context_trimmed")[0]["data"]
    assert trimmed["before"] == 13 and trimmed["after"] < trimmed["before"]
    assert (
        trimmed["dropped"] == trimmed["before"] - trimmed["after"]
        and trimmed["reason"] == "context_window"
    )
    assert trimmed["tokens_before"] > 1000 >= trimmed["tokens_after"] > 0
    request = scripted.requests[-1].body["messages"]
    # system + omitted notice pair + the kept turns: the counts leave the notice out
    assert len(request) == 1 + 2 + trimmed["after"]
    assert "left out" in request[1]["content"] and request[-1]["content"] == "trim please"
    assert "question 0" not in sent_text(scripted.requests[-1])
    answer = api.history(chat["id"])[-1]
    assert answer["meta"]["metrics"]["context_trimmed"] == {
        k: trimmed[k] for k in ("before", "after", "tokens_before", "tokens_after")
    }
    assert count_messages(server, chat["id"]) == 14, "trimming never touches the transcript"


def test_trimming_one_turn_counts_saved_messages_only(server, api, scripted, sockets):
    # 3 seeded turns + the question = 7 saved messages; one turn more than fits.
    chat = make_chat(api, scripted, settings={"auto_compact": False})
    seed(server, chat["id"], 3, size=875)  # 175 tokens a message, by the estimate
    ws = sockets(chat["id"])
    ws.send(type="send", message="one turn too many")
    trimmed = of_type(ws.events_until("turn_end"), "context_trimmed")[0]["data"]
    assert (trimmed["before"], trimmed["after"]) == (7, 5)


def test_the_history_row_limit_reports_context_trimmed(live_server_factory, scripted):
    from turn_support import Api, Socket

    limited = live_server_factory(**turn_server_env(PROMPT_MAX_HISTORY_MESSAGES="4"))
    api = Api(limited.url)
    chat = make_chat(api, scripted)
    seed(limited, chat["id"], 4, size=40)  # 8 saved + the question: 4 fit
    ws = Socket(limited, chat["id"])
    try:
        ws.send(type="send", message="what is left?")
        events = ws.events_until("turn_end")
    finally:
        ws.close()
    trimmed = of_type(events, "context_trimmed")
    assert len(trimmed) == 1
    data = trimmed[0]["data"]
    assert data["reason"] == "history_limit"
    assert (data["before"], data["after"]) == (9, 3)  # a turn cut by the limit goes whole
    assert data["tokens_before"] > data["tokens_after"] > 0
    assert "left out" in sent_text(scripted.requests[-1])


# --- context_overflow recovery ----------------------------------------------------------------


def test_context_overflow_compacts_once_and_retries(server, api, scripted, sockets):
    chat = make_chat(api, scripted)
    seed(server, chat["id"], 3)
    scripted.enqueue(
        Scenario.http_error(400, "context_length"),
        Scenario().text("OVERFLOW SUMMARY"),
        Scenario().text("Recovered answer."),
    )
    ws = sockets(chat["id"])
    ws.send(type="send", message="overflow me")
    events = ws.events_until("turn_end")
    assert of_type(events, "context_compacted")[0]["data"]["reason"] == "overflow"
    assert of_type(events, "done") and "error" not in types(events)
    assert len(scripted.requests) == 3
    assert "OVERFLOW SUMMARY" in sent_text(scripted.requests[2])
    assert api.history(chat["id"])[-1]["content"] == "Recovered answer."


def test_context_overflow_never_loops(server, api, scripted, sockets):
    chat = make_chat(api, scripted)
    seed(server, chat["id"], 3)
    scripted.enqueue(
        Scenario.http_error(400, "context_length"),
        Scenario().text("S"),
        Scenario.http_error(400, "context_length"),
        Scenario.http_error(400, "context_length"),
        Scenario.http_error(400, "context_length"),
    )
    ws = sockets(chat["id"])
    ws.send(type="send", message="still too big")
    events = ws.events_until("turn_end")
    assert of_type(events, "error")[-1]["data"]["code"] == "context_overflow"
    assert len(scripted.requests) == 3, "one compaction, one retry, then the error"


def test_context_overflow_without_compaction_trims_and_retries(server, api, scripted, sockets):
    chat = make_chat(api, scripted, settings={"auto_compact": False})
    seed(server, chat["id"], 4)
    scripted.enqueue(Scenario.http_error(400, "context_length"), Scenario().text("Fits now."))
    ws = sockets(chat["id"])
    ws.send(type="send", message="overflow again")
    events = ws.events_until("turn_end")
    assert of_type(events, "context_trimmed") and of_type(events, "done")
    assert len(scripted.requests) == 2
    assert len(scripted.requests[1].body["messages"]) < len(scripted.requests[0].body["messages"])
    assert scripted.requests[1].body["messages"][-1]["content"] == "overflow again"


# --- attachments --------------------------------------------------------------------------------


def test_documents_reach_the_model_as_text(server, api, scripted, sockets):
    chat = make_chat(api, scripted)
    status, body = upload(
        server.url, "report.pdf", minimal_pdf("Revenue grew 17 percent"), "application/pdf"
    )
    assert status == 201, body
    pdf_id = body["attachments"][0]["id"]
    status, body = upload(server.url, "main.py", b"def answer():\n    return 42\n", "text/x-python")
    code_id = body["attachments"][0]["id"]
    ws = sockets(chat["id"])
    ws.send(type="send", message="read these", attachments=[pdf_id, str(code_id)])
    assert of_type(ws.events_until("turn_end"), "done")
    user = scripted.requests[-1].body["messages"][-1]
    text = json.dumps(user["content"])
    assert "Revenue grew 17 percent" in text and "return 42" in text and "read these" in text
    saved = api.history(chat["id"])[0]
    assert saved["content"] == "read these"
    assert [p for p in saved["content_parts"] if p["type"] == "attachment"] == [
        {"type": "attachment", "id": pdf_id},
        {"type": "attachment", "id": code_id},
    ]


def test_missing_or_foreign_attachment_fails_the_send_and_saves_nothing(
    server, api, scripted, sockets
):
    chat = make_chat(api, scripted)
    other = db_exec(
        server,
        "INSERT INTO users (username, password_hash, is_admin, created_at) VALUES ('mallory', "
        "'x', 0, CURRENT_TIMESTAMP)",
    )
    status, body = upload(server.url, "mine.txt", b"mine", "text/plain")
    mine = body["attachments"][0]
    foreign = db_exec(
        server,
        "INSERT INTO attachments (user_id, filename, mime, size, sha256, storage_path, created_at) "
        "VALUES (?, 'theirs.txt', 'text/plain', 4, ?, ?, CURRENT_TIMESTAMP)",
        other,
        mine["sha256"],
        f"uploads/{mine['sha256'][:2]}/{mine['sha256']}",
    )
    ws = sockets(chat["id"])
    ws.send(type="send", message="with a foreign file", attachments=[mine["id"], foreign])
    error = ws.receive()
    assert error["type"] == "error" and error["data"]["code"] == "attachment_missing"
    # The file gone from disk: refused the same way.
    path = Path(server.data_dir) / "uploads" / mine["sha256"][:2] / mine["sha256"]
    os.remove(path)
    ws.send(type="send", message="with a missing file", attachments=[mine["id"]])
    error = ws.receive()
    assert error["type"] == "error" and error["data"]["code"] == "attachment_missing"
    status, body = api.post(
        "/api/chat_stream", {"session": chat["id"], "message": "sse", "attachments": [foreign]}
    )
    assert status == 404 and body["error"]["code"] == "attachment_missing"
    assert count_messages(server, chat["id"]) == 0
    assert scripted.requests == []


def test_image_is_refused_for_a_model_that_cannot_see(server, api, scripted, sockets):
    chat = make_chat(api, scripted, model="fake-model")  # unknown model: no vision
    status, body = upload(server.url, "photo.png", png(40, 30), "image/png")
    assert status == 201
    ws = sockets(chat["id"])
    ws.send(type="send", message="what is this?", attachments=[body["attachments"][0]["id"]])
    events = ws.events_until("turn_end")
    error = of_type(events, "error")[0]["data"]
    assert error["code"] == "model_cannot_see" and "fake-model" in error["message"]
    assert "accepted" not in types(events)
    assert count_messages(server, chat["id"]) == 0 and scripted.requests == []


def test_image_reaches_a_vision_model_and_no_data_url_is_stored(server, api, scripted, sockets):
    chat = make_chat(api, scripted, model="gpt-4o", name="scripted-vision")
    status, body = upload(server.url, "big.png", png(2400, 1200), "image/png")
    image_id = body["attachments"][0]["id"]
    ws = sockets(chat["id"])
    ws.send(type="send", message="describe", attachments=[image_id])
    assert of_type(ws.events_until("turn_end"), "done")
    content = scripted.requests[-1].body["messages"][-1]["content"]
    image_parts = [p for p in content if p["type"] == "image_url"]
    assert len(image_parts) == 1 and image_parts[0]["image_url"]["url"].startswith(
        "data:image/png;base64,"
    )
    import base64
    import io
    from PIL import Image

    sent = Image.open(
        io.BytesIO(base64.b64decode(image_parts[0]["image_url"]["url"].split(",", 1)[1]))
    )
    assert max(sent.size) == 1568, "downscaled to NUMI_IMAGE_MAX_SIDE"
    # No data URL (nor base64 image bytes) anywhere in the messages table.
    for row in db_rows(server, "SELECT * FROM messages"):
        for value in row:
            if isinstance(value, str):
                assert (
                    "data:image" not in value and "base64" not in value and "iVBORw0" not in value
                )


# --- a long chat ------------------------------------------------------------------------------


def test_a_2000_message_chat_sends_a_bounded_well_formed_request(server, api, scripted, sockets):
    chat = make_chat(api, scripted, model="gpt-4o", name="scripted-vision")  # known 128k window
    path = server.database_url.removeprefix("sqlite:///")
    rows = []
    for n in range(400):  # 5 rows per turn (question, tool call, result, two answers) x 400 = 2000
        call = json.dumps(
            [{"id": f"c{n}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]
        )
        rows += [
            ("user", f"question {n}", None, None),
            ("assistant", "", call, None),
            ("tool", f"result {n}", None, f"c{n}"),
            ("assistant", f"answer {n}", None, None),
            ("assistant", f"more {n}", None, None),
        ]
    with sqlite3.connect(path, timeout=10) as connection:
        connection.executemany(
            "INSERT INTO messages (chat_id, role, content, tool_calls_json, tool_call_id, created_at) "
            "VALUES (?, ?, ?, ?, ?, CURRENT_TIMESTAMP)",
            [(chat["id"], *row) for row in rows],
        )
    assert count_messages(server, chat["id"]) == 2000
    for turn in range(2):
        ws = sockets(chat["id"])
        ws.send(type="send", message=f"turn {turn}")
        assert of_type(ws.events_until("turn_end"), "done")
        ws.close()
        messages = scripted.requests[-1].body["messages"]
        # system + notice pair + at most PROMPT_MAX_HISTORY_MESSAGES saved rows; the rows'
        # two answers in a row are kept apart by a placeholder question, which is no row.
        saved = [m for m in messages if m["content"] != LEFT_OUT_QUESTION]
        assert len(saved) <= 200 + 3
        roles = [m["role"] for m in messages]
        assert all(pair != ("assistant", "assistant") for pair in zip(roles, roles[1:])), roles
        assert messages[0]["role"] == "system" and "left out" in messages[1]["content"]
        assert messages[3]["role"] == "user", "the kept history starts with a whole turn"
        calls = {c["id"] for m in messages for c in m.get("tool_calls") or ()}
        results = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
        assert calls == results and calls, (
            "every tool call has its result and no result is orphaned"
        )
        assert messages[-1]["content"] == f"turn {turn}"
