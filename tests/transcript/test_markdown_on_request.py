""" "Show as markdown" is bounded (issue 34): past NUMI_MARKDOWN_ON_REQUEST_MAX_CHARS an answer
stays plain (no button, 413 `markdown_too_long`), and one user's renders run one at a time
(another of theirs meanwhile: 429 `markdown_busy`), while another user's render goes ahead."""

from __future__ import annotations

import uuid

import gevent

HTMX = {"HX-Request": "true"}
PARAGRAPH = "Some **bold** text with `code` and *emphasis*.\n\n- item one\n- item _two_\n\n"


def _long(chars: int) -> str:
    # A tag per text: the rendered-HTML cache is per process, across the apps of a test run.
    text = f"{uuid.uuid4().hex}\n\n" + PARAGRAPH * (chars // len(PARAGRAPH) + 1)
    return text[:chars]


def test_an_answer_past_the_bound_stays_plain_with_a_clear_code(multi_app, users, client_a, rows):
    multi_app.config.update(NUMI_MARKDOWN_MAX_CHARS=100, NUMI_MARKDOWN_ON_REQUEST_MAX_CHARS=300)
    chat_id, (_, shorter, _, longer) = rows(
        users["a"].id,
        [("user", "Hi"), ("assistant", _long(300)), ("user", "More"), ("assistant", _long(301))],
    )
    page = client_a.get(f"/c/{chat_id}").get_data(as_text=True)
    assert page.count("Show as markdown") == 1, "only the answer within the bound offers it"
    assert f"/messages/{shorter}/markdown" in page and f"/messages/{longer}/markdown" not in page

    ok = client_a.get(f"/c/{chat_id}/messages/{shorter}/markdown", headers=HTMX)
    assert ok.status_code == 200 and "<strong>bold</strong>" in ok.get_data(as_text=True)
    refused = client_a.get(f"/c/{chat_id}/messages/{longer}/markdown", headers=HTMX)
    assert refused.status_code == 413
    assert 'data-code="markdown_too_long"' in refused.get_data(as_text=True)
    api = client_a.get(
        f"/c/{chat_id}/messages/{longer}/markdown", headers={"Accept": "application/json"}
    )
    assert api.get_json()["error"]["code"] == "markdown_too_long"


def test_one_users_renders_run_one_at_a_time_and_another_user_goes_ahead(
    multi_app, users, client_a, client_b, rows
):
    multi_app.config.update(NUMI_MARKDOWN_MAX_CHARS=1000)
    # Past the off-hub threshold: each render waits in a pool thread, so the requests overlap.
    chars = 60_000
    a_chat, (_, first, _, second) = rows(
        users["a"].id,
        [
            ("user", "Hi"),
            ("assistant", _long(chars)),
            ("user", "More"),
            ("assistant", _long(chars)),
        ],
    )
    b_chat, (_, other) = rows(users["b"].id, [("user", "Hi"), ("assistant", _long(chars))])
    responses: dict[str, object] = {}

    def show(name: str, client, chat_id: str, message_id: int):
        responses[name] = client.get(f"/c/{chat_id}/messages/{message_id}/markdown", headers=HTMX)

    # Greenlets run in the order spawned: A's first render is under way (waiting for its pool
    # thread) when A's second and B's requests arrive.
    greenlets = [
        gevent.spawn(show, "a first", client_a, a_chat, first),
        gevent.spawn(show, "a second", client_a, a_chat, second),
        gevent.spawn(show, "b", client_b, b_chat, other),
    ]
    gevent.joinall(greenlets, raise_error=True, timeout=120)
    statuses = {name: response.status_code for name, response in responses.items()}
    assert statuses == {"a first": 200, "a second": 429, "b": 200}, statuses
    assert 'data-code="markdown_busy"' in responses["a second"].get_data(as_text=True)
    # Once the first is done, the second is rendered.
    again = client_a.get(f"/c/{a_chat}/messages/{second}/markdown", headers=HTMX)
    assert again.status_code == 200 and "<strong>bold</strong>" in again.get_data(as_text=True)
