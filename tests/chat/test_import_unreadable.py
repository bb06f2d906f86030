"""Conversations an import cannot read (issue 42: "3 unreadable, with why"): left out,
counted and listed with the reason in the API's preview and in the Settings form's preview
step, escaped; the others import. A big export goes through the worker process reading
the file from disk one conversation at a time, zipped or not."""

from __future__ import annotations

import io
import json
import subprocess
import zipfile

import pytest
from fixtures.live_server import numi_command
from import_support import cli_environment, preview_page, run_import

from numi.testing.exports import chatgpt_chain

HOSTILE = '<img src=x onerror="alert(1)">Tax notes'
REASON = "conversations[1].mapping must be an object of message nodes."


def _export(conversations: int = 3, depth: int = 4, text: str = "Step {i}.") -> list[dict]:
    """A ChatGPT export whose second conversation is broken (its mapping is text)."""
    chats = [chatgpt_chain(depth, title=f"Chat {n}", text=text)[0] for n in range(conversations)]
    for n, chat in enumerate(chats):
        chat["conversation_id"] = f"conv-{n}"  # distinct ids: each is a chat of its own
    chats[1] = {"title": HOSTILE, "mapping": "not a tree", "conversation_id": "conv-1"}
    return chats


def test_the_api_preview_lists_what_it_cannot_read_and_the_import_leaves_it_out(client):
    raw = json.dumps(_export()).encode()
    preview = run_import(client, "/api/import?preview=1", data=raw, content_type="application/json")
    assert preview["state"] == "done", preview
    found = preview["result"]["preview"]
    assert (found["chats"], found["messages"], found["unreadable"]) == (2, 8, 1)
    assert found["unreadable_chats"] == [{"index": 1, "title": HOSTILE, "reason": REASON}]
    assert client.get("/api/sessions").get_json()["sessions"] == []

    job = run_import(client, data=raw, content_type="application/json")
    assert job["state"] == "done", job
    assert sorted(chat["title"] for chat in job["result"]["chats"]) == ["Chat 0", "Chat 2"]
    assert job["result"]["unreadable"] == 1
    assert len(client.get("/api/sessions").get_json()["sessions"]) == 2


def test_a_file_none_of_whose_conversations_can_be_read_is_refused_with_why(client):
    broken = [{"title": "A", "mapping": []}, {"title": "B", "mapping": {}}]
    job = run_import(client, json=broken)
    assert job["state"] == "failed" and job["error"]["code"] == "invalid_import", job
    assert job["error"]["message"] == "conversations[0].mapping must be an object of message nodes."
    assert client.get("/api/sessions").get_json()["sessions"] == []


def test_the_forms_preview_step_lists_the_unreadable_escaped(client):
    body = json.dumps(_export()).encode()
    htmx = {"HX-Request": "true"}
    data = {"file": (io.BytesIO(body), "conversations.json"), "step": "preview"}
    response = client.post("/import", data=data, headers=htmx)
    page = preview_page(client, response)
    assert "2 chats, 8 messages from ChatGPT" in page
    assert "1 unreadable, left out" in page and "1 unreadable conversation, and why" in page
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;Tax notes" in page
    assert "<img src=x" not in page
    assert REASON in page
    assert "Import 2 chats<" in page


def test_a_big_zipped_export_is_read_by_the_worker_with_its_unreadable_listed(sqlite_client):
    """A zip, and its entry over the size read in the server's threadpool (256 KB): the
    worker process reads the zip's conversations.json as a stream, twice (check, then
    records)."""
    chats = _export(conversations=12, depth=6, text="Step {i}. " + "words " * 800)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("export/conversations.json", json.dumps(chats))
        archive.writestr("export/chat.html", "<html></html>")
    assert len(json.dumps(chats)) > 256 * 1024
    preview = run_import(
        sqlite_client,
        "/api/import?preview=1",
        data=buffer.getvalue(),
        content_type="application/zip",
    )
    assert preview["state"] == "done", preview
    found = preview["result"]["preview"]
    assert (found["chats"], found["messages"], found["unreadable"]) == (11, 11 * 6, 1)
    assert found["unreadable_chats"][0]["reason"] == REASON

    job = run_import(sqlite_client, data=buffer.getvalue(), content_type="application/zip")
    assert job["state"] == "done", job
    sessions = sqlite_client.get("/api/sessions?limit=100").get_json()["sessions"]
    assert len(job["result"]["chats"]) == 11
    assert HOSTILE not in {s["title"] for s in sessions}


@pytest.mark.slow(reason="a `numi` process starts: seconds on a quiet machine, 20 s at load 20")
def test_numi_import_preview_says_what_it_cannot_read_from_a_pipe(sqlite_app):
    """`numi import --preview -`: the file read from a pipe (not seekable: spooled first),
    each unreadable conversation on a line of its own."""
    env = cli_environment(sqlite_app)
    # A process of its own: the command host's stdin is a seekable buffer, never a pipe.
    run = subprocess.run(
        [*numi_command(), "import", "--preview", "-"],
        input=json.dumps(_export()).encode(),
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.decode().splitlines()
    assert lines[0] == (
        "2 chats, 8 messages from ChatGPT (conversations.json); 0 imported before (skipped "
        "by an import); 1 unreadable. Nothing was written."
    )
    assert lines[1] == f"  unreadable: conversation 2 {HOSTILE!r}: {REASON}"
