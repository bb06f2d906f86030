"""Share links (issue 42): a chat's read-only snapshot at an unguessable link.

In-process test clients (no socket is needed): the owner shares through the API, a visitor
without credentials opens `/s/<token>`. The browser test is tests/browser/test_shared_page.py.
"""

from __future__ import annotations

from datetime import timedelta

from numi.extensions import db
from numi.models import Chat, Message, Share


def _chat(app, user_id: int | None = None, question="What is 2+2?", answer="**Four**.") -> str:
    with app.app_context():
        if user_id is None:
            from numi.identity import local_user

            user_id = local_user().id
        chat = Chat(user_id=user_id, title="Arithmetic")
        db.session.add(chat)
        db.session.flush()
        db.session.add(Message(chat_id=chat.id, role="user", content=question))
        db.session.flush()
        db.session.add(
            Message(chat_id=chat.id, role="assistant", content=answer, meta_json='{"model": "m1"}')
        )
        db.session.commit()
        return chat.id


def _share(client, chat_id, **fields) -> tuple[int, str]:
    response = client.post(f"/api/session/{chat_id}/share", json={"display_name": "Ada", **fields})
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    return body["share"]["id"], body["url"].split("/s/", 1)[1]


def test_a_shared_chat_is_a_read_only_snapshot_for_anyone_with_the_link(sqlite_app):
    owner = sqlite_app.test_client()
    chat_id = _chat(sqlite_app)
    share_id, token = _share(owner, chat_id)

    visitor = sqlite_app.test_client(access_token=None)
    page = visitor.get(f"/s/{token}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "What is 2+2?" in html and "<strong>Four</strong>" in html
    assert "Shared by Ada" in html
    assert page.headers["Referrer-Policy"] == "no-referrer"
    assert "noindex" in page.headers["X-Robots-Tag"]
    assert '<meta name="robots" content="noindex' in html
    # Read-only, not live, nothing else of the owner's: no forms, scripts or sidebar.
    for absent in ("<form", "<script", "/ws/", "sidebar", "/c/"):
        assert absent not in html, absent

    # A snapshot: the chat's later answers do not appear.
    with sqlite_app.app_context():
        db.session.add(Message(chat_id=chat_id, role="user", content="later question"))
        db.session.commit()
        # Only the token's hash is stored.
        assert token not in db.session.get(Share, share_id).token_hash
    assert "later question" not in visitor.get(f"/s/{token}").get_data(as_text=True)

    listed = owner.get("/api/shares").get_json()["shares"]
    assert [s["id"] for s in listed] == [share_id] and listed[0]["open"] is True

    revoked = owner.delete(f"/api/shares/{share_id}")
    assert revoked.status_code == 200 and revoked.get_json()["share"]["open"] is False
    gone = visitor.get(f"/s/{token}")
    assert gone.status_code == 404
    assert gone.get_data(as_text=True) == "Not found\n"
    assert visitor.get("/s/" + "x" * 43).get_data(as_text=True) == "Not found\n"


def test_an_expired_link_is_the_same_404(sqlite_app):
    owner = sqlite_app.test_client()
    share_id, token = _share(owner, _chat(sqlite_app), expires_in_days=1)
    visitor = sqlite_app.test_client(access_token=None)
    assert visitor.get(f"/s/{token}").status_code == 200
    with sqlite_app.app_context():
        share = db.session.get(Share, share_id)
        share.expires_at -= timedelta(days=1, seconds=1)
        db.session.commit()
    gone = visitor.get(f"/s/{token}")
    assert gone.status_code == 404 and gone.get_data(as_text=True) == "Not found\n"
    assert owner.get("/api/shares").get_json()["shares"][0]["open"] is False


def test_bad_share_requests_change_nothing(sqlite_app):
    owner = sqlite_app.test_client()
    chat_id = _chat(sqlite_app)
    for fields, code in (
        ({}, "share_invalid"),
        ({"display_name": "  "}, "share_invalid"),
        ({"display_name": "x" * 101}, "share_invalid"),
        ({"display_name": "Ada", "audience": "everyone"}, "share_invalid"),
        ({"display_name": "Ada", "expires_in_days": 0}, "share_invalid"),
        ({"display_name": "Ada", "expires_in_days": True}, "share_invalid"),
    ):
        response = owner.post(f"/api/session/{chat_id}/share", json=fields)
        assert response.status_code == 400 and response.get_json()["error"]["code"] == code
    assert owner.post("/api/session/nope/share", json={"display_name": "A"}).status_code == 404
    assert owner.delete("/api/shares/999").status_code == 404
    assert owner.get("/api/shares").get_json()["shares"] == []


def test_wrong_tokens_from_one_address_are_held_back(make_app):
    app = make_app(NUMI_SHARE_FREE_GUESSES=3, NUMI_LOGIN_DELAY_SECONDS=60)
    _, token = _share(app.test_client(), _chat(app))
    guesser = app.test_client(access_token=None)
    for n in range(4):
        assert guesser.get(f"/s/wrong{n}").status_code == 404
    refused = guesser.get(f"/s/{token}")
    assert refused.status_code == 429
    assert "share_guess_limit" in refused.get_data(as_text=True)
    # Another address is not held back by it.
    other = app.test_client(access_token=None)
    assert other.get(f"/s/{token}", environ_base={"REMOTE_ADDR": "10.0.0.9"}).status_code == 200


def test_multi_user_shares_are_owner_scoped_and_signed_in_only_links_need_a_login(
    multi_app, users, client_a, client_b
):
    chat_id = _chat(multi_app, users["a"].id)
    # Bob cannot share, list or revoke Alice's chat or link.
    refused = client_b.post(f"/api/session/{chat_id}/share", json={"display_name": "Bob"})
    assert refused.status_code == 404
    share_id, token = _share(client_a, chat_id, audience="signed_in")
    assert client_b.get("/api/shares").get_json()["shares"] == []
    assert client_b.delete(f"/api/shares/{share_id}").status_code == 404

    stranger = multi_app.test_client()
    closed = stranger.get(f"/s/{token}")
    assert closed.status_code == 403
    assert "Arithmetic" not in closed.get_data(as_text=True)
    assert "Sign in" in closed.get_data(as_text=True)
    opened = client_b.get(f"/s/{token}")
    assert opened.status_code == 200 and "What is 2+2?" in opened.get_data(as_text=True)
    assert "alice" not in opened.get_data(as_text=True)

    # Continue this chat: a copy in Bob's own chats; Alice's chat is untouched.
    assert "Continue this chat" in opened.get_data(as_text=True)
    assert stranger.post(f"/s/{token}/continue").status_code == 302  # to the login page
    copied = client_b.post(f"/s/{token}/continue")
    assert copied.status_code == 303
    new_id = copied.headers["Location"].rsplit("/", 1)[1]
    history = client_b.get(f"/api/history/{new_id}").get_json()["messages"]
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "What is 2+2?"),
        ("assistant", "**Four**."),
    ]
    assert client_a.get(f"/api/history/{new_id}").status_code == 404
    assert len(client_a.get(f"/api/history/{chat_id}").get_json()["messages"]) == 2


def test_the_xss_corpus_on_a_shared_page_executes_nothing(sqlite_app, xss):
    owner = sqlite_app.test_client()
    visitor = sqlite_app.test_client(access_token=None)
    _, plain_token = _share(owner, _chat(sqlite_app, question="plain", answer="plain"))
    baseline = xss.page_outline(visitor.get(f"/s/{plain_token}").get_data(as_text=True))[0]
    for text in xss.inputs:
        chat_id = _chat(sqlite_app, question=text, answer=text)
        with sqlite_app.app_context():
            db.session.get(Chat, chat_id).title = text[:200]
            db.session.commit()
        _, token = _share(owner, chat_id, display_name=text[:100])
        html = visitor.get(f"/s/{token}").get_data(as_text=True)
        outline, inside = xss.page_outline(html)
        assert outline == baseline, f"{text!r} changed the page structure"
        assert inside == [], f"{text!r}: {inside}"


ARTIFACT_ANSWER = (
    "Here is a page:\n\n```html\n<h1 id=x>Hello</h1><script>document.title='ran'</script>\n```\n\n"
    "and a drawing:\n\n```svg\n<svg xmlns='http://www.w3.org/2000/svg'><circle r='4'/></svg>\n```\n"
)


def test_artifacts_preview_on_a_shared_page_in_the_frames_sandbox(sqlite_app):
    owner = sqlite_app.test_client()
    chat_id = _chat(sqlite_app, answer=ARTIFACT_ANSWER)
    _, token = _share(owner, chat_id)
    visitor = sqlite_app.test_client(access_token=None)
    html = visitor.get(f"/s/{token}").get_data(as_text=True)
    assert html.count('<iframe class="shared-artifact-frame" sandbox="allow-scripts"') == 2
    assert f"/s/{token}/artifacts/1/0" in html and f"/s/{token}/artifacts/1/1" in html
    assert "<script" not in html  # the page itself still runs nothing

    frame = visitor.get(f"/s/{token}/artifacts/1/0")
    assert frame.status_code == 200
    policy = frame.headers["Content-Security-Policy"]
    assert policy.startswith("sandbox allow-scripts;") and "default-src 'none'" in policy
    assert frame.headers["Referrer-Policy"] == "no-referrer"
    assert "camera=()" in frame.headers["Permissions-Policy"]
    body = frame.get_data(as_text=True)
    # The source is JSON data in the frame, never markup of it: "<" is escaped.
    assert '<script type="application/json" id="numi-artifact-source">' in body
    assert "<h1 id=x>" not in body and "\\u003ch1 id=x\\u003e" in body

    for missing in ("/s/{}/artifacts/0/0", "/s/{}/artifacts/1/2", "/s/{}/artifacts/9/0"):
        assert visitor.get(missing.format(token)).status_code == 404
    assert visitor.get("/s/wrong-token/artifacts/1/0").status_code == 404


def test_a_signed_in_only_share_keeps_its_artifacts_from_visitors_signed_out(multi_app, users):
    from fixtures.users import sign_in

    owner = multi_app.test_client()
    sign_in(owner, users["a"])
    chat_id = _chat(multi_app, users["a"].id, answer=ARTIFACT_ANSWER)
    _, token = _share(owner, chat_id, audience="signed_in")
    assert multi_app.test_client().get(f"/s/{token}/artifacts/1/0").status_code == 404
    reader = multi_app.test_client()
    sign_in(reader, users["b"])
    assert reader.get(f"/s/{token}/artifacts/1/0").status_code == 200
