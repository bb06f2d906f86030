"""The privacy gateway and prompt caching in real turns (issue 41). On all three wire
protocols, the requests
the scripted provider recorded carry none of the raw values, wherever they came from (the
chat's system prompt, the project's instructions, a memory, the question, an attached
file, an earlier tool call and its result, the history), while the user and the tools see
real values and the saved transcript holds the user's real text. A live `numi serve`, the
real SDKs, a real WebSocket client. Prompt caching: Anthropic requests carry cache_control
breakpoints (at most four, after the system prompt, at the previous turn's end and at the
request's end) unless the endpoint turns them off, and an answer shows the tokens read
from the cache and what they saved."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from numi.testing import Scenario

from turn_support import (
    make_chat,
    of_type,
    streamed_answer,
    turn_server_env,
    upload_attachment,
    wait_until,
)

EMAIL = "jane.roe@example.com"
PHONE = "+49 30 1234567"
IBAN = "DE89 3704 0044 0532 0130 00"
CARD = "4111 1111 1111 1111"
KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
NAME = "Jane Roe"
RAW = (EMAIL, PHONE, IBAN, CARD, KEY, NAME, "1234567", "4111")


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(**turn_server_env())
    yield started
    started.stop()


def private_chat(server, api, scripted, kind: str) -> dict:
    """A chat whose request carries a raw value in every part: the chat's prompt, the
    project's instructions and a memory; the endpoint redacts, with the user's word."""
    chat = make_chat(
        api,
        scripted,
        kind=kind,
        name=f"private-{kind}",
        settings={"system_prompt": f"The user's address is {EMAIL}.", "tools": ["echo"]},
    )
    status, body = api.call(
        "PATCH",
        f"/api/endpoints/{chat['endpoint']['id']}",
        {"redaction": {"enabled": True, "words": [{"text": NAME, "label": "NAME"}]}},
    )
    assert status == 200 and body["redaction"]["enabled"] is True, body
    status, project = api.post(
        "/api/projects", {"name": f"Clients {kind}", "instructions": f"Call back on {PHONE}."}
    )
    assert status == 201, project
    status, _ = api.call("PATCH", f"/api/session/{chat['id']}", {"project_id": project["id"]})
    assert status == 200
    assert api.call("PATCH", "/api/preferences", {"memory": True})[0] == 200
    status, _ = api.post("/api/memories", {"text": f"My IBAN is {IBAN} ({kind})"})
    assert status == 201
    return chat


def leaked(body) -> list[str]:
    text = json.dumps(body, ensure_ascii=False)
    return [raw for raw in RAW if raw in text]


@pytest.mark.parametrize("kind", ["openai_chat", "openai_responses", "anthropic"])
def test_no_raw_value_leaves_and_the_user_sees_real_values(server, api, scripted, sockets, kind):
    chat = private_chat(server, api, scripted, kind)
    attachment = upload_attachment(
        server.url, "card.txt", f"Card on file: {CARD}\n".encode(), "text/plain", server.token
    )
    # The model calls a tool with placeholders, then answers with them, one character a
    # chunk: every placeholder arrives split at every position.
    answer = "Sent to [EMAIL_1] for [NAME_1] (card [CARD_1])."
    scripted.enqueue(
        Scenario().tool_call("echo", {"to": "[EMAIL_1]", "who": "[NAME_1]"}),
        Scenario().text(answer, chunks=len(answer)),
    )
    ws = sockets(chat["id"])
    ws.send(
        type="send",
        message=f"Please mail {NAME}, my key is {KEY}.",
        attachments=[attachment],
        request_id=f"{kind}-1",
    )
    events = ws.events_until("turn_end")

    assert of_type(events, "done"), events
    first, second = scripted.requests[-2:]
    assert leaked(first.body) == [] and leaked(second.body) == []
    sent = json.dumps(first.body)
    for placeholder in ("[EMAIL_1]", "[PHONE_1]", "[IBAN_1]", "[NAME_1]", "[SECRET_1]", "[CARD_1]"):
        assert placeholder in sent, placeholder
    shown = f"Sent to {EMAIL} for {NAME} (card {CARD})."
    assert streamed_answer(events) == shown
    history = api.history(chat["id"])
    question, call, result, final = history[-4:]
    assert question["content"] == f"Please mail {NAME}, my key is {KEY}."
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {"to": EMAIL, "who": NAME}
    assert EMAIL in result["content"] and NAME in result["content"]  # the tool saw real values
    assert final["content"] == shown
    # The answers' info: the items each request carried replaced, by label.
    assert final["meta"]["metrics"]["redacted"]["by_label"]["EMAIL"] >= 3  # prompt, call, result
    assert call["meta"]["metrics"]["redacted"]["items"] >= 6

    # The next turn: the history goes out redacted with the same placeholders.
    scripted.enqueue(Scenario().text("Done."))
    ws.send(type="send", message=f"Thanks! Copy {EMAIL} too.", request_id=f"{kind}-2")
    ws.events_until("turn_end")
    third = scripted.requests[-1].body
    assert leaked(third) == []
    assert set(re.findall(r"\[EMAIL_\d+\]", json.dumps(third))) == {"[EMAIL_1]"}


def test_a_local_endpoint_sends_real_values_until_redaction_is_turned_on(
    server, api, scripted, sockets
):
    chat = make_chat(api, scripted, name="local-plain")
    assert chat["endpoint"]["redaction"] == {
        "enabled": False,
        "automatic": True,
        "outside": False,
        "rules": ["secret", "email", "iban", "card", "ip", "phone"],
        "words": [],
        "patterns": [],
    }
    scripted.enqueue(Scenario().text("ok"))
    ws = sockets(chat["id"])
    ws.send(type="send", message=f"Mail {EMAIL}", request_id="local-1")
    ws.events_until("turn_end")
    assert EMAIL in json.dumps(scripted.requests[-1].body)
    assert "redacted" not in api.history(chat["id"])[-1]["meta"]["metrics"]


@pytest.mark.parametrize(
    "redaction, code",
    [
        ({"patterns": [{"pattern": "(a+)+$", "label": "X"}]}, "redaction_pattern_slow"),
        ({"patterns": [{"pattern": "[", "label": "X"}]}, "redaction_pattern_invalid"),
        ({"rules": ["everything"]}, "invalid_redaction"),
    ],
)
def test_a_bad_redaction_setting_is_refused_and_changes_nothing(
    server, api, scripted, redaction, code
):
    chat = make_chat(api, scripted, name="refusing")
    endpoint = f"/api/endpoints/{chat['endpoint']['id']}"
    status, body = api.call("PATCH", endpoint, {"redaction": redaction, "name": "renamed"})
    assert status == 400 and body["error"]["code"] == code, body
    _, listed = api.get("/api/endpoints")
    (kept,) = [e for e in listed["endpoints"] if e["id"] == chat["endpoint"]["id"]]
    assert kept["name"] == "refusing" and kept["redaction"]["patterns"] == []


def cache_marks(body: dict) -> list[str]:
    """Where a request body asks for caching: "system", "tool", or "message <i>"."""
    marks = ["system" for block in body.get("system") or [] if "cache_control" in block]
    marks += ["tool" for tool in body.get("tools") or [] if "cache_control" in tool]
    for index, message in enumerate(body["messages"]):
        marks += [f"message {index}" for block in message["content"] if "cache_control" in block]
    return marks


def test_anthropic_requests_ask_for_the_cache_and_answers_show_what_it_saved(
    server, api, scripted, sockets
):
    chat = make_chat(
        api,
        scripted,
        kind="anthropic",
        model="claude-cached",
        name="cached",
        settings={"system_prompt": "Be brief. " * 50, "tools": ["echo"]},
    )
    assert chat["endpoint"]["prompt_caching"] is True
    status, _ = api.post(
        "/api/usage/prices", {"model": "claude-cached", "input_per_mtok": 3, "output_per_mtok": 15}
    )
    assert status == 200
    ws = sockets(chat["id"])
    for turn in (1, 2):
        scripted.enqueue(Scenario().text(f"Answer {turn}. " * 20).usage(None, 40))
        ws.send(type="send", message=f"Question {turn}?", request_id=f"cached-{turn}")
        ws.events_until("turn_end")
    first, second = (request.body for request in scripted.requests[-2:])
    assert cache_marks(first) == ["system", "message 0"]
    # Turn 2: [question 1, answer 1, question 2]; answer 1 ends the prefix turn 1 wrote.
    assert cache_marks(second) == ["system", "message 1", "message 2"]
    answer = api.history(chat["id"])[-1]
    cached = answer["meta"]["usage"]["cached_input_tokens"]
    assert 0 < cached < answer["meta"]["usage"]["input_tokens"]  # the newest question is new
    metrics = answer["meta"]["metrics"]
    assert metrics["cached_tokens"] == cached
    assert metrics["cache_saved"] == round(cached / 1e6 * 3 * 0.9, 6)

    # The context panel expects the next request's whole history from the cache.
    _, info = api.get(f"/api/session/{chat['id']}/context_info")
    assert info["cache"]["expected_tokens"] == info["estimated_tokens"]
    # Within a rounding step: the product multiplies by (1 - 0.9), a hair under 0.1.
    expected = info["estimated_tokens"] / 1e6 * 3 * 0.1
    assert info["cache"]["estimated_cost"] == pytest.approx(expected, abs=1e-6)
    # Per part: each is expected from the cache, and the last answer's cached tokens lie
    # over them in the order Anthropic reads them: the tools, the system prompt, the rest.
    assert info["cache"]["last_served_tokens"] == cached
    _, context = api.get(f"/api/session/{chat['id']}/context")
    parts = {part["kind"]: part for part in context["parts"]}
    assert all(part["cache"]["expected"] == (part["tokens"] > 0) for part in parts.values())
    served = {kind: part["cache"]["served_tokens"] for kind, part in parts.items()}
    assert sum(served.values()) == cached
    assert served["tools"] == parts["tools"]["tokens"] > 0  # first in the prefix, read whole
    html = panel_html(server, api, chat["id"])
    assert html.count('class="part-cache" data-expected="true"') == sum(
        1 for part in parts.values() if part["tokens"]
    )
    assert f"The last answer's request read {cached:,} tokens from it." in html
    _, usage = api.get("/api/usage?group=model&period=today")
    (row,) = [r for r in usage["rows"] if r["key"] == "claude-cached"]
    assert row["cached_tokens"] == cached  # turn 1 wrote the cache, turn 2 read it
    assert row["saved"] == metrics["cache_saved"]

    status, _ = api.call(
        "PATCH", f"/api/endpoints/{chat['endpoint']['id']}", {"prompt_caching": False}
    )
    assert status == 200
    scripted.enqueue(Scenario().text("Uncached.").usage(None, 5))
    ws.send(type="send", message="Question 3?", request_id="cached-3")
    ws.events_until("turn_end")
    assert cache_marks(scripted.requests[-1].body) == []
    assert "cached_input_tokens" not in api.history(chat["id"])[-1]["meta"]["usage"]


def test_a_compaction_summary_request_leaves_redacted_and_its_summary_is_restored(
    server, api, scripted, sockets
):
    chat = make_chat(api, scripted, name="compacting")
    api.call("PATCH", f"/api/endpoints/{chat['endpoint']['id']}", {"redaction": {"enabled": True}})
    ws = sockets(chat["id"])
    for turn in range(3):
        scripted.enqueue(Scenario().text(f"Noted {turn}."))
        ws.send(type="send", message=f"Turn {turn}: mail {EMAIL}", request_id=f"compact-{turn}")
        ws.events_until("turn_end")
    scripted.enqueue(Scenario().text("The user asked to mail [EMAIL_1] twice.", chunks=9))
    status, checkpoint = api.post(f"/api/session/{chat['id']}/compact")
    assert status == 201, checkpoint
    assert leaked(scripted.requests[-1].body) == []
    assert "[EMAIL_1]" in json.dumps(scripted.requests[-1].body)
    assert checkpoint["summary"] == f"The user asked to mail {EMAIL} twice."


@pytest.mark.parametrize("kind", ["openai_chat", "anthropic"])
def test_a_value_sent_as_is_once_is_redacted_again_in_the_next_request(
    server, api, scripted, sockets, kind
):
    chat = make_chat(api, scripted, kind=kind, name=f"exempt-{kind}")
    status, _ = api.call(
        "PATCH", f"/api/endpoints/{chat['endpoint']['id']}", {"redaction": {"enabled": True}}
    )
    assert status == 200
    support = "Support@Example.org"  # exempted as the panel marked it, matched in any case
    ws = sockets(chat["id"])
    scripted.enqueue(Scenario().text("Noted."))
    ws.send(
        type="send",
        message=f"Write to {support.lower()}, not {EMAIL}.",
        exempt=[support],
        request_id=f"exempt-{kind}-1",
    )
    assert of_type(ws.events_until("turn_end"), "done")
    once = json.dumps(scripted.requests[-1].body)
    assert support.lower() in once  # let through, this once
    assert EMAIL not in once and "[EMAIL_1]" in once  # the other address still replaced

    scripted.enqueue(Scenario().text("Again."))
    ws.send(type="send", message="And once more.", request_id=f"exempt-{kind}-2")
    assert of_type(ws.events_until("turn_end"), "done")
    after = json.dumps(scripted.requests[-1].body)
    # Not remembered: the history's copy of it is replaced now, by a placeholder of its own.
    assert support.lower() not in after and EMAIL not in after
    assert {"[EMAIL_1]", "[EMAIL_2]"} <= set(re.findall(r"\[EMAIL_\d+\]", after))
    assert api.history(chat["id"])[0]["content"] == f"Write to {support.lower()}, not {EMAIL}."

    ws.send(type="send", message="Bad.", exempt="everything", request_id=f"exempt-{kind}-3")
    [refusal] = of_type(ws.events_until("error"), "error")
    assert refusal["data"]["code"] == "invalid_exempt"


def queued_ack(ws) -> dict:
    """This client's `queued` acknowledgment (the chat's other events may come first)."""
    while True:
        event = ws.receive()
        if event["type"] == "queued":
            return event["data"]
        assert not (event["type"] == "error" and event["turn_id"] is None), event


def test_a_queued_follow_up_keeps_its_send_as_is_once_for_its_own_request_only(
    server, api, scripted, sockets
):
    """A send's `exempt` list survives the queue: sent while a turn runs, it applies when
    that follow-up's turn comes, to its request only, not to the follow-up queued after it
    (nor to the turn that was running)."""
    chat = make_chat(api, scripted, name="exempt-queued")
    status, _ = api.call(
        "PATCH", f"/api/endpoints/{chat['endpoint']['id']}", {"redaction": {"enabled": True}}
    )
    assert status == 200
    support = "support@example.org"
    ws = sockets(chat["id"])
    scripted.enqueue(Scenario().text("Working.").stall())
    ws.send(type="send", message=f"First, about {support}.", request_id="exq-1")
    ws.events_until("content")
    scripted.enqueue(Scenario().text("Noted."), Scenario().text("Again."))
    ws.send(
        type="send",
        message=f"Write to {support}, not {EMAIL}.",
        exempt=[support],
        request_id="exq-2",
        queue=True,
    )
    assert queued_ack(ws)["request_id"] == "exq-2"
    ws.send(type="send", message="And once more.", request_id="exq-3", queue=True)
    assert queued_ack(ws)["request_id"] == "exq-3"
    scripted.release()
    wait_until(lambda: len(api.history(chat["id"])) == 6, what="both follow-ups answered")

    def request_ending_with(text: str) -> str:
        [body] = [
            json.dumps(r.body)
            for r in scripted.requests
            if r.body and text in json.dumps(r.body["messages"][-1])
        ]
        return body

    running = request_ending_with("First, about ")
    assert support not in running and "[EMAIL_1]" in running  # the send before: redacted
    once = request_ending_with("Write to ")
    assert f"Write to {support}, not [EMAIL_" in once  # let through in its own request
    assert EMAIL not in once
    after = request_ending_with("And once more.")
    assert support not in after and EMAIL not in after  # and in no later one


def panel_html(server, api, chat_id: str) -> str:
    """The context panel as the page loads it (HTMX), on the live server."""
    request = urllib.request.Request(
        f"{server.url}/c/{chat_id}/context_panel", headers={"HX-Request": "true", **api.auth}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def test_the_panel_marks_what_an_attached_files_name_and_text_will_have_replaced(
    server, api, scripted, sockets
):
    chat = make_chat(api, scripted, name="attached-private")
    status, _ = api.call(
        "PATCH",
        f"/api/endpoints/{chat['endpoint']['id']}",
        {"redaction": {"enabled": True, "words": [{"text": "Acme", "label": "CLIENT"}]}},
    )
    assert status == 200
    attachment = upload_attachment(
        server.url,
        "Acme contract.txt",
        f"Pay <b>{IBAN}</b>, then mail {EMAIL}.\n".encode(),
        "text/plain",
        server.token,
    )
    scripted.enqueue(Scenario().text("Read it."))
    ws = sockets(chat["id"])
    ws.send(type="send", message="See the file.", attachments=[attachment], request_id="att-1")
    assert of_type(ws.events_until("turn_end"), "done")
    assert leaked(scripted.requests[-1].body) == []

    html = panel_html(server, api, chat["id"])
    start = html.index('data-kind="attachments"')
    part = html[start : html.index("</li>\n    \n", start)]
    assert "3 to replace" in part  # the name's word, the IBAN and the address
    for label, value in (("CLIENT", "Acme"), ("IBAN", IBAN), ("EMAIL", EMAIL)):
        assert f'<mark class="redact" data-label="{label}">' in part
        assert f'data-value="{value}"' in part
    assert "&lt;b&gt;" in part and "<b>" not in part  # the file's text escaped
    assert 'class="redacted-inline"' in part  # the name marked within its line
