"""Full-text search: newest hits first, snippets with escaped text, owner scoping, and the index
following saves, edits and deletes with no application code (database triggers)."""

from __future__ import annotations

from numi.extensions import turn_manager
from numi.services import Lazy, services

HX = {"HX-Request": "true"}


def wait_idle(app, chat_id: str) -> None:
    """Let the turn an edit started (it ends at once: no model is configured) finish."""
    import time

    import gevent

    deadline = time.monotonic() + 10
    while turn_manager(app).is_running(chat_id):
        assert time.monotonic() < deadline, "the turn did not end"
        gevent.sleep(0.02)


def search(client, q: str) -> dict:
    response = client.get("/api/search", query_string={"q": q})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_finds_messages_ranked_with_highlighted_snippets(multi_app, users, client_a, rows):
    chat_id, ids = rows(
        users["a"].id,
        [
            ("user", "Tell me about the moon."),
            (
                "assistant",
                "The moon orbits Earth. The moon has phases; moon light is reflected sunlight.",
            ),
            ("user", "Any other moons?"),
            ("assistant", "Saturn has many moons, and the moon of Earth is the fifth largest."),
            ("tool", "moon moon moon moon", {"tool_call_id": "c1"}),
        ],
        title="Astronomy night",
    )
    found = search(client_a, "moon")
    hits = [m["message_id"] for m in found["messages"]]
    # Newest first (not by relevance: the message saying "moon" most often is not on top); the
    # last word is a prefix ("moons" matches, as while typing); tool output is not indexed.
    assert hits == [ids[3], ids[2], ids[1], ids[0]]
    assert ids[4] not in hits
    first = found["messages"][0]
    assert first["chat_id"] == chat_id and first["chat_title"] == "Astronomy night"
    assert "moon" in [h.lower() for h in first["highlights"]]
    # Titles are searched too.
    assert [c["id"] for c in search(client_a, "astronomy")["chats"]] == [chat_id]
    # Prefix while typing, several words all required, FTS syntax in input is plain text.
    assert ids[1] in [m["message_id"] for m in search(client_a, "refle")["messages"]]
    assert [m["message_id"] for m in search(client_a, "saturn moons")["messages"]] == [ids[3]]
    # As FTS syntax `moon OR NOT x*` would match every moon message; as plain words (all
    # required) it matches none. Quotes and brackets around a word still find it.
    assert search(client_a, 'moon" OR NOT "x* (')["messages"] == []
    assert {m["message_id"] for m in search(client_a, '"saturn" (moons')["messages"]} == {ids[3]}
    assert search(client_a, "   ")["messages"] == []


def test_results_partial_escapes_text_and_marks_hits(multi_app, users, client_a, rows, xss):
    hostile = "<img src=x onerror=alert(1)> needle <script>alert(2)</script>"
    chat_id, ids = rows(users["a"].id, [("user", hostile)], title="<b>bold</b> needle")
    html = client_a.get(
        "/search", query_string={"q": "needle", "mode": "messages"}, headers=HX
    ).get_data(as_text=True)
    assert "<mark>needle</mark>" in html
    assert "<script>" not in html and "<img" not in html and "<b>bold" not in html
    assert "&gt;" in html  # the markup shows as text (ts_headline may cut the snippet around it)
    assert f'href="/c/{chat_id}?at={ids[0]}#msg-{ids[0]}"' in html
    assert xss.html_problems(html) == []
    # Title mode gives the ordinary chat list.
    titles = client_a.get(
        "/search", query_string={"q": "needle", "mode": "titles"}, headers=HX
    ).get_data(as_text=True)
    assert f'id="chat-{chat_id}"' in titles


def test_index_follows_edit_and_delete(multi_app, users, client_a, rows):
    chat_id, ids = rows(
        users["a"].id,
        [
            ("user", "first about giraffes"),
            ("assistant", "Giraffes are tall."),
            ("user", "zebras please"),
        ],
    )
    assert {m["message_id"] for m in search(client_a, "giraffes")["messages"]} == {ids[0], ids[1]}
    # Edit the first question: the old question and what followed it become an inactive
    # version, which search does not show; the new version is found.
    response = client_a.post(
        f"/api/session/{chat_id}/messages/{ids[0]}/edit", json={"text": "first about penguins"}
    )
    assert response.status_code == 202
    edited = response.get_json()["message"]["id"]
    wait_idle(multi_app, chat_id)
    assert search(client_a, "giraffes")["messages"] == []
    assert [m["message_id"] for m in search(client_a, "penguins")["messages"]] == [edited]
    assert search(client_a, "zebras")["messages"] == []  # in the inactive version
    assert client_a.delete(f"/api/session/{chat_id}/messages/{edited}").status_code == 200
    assert search(client_a, "penguins")["messages"] == []
    # Deleting the shown version shows the remaining one again.
    assert {m["message_id"] for m in search(client_a, "giraffes")["messages"]} == {ids[0], ids[1]}
    # A deleted chat's messages are not found either.
    other, other_ids = rows(users["a"].id, [("user", "okapis live in forests")])
    assert search(client_a, "okapis")["messages"]
    client_a.delete(f"/api/session/{other}")
    assert search(client_a, "okapis")["messages"] == []


def test_new_messages_are_found_at_once(multi_app, users, client_a, rows):
    chat_id, _ = rows(users["a"].id, [("user", "nothing yet")])
    assert search(client_a, "quokka")["messages"] == []
    _, ids = rows(users["a"].id, [("assistant", "A quokka smiles.")], chat_id=chat_id)
    assert [m["message_id"] for m in search(client_a, "quokka")["messages"]] == ids


def test_search_is_scoped_to_the_owner(multi_app, users, client_a, client_b, rows):
    rows(users["a"].id, [("user", "alice secret platypus")], title="alice platypus")
    assert search(client_a, "platypus")["messages"]
    found = search(client_b, "platypus")
    assert found["messages"] == [] and found["chats"] == []
    html = client_b.get(
        "/search", query_string={"q": "platypus", "mode": "messages"}, headers=HX
    ).get_data(as_text=True)
    assert "alice" not in html


def test_engine_matches_the_database(multi_app):
    from numi.chat.search import search_engine
    from numi.extensions import db

    with multi_app.app_context():
        engine = search_engine()
        expected = {"sqlite": "fts5", "postgresql": "postgresql"}[db.engine.dialect.name]
    assert engine == expected


def test_the_ilike_fallback_finds_and_marks_the_same_words(multi_app, users, client_a, rows):
    """Databases without full-text support: the same results shape, newest first."""
    chat_id, ids = rows(
        users["a"].id,
        [("user", "An <i>Axolotl</i> question"), ("assistant", "axolotls are salamanders")],
    )
    services(multi_app).search_engine = Lazy(lambda: "ilike")
    found = search(client_a, "axolotl")
    assert found["engine"] == "ilike"
    assert [m["message_id"] for m in found["messages"]] == [ids[1], ids[0]]
    assert found["messages"][1]["highlights"] == ["Axolotl"]
    html = client_a.get(
        "/search", query_string={"q": "axolotl", "mode": "messages"}, headers=HX
    ).get_data(as_text=True)
    assert "An &lt;i&gt;<mark>Axolotl</mark>&lt;/i&gt; question" in html
