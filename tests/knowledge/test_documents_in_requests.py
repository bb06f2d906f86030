"""Documents used without being asked (issue 37): a chat in a project with files carries the
passages that answer its question in its system context, on all three wire protocols
(recorded by the scripted provider), with no tool call; "when the model asks" and "never"
leave them out; the context panel lists them as their own part with score and reason, and
a passage left out there gives its place to the next; the answer is saved with the
passages as numbered sources, each opening at its passage (issue 37, citations).
Live `numi serve` (its default embedding model: the local WordLlama)."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request

import pytest

from numi.testing import Scenario
from turn_support import (
    Api,
    Socket,
    make_chat,
    run_turn,
    turn_server_env,
    upload,
    wait_until,
)

MANUAL = b"""# Espresso machine manual

## Descaling

Descale the boiler every 200 shots with citric acid dissolved in warm water.

## Grinding

Grind the beans fine, like table salt.
"""
PASSAGE = "Descale the boiler every 200 shots with citric acid"


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(**turn_server_env())
    yield started
    started.stop()


@pytest.fixture(scope="module")
def project(server):
    """A project with the manual as its file, indexed (words and vectors)."""
    api = Api(server.url)
    status, made = api.post("/api/projects", {"name": "Kitchen"})
    assert status == 201, made
    status, uploaded = upload(server.url, "manual.md", MANUAL, "text/markdown")
    assert status == 201, uploaded
    attachment_id = uploaded["attachments"][0]["id"]
    status, added = api.post(f"/api/projects/{made['id']}/files", {"attachment_id": attachment_id})
    assert status == 201, added

    def indexed():
        documents = api.get("/api/documents")[1]["documents"]
        return all(d["status"] == "done" and d["vectors"] == "done" for d in documents) or None

    wait_until(indexed, timeout=60, what="the manual to be indexed")
    return made


def system_of(kind: str, body: dict) -> str:
    """The system context as each protocol carries it."""
    if kind == "anthropic":
        system = body["system"]
        return system if isinstance(system, str) else "\n\n".join(b["text"] for b in system)
    if kind == "openai_responses":
        return body["instructions"]
    [first] = [m for m in body["messages"] if m["role"] == "system"]
    return first["content"]


def chat_in(api, scripted, project, kind: str, **settings) -> dict:
    chat = make_chat(api, scripted, kind=kind, settings=settings or None)
    status, moved = api.call("PATCH", f"/api/session/{chat['id']}", {"project_id": project["id"]})
    assert status == 200, moved
    return chat


@pytest.mark.parametrize("kind", ["openai_chat", "openai_responses", "anthropic"])
def test_the_answering_passage_reaches_every_protocol(server, scripted, project, kind):
    api = Api(server.url)
    chat = chat_in(api, scripted, project, kind)
    scripted.enqueue(Scenario().text("Every 200 shots [1]."))
    events = run_turn(server, chat["id"], "How often should I descale the boiler?", timeout=60)
    system = system_of(kind, scripted.last_request.body)
    assert PASSAGE in system
    assert "[1] manual.md › Espresso machine manual › Descaling" in system
    assert not [e for e in events if e["type"] == "tool_start"], "no tool call was needed"


def test_a_file_sent_earlier_in_the_chat_answers_a_later_question(server, scripted):
    """A chat's own attachment is one of its documents for the turns after it (found
    among the shown questions' parts, most of which carry only their request's metadata)."""
    api = Api(server.url)
    status, uploaded = upload(server.url, "manual.md", MANUAL, "text/markdown")
    assert status == 201, uploaded
    attachment_id = uploaded["attachments"][0]["id"]

    chat = make_chat(api, scripted)
    ws = Socket(server, chat["id"])
    try:
        scripted.enqueue(Scenario().text("Read it."))
        ws.send(type="send", message="Here is the manual.", attachments=[attachment_id])
        ws.events_until("turn_end", timeout=60)
    finally:
        ws.close()

    def indexed():  # the chat's first request asked for it to be indexed
        documents = api.get("/api/documents")[1]["documents"]
        return any(d["id"] == attachment_id and d["status"] == "done" for d in documents) or None

    wait_until(indexed, timeout=60, what="the manual to be indexed")
    for n in range(3):  # questions with no file: parts of their own, no attachment
        scripted.enqueue(Scenario().text("Fine."))
        run_turn(server, chat["id"], f"Small talk {n}.", timeout=60)
    scripted.enqueue(Scenario().text("Every 200 shots [1]."))
    run_turn(server, chat["id"], "How often should I descale the boiler?", timeout=60)
    assert PASSAGE in system_of("openai_chat", scripted.last_request.body)


def test_when_the_model_asks_and_never_leave_the_passages_out(server, scripted, project):
    api = Api(server.url)
    for mode in ("ask", "never"):
        chat = chat_in(api, scripted, project, "openai_chat", use_documents=mode)
        scripted.enqueue(Scenario().text("Ask the manual."))
        run_turn(server, chat["id"], "How often should I descale the boiler?", timeout=60)
        assert PASSAGE not in system_of("openai_chat", scripted.last_request.body), mode
    status, refused = api.call(
        "PATCH", f"/api/session/{chat['id']}", {"settings": {"use_documents": "sometimes"}}
    )
    assert status == 400 and refused["error"]["code"] == "invalid_use_documents"


def test_the_context_panel_lists_the_passages(server, scripted, project):
    api = Api(server.url)
    chat = chat_in(api, scripted, project, "openai_chat")
    scripted.enqueue(Scenario().text("ok"))
    run_turn(server, chat["id"], "descaling the boiler with citric acid", timeout=60)
    status, info = api.get(f"/api/session/{chat['id']}/context?kinds=documents")
    assert status == 200, info
    [part] = info["parts"]
    best = part["items"][0]
    assert best["name"] == "manual.md" and PASSAGE in best["text"]
    # Found by full text, by the local model's vector, and among its best word matches.
    assert best["reason"] == "same words and similar meaning and words close in meaning"
    assert best["score"] > 0
    assert part["tokens"] > 0
    assert PASSAGE in info["system"]


def page(api: Api, path: str, *, htmx: bool = False) -> tuple[int, str]:
    """An HTML page (or with `htmx`, the fragment) of the server, as its owner."""
    headers = {**api.auth, **({"HX-Request": "true"} if htmx else {})}
    request = urllib.request.Request(api.base + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def leave_out(api: Api, chat_id: str, key: str, in_context: str) -> tuple[int, str]:
    """The context panel's Leave out ("0") or Bring back ("1") of a passage (HTMX)."""
    request = urllib.request.Request(
        f"{api.base}/c/{chat_id}/passages/context",
        data=urllib.parse.urlencode({"passage": key, "in_context": in_context}).encode(),
        method="POST",
        headers={"HX-Request": "true", **api.auth},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.read().decode()


def test_the_answer_cites_its_passages_and_each_opens_at_its_passage(server, scripted, project):
    api = Api(server.url)
    chat = chat_in(api, scripted, project, "openai_chat")
    scripted.enqueue(Scenario().text("Every 200 shots [1]."))
    run_turn(server, chat["id"], "How often should I descale the boiler?", timeout=60)
    answer = api.history(chat["id"])[-1]
    first = answer["citation_sources"][0]
    assert first["n"] == 1 and first["url"] is None
    assert first["title"] == "manual.md › Espresso machine manual › Descaling"
    assert isinstance(first["attachment_id"], int) and first["chunk"] >= 0

    source = f"/c/{chat['id']}/messages/{answer['id']}/sources/1"
    status, html = page(api, f"/c/{chat['id']}")
    assert status == 200 and f'href="{source}"' in html  # the marker [1] and the sources list
    status, fragment = page(api, source, htmx=True)
    assert status == 200 and "<html" not in fragment
    assert '<mark class="passage-mark">' in fragment and PASSAGE in fragment
    assert "manual.md" in fragment and "Espresso machine manual › Descaling" in fragment
    status, whole = page(api, source)
    assert status == 200 and "<html" in whole and PASSAGE in whole
    for missing in (f"/c/{chat['id']}/messages/{answer['id']}/sources/99",
                    f"/c/{chat['id']}/messages/{answer['id'] - 1}/sources/1"):  # fmt: skip
        assert page(api, missing)[0] == 404


def test_a_passage_left_out_gives_its_place_to_the_next(server, scripted, project):
    api = Api(server.url)
    chat = chat_in(api, scripted, project, "openai_chat")
    scripted.enqueue(Scenario().text("ok"))
    run_turn(server, chat["id"], "How often should I descale the boiler?", timeout=60)
    [part] = api.get(f"/api/session/{chat['id']}/context?kinds=documents")[1]["parts"]
    best = part["items"][0]
    assert PASSAGE in best["text"]

    status, panel = leave_out(api, chat["id"], best["key"], "0")
    assert status == 200 and "Passages left out (1)" in panel
    assert api.get(f"/api/session/{chat['id']}")[1]["settings"]["left_out_passages"] == [
        best["key"]
    ]
    scripted.enqueue(Scenario().text("ok"))
    run_turn(server, chat["id"], "How often should I descale the boiler?", timeout=60)
    assert PASSAGE not in system_of("openai_chat", scripted.last_request.body)
    assert "Grind the beans fine" in system_of("openai_chat", scripted.last_request.body)
    status, panel = page(api, f"/c/{chat['id']}/context_panel", htmx=True)
    assert "Passages left out (1)" in panel and "Bring back" in panel

    refused = api.call(
        "PATCH", f"/api/session/{chat['id']}", {"settings": {"left_out_passages": ["x"]}}
    )
    assert refused[0] == 400 and refused[1]["error"]["code"] == "invalid_left_out_passages"
    assert leave_out(api, chat["id"], best["key"], "1")[0] == 200
    scripted.enqueue(Scenario().text("ok"))
    run_turn(server, chat["id"], "How often should I descale the boiler?", timeout=60)
    assert PASSAGE in system_of("openai_chat", scripted.last_request.body)


def test_the_panel_marks_what_the_privacy_gateway_replaces_in_each_passage(
    server, scripted, project
):
    """Issue 41: a passage the request carries is marked in the context panel's passage list
    where the endpoint's privacy gateway will replace it, as messages and files are."""
    api = Api(server.url)
    chat = make_chat(api, scripted, name="private-documents")
    status, _ = api.call(
        "PATCH",
        f"/api/endpoints/{chat['endpoint']['id']}",
        {"redaction": {"enabled": True, "words": [{"text": "citric", "label": "INGREDIENT"}]}},
    )
    assert status == 200
    status, moved = api.call("PATCH", f"/api/session/{chat['id']}", {"project_id": project["id"]})
    assert status == 200, moved
    scripted.enqueue(Scenario().text("Every 200 shots [1]."))
    run_turn(server, chat["id"], "How often should I descale the boiler?", timeout=60)
    system = system_of("openai_chat", scripted.last_request.body)
    assert "Descale the boiler every 200 shots with" in system and "citric" not in system

    request = urllib.request.Request(
        f"{server.url}/c/{chat['id']}/context_panel", headers={"HX-Request": "true", **api.auth}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        html = response.read().decode()
    start = html.index('data-kind="documents"')
    part = html[start : html.index("</details>", start)]
    assert "1 to replace" in part
    passage = part[part.index('class="context-passage"') :]
    assert '<mark class="redact" data-label="INGREDIENT">' in passage
    assert 'data-value="citric"' in passage
