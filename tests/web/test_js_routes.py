"""The page's scripts write no route of the app: the server renders each URL they use into
the page (a data-*-url attribute), so a route changes in one place (issue 36)."""

from __future__ import annotations

import re
from pathlib import Path

STATIC_JS = Path(__file__).resolve().parents[2] / "static" / "js"
# A string literal that starts a path of this server ("/chats", `/c/${id}`), handed to
# something that requests it.
REQUESTED_PATH = re.compile(
    r"""\b(fetch|register|EventSource|WebSocket|open|sendBeacon)\s*\(\s*["'`]/[A-Za-z]"""
)


def test_no_script_requests_a_path_it_wrote_itself():
    found = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(STATIC_JS.glob("*.js"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if REQUESTED_PATH.search(line)
    ]
    assert found == []


def test_the_page_carries_the_routes_its_scripts_use(client):
    chat_id = client.post("/api/session", json={"title": "routes"}).get_json()["id"]
    page = client.get(f"/c/{chat_id}").get_data(as_text=True)
    assert f'data-artifacts-url="/c/{chat_id}/messages/0/artifacts"' in page
    assert 'data-session-url="/api/session/0"' in page
    assert 'data-worker-url="/sw.js"' in page
