"""The home page's composer against a live server: the first question makes the chat and
starts its answer in one step; a refused one leaves no chat behind."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request

from numi.testing import Scenario

from turn_support import make_chat, wait_until


def post_home(server, fields: dict, *, htmx: bool = True) -> tuple[int, dict, str]:
    """POST /chats as the home form does (form-encoded); (status, headers, body)."""
    headers = {**server.headers, "Content-Type": "application/x-www-form-urlencoded"}
    if htmx:
        headers["HX-Request"] = "true"
    request = urllib.request.Request(
        server.url + "/chats",
        data=urllib.parse.urlencode(fields).encode(),
        method="POST",
        headers=headers,
    )

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def chat_ids(api) -> list[str]:
    status, body = api.get("/api/sessions?limit=200")
    assert status == 200, body
    return [c["id"] for c in body["sessions"]]


def history(api, chat_id):
    return [(m["role"], m["content"]) for m in api.history(chat_id)]


def test_the_first_question_makes_the_chat_and_starts_the_answer(server, api, scripted):
    endpoint = make_chat(api, scripted, name="scripted-home")["endpoint"]
    route = f"{endpoint['id']}:fake-model"
    scripted.enqueue(Scenario().text("Hello from the model."))
    status, headers, _ = post_home(
        server, {"route": route, "message": "Hi there", "request_id": "home-1"}
    )
    assert status == 204, headers
    chat_id = headers["HX-Location"].rsplit("/", 1)[1]
    wait_until(
        lambda: (
            history(api, chat_id) == [("user", "Hi there"), ("assistant", "Hello from the model.")]
        ),
        what="the first answer saved",
    )
    assert api.history(chat_id)[0]["request_id"] == "home-1"
    assert scripted.wait_for_requests(1).body["model"] == "fake-model"
    # Without htmx (no script) the same form redirects to the chat.
    scripted.enqueue(Scenario().text("Second chat."))
    status, headers, _ = post_home(server, {"route": route, "message": "Again"}, htmx=False)
    assert status in (302, 303) and headers["Location"].startswith("/c/")
    other = headers["Location"].rsplit("/", 1)[1]
    assert other != chat_id
    wait_until(
        lambda: history(api, other) == [("user", "Again"), ("assistant", "Second chat.")],
        what="the second answer saved",
    )


def test_an_empty_box_is_a_plain_new_chat_reused_by_the_next_send(server, api, scripted):
    endpoint = make_chat(api, scripted, name="scripted-home")["endpoint"]
    route = f"{endpoint['id']}:fake-model"
    status, headers, _ = post_home(server, {"route": route, "message": "   "})
    assert status == 204
    empty = headers["HX-Location"].rsplit("/", 1)[1]
    assert history(api, empty) == []
    scripted.enqueue(Scenario().text("Filled."))
    status, headers, _ = post_home(server, {"route": route, "message": "Now a question"})
    assert headers["HX-Location"].rsplit("/", 1)[1] == empty  # no empty chat left behind
    wait_until(
        lambda: history(api, empty) == [("user", "Now a question"), ("assistant", "Filled.")],
        what="the answer in the reused chat",
    )


def test_a_refused_first_question_leaves_no_chat(server, api, scripted):
    endpoint = make_chat(api, scripted, name="scripted-home")["endpoint"]
    before, asked = chat_ids(api), len(scripted.requests)
    too_long = "x" * 200_001
    for fields, code in (
        ({"route": f"{endpoint['id']}:fake-model", "message": too_long}, "too_long"),
        ({"route": f"{endpoint['id']}:", "message": "No model chosen"}, "no_model"),
    ):
        status, headers, body = post_home(server, fields)
        assert status == 400 and code in body, (status, body[:300])
        assert (
            headers.get("HX-Retarget") == "#toasts"
        )  # shown beside the kept text, not instead of it
        assert chat_ids(api) == before
    assert len(scripted.requests) == asked  # the model was never asked
