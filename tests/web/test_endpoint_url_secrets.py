"""Credentials inside a shared endpoint's base URL (issue 28 item 13): non-admins see only
its host, on every page and API answer that lists endpoints; admins see it whole."""

from __future__ import annotations

from numi.extensions import db
from numi.models import Endpoint

SECRET_URL = "http://proxyuser:proxy-pass-123@127.0.0.1:9/v1?api-key=query-secret-456"
# The query's name with its "=" (Settings now links to its own "API keys" section, /settings/api-keys).
SECRETS = ("proxyuser", "proxy-pass-123", "query-secret-456", "api-key=")


def _shared(app) -> int:
    with app.app_context():
        endpoint = Endpoint(user_id=None, name="Shared proxy", kind="openai_chat")
        endpoint.base_url = SECRET_URL
        db.session.add(endpoint)
        db.session.commit()
        return endpoint.id


def test_non_admins_see_only_the_host_of_a_shared_endpoint(multi_app, client_b, admin_client):
    endpoint_id = _shared(multi_app)
    listed = client_b.get("/api/endpoints").get_json()["endpoints"]
    assert [e["base_url"] for e in listed] == ["http://127.0.0.1:9"]
    for path in ("/settings/endpoints", f"/settings/endpoints/{endpoint_id}"):
        page = client_b.get(path)
        assert page.status_code == 200
        text = page.get_data(as_text=True)
        assert "Shared proxy" in text
        assert not [s for s in SECRETS if s in text], path
    # The admin who manages it sees (and edits) the whole URL.
    listed = admin_client.get("/api/endpoints").get_json()["endpoints"]
    assert [e["base_url"] for e in listed] == [SECRET_URL]
    edit = admin_client.get(f"/settings/endpoints/{endpoint_id}/edit").get_data(as_text=True)
    assert "proxy-pass-123" in edit


def test_credentials_in_a_base_url_are_stored_sealed_and_turns_still_work(live_server, scripted):
    from numi.testing import Scenario
    from turn_support import Api, Socket, db_rows, of_type

    host = scripted.openai_base_url.split("://", 1)[1]
    api = Api(live_server.url)
    endpoints = {}
    for name, url in (
        ("proxied", f"http://proxyuser:proxy-pass-123@{host}"),
        ("keyed", f"http://{host}?api-key=query-secret-456"),
    ):
        status, endpoint = api.post(
            "/api/endpoints",
            {"name": name, "kind": "openai_chat", "base_url": url, "default_model": "m"},
        )
        assert status == 201, endpoint
        assert endpoint["base_url"] == url  # its owner sees it whole
        [(stored,)] = db_rows(
            live_server, "SELECT base_url FROM endpoints WHERE id = ?", endpoint["id"]
        )
        assert stored.startswith("numi:v1:"), stored
        assert not [s for s in SECRETS if s in stored]
        endpoints[name] = endpoint

    for name in ("proxied", "keyed"):
        status, chat = api.post(
            "/api/session", {"endpoint_id": endpoints[name]["id"], "model": "m"}
        )
        assert status == 201, chat
        scripted.enqueue(Scenario().text("Through the proxy."))
        socket = Socket(live_server, chat["id"])
        socket.send(type="send", message="hello", request_id=name)
        events = socket.events_until("turn_end")
        socket.close()
        assert not of_type(events, "error"), events
    # The adapter got the unsealed URLs: both turns reached the provider (a chat's title
    # request may come between them), and (issue 34) the query form kept its query when
    # the SDK added its path.
    paths = [r.path for r in scripted.requests if r.method == "POST"]
    assert "/v1/chat/completions" in paths
    assert "/v1/chat/completions?api-key=query-secret-456" in paths
    assert {path.split("?")[0] for path in paths} == {"/v1/chat/completions"}, paths


def test_credential_urls_from_before_are_sealed_at_start_up(make_app):
    from numi.database import upgrade

    app = make_app()
    with app.app_context():
        for name, url in (("Old", SECRET_URL), ("Plain", "https://api.example.test/v1")):
            db.session.execute(
                db.text(
                    "INSERT INTO endpoints (name, kind, base_url, reasoning_policy, enabled, "
                    "created_at) VALUES (:name, 'openai_chat', :url, 'auto', :on, "
                    "CURRENT_TIMESTAMP)"
                ),
                {"name": name, "url": url, "on": True},
            )
        db.session.commit()
    upgrade(app)
    upgrade(app)  # idempotent
    with app.app_context():
        stored = dict(db.session.execute(db.text("SELECT name, base_url FROM endpoints")).all())
        assert stored["Old"].startswith("numi:v1:")
        assert not [s for s in SECRETS if s in stored["Old"]]
        assert stored["Plain"] == "https://api.example.test/v1"  # nothing secret: left plain
        urls = {e.name: e.base_url for e in db.session.execute(db.select(Endpoint)).scalars()}
        assert urls["Old"] == SECRET_URL
