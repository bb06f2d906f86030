"""Credentials inside a shared endpoint's base URL (issue 28 item 13): non-admins see only
its host, on every page and API answer that lists endpoints; admins see it whole."""

from __future__ import annotations

from numi.extensions import db
from numi.models import Endpoint

SECRET_URL = "http://proxyuser:proxy-pass-123@127.0.0.1:9/v1?api-key=query-secret-456"
SECRETS = ("proxyuser", "proxy-pass-123", "query-secret-456", "api-key")


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
    for path in ("/settings", f"/settings/endpoints/{endpoint_id}"):
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
