"""web_search and fetch_page against loopback servers: results, readable text, the address
rules (every address, every redirect), and citations saved, rendered and exported."""

from __future__ import annotations

import json

import pytest

from tools_web_support import ARTICLE, HOSTILE_TITLE
from numi.agent.tools import ToolContext, ToolFailure, ToolResult
from numi.agent.tools import web as web_tools
from numi.errors import NumiError
from numi.extensions import db
from numi.models import User
from numi.testing import Scenario
from turn_support import SSE, Api, db_rows, make_chat, turn_server_env


@pytest.fixture
def tool_user(sqlite_app):
    with sqlite_app.app_context():
        user = User(username="tools", is_admin=True)
        db.session.add(user)
        db.session.commit()
        return user.id


def run(app, tool, arguments, user_id):
    """What the model reads: the tool's result, or the text of a failure it reports."""
    try:
        with app.app_context():
            return tool.run(arguments, ToolContext(user_id=user_id, chat_id="c", is_admin=True))
    except ToolFailure as failure:
        return failure.text


def failure(app, tool, arguments, user_id) -> ToolFailure:
    """The failure the tool reports (its result is saved with ok: false and this code)."""
    with app.app_context(), pytest.raises(ToolFailure) as caught:
        tool.run(arguments, ToolContext(user_id=user_id, chat_id="c", is_admin=True))
    return caught.value


def configure(app, user_id, **settings):
    with app.app_context():
        return web_tools.save_settings(user_id, settings)


# --- the address rules ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "localhost",
        "10.1.2.3",
        "192.168.0.1",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "100.64.0.1",
        "0.0.0.0",
        "::ffff:127.0.0.1",
    ],
)
def test_internal_addresses_are_refused_by_default(host):
    with pytest.raises(web_tools.FetchRefused, match="Refused"):
        web_tools.check_address(host, 80, {})


def test_allow_list_admits_only_what_it_names():
    assert web_tools.check_address("127.0.0.1", 80, {"allowed_hosts": ["127.0.0.1"]}) == "127.0.0.1"
    assert (
        web_tools.check_address("127.0.0.9", 80, {"allowed_hosts": ["127.0.0.0/8"]}) == "127.0.0.9"
    )
    with pytest.raises(web_tools.FetchRefused):
        web_tools.check_address("127.0.0.2", 80, {"allowed_hosts": ["127.0.0.1"]})
    with pytest.raises(web_tools.FetchRefused):
        web_tools.check_address("10.0.0.1", 80, {"allowed_hosts": ["127.0.0.1"]})
    assert web_tools.check_address("10.0.0.1", 80, {"allow_private": True}) == "10.0.0.1"


def test_every_redirect_is_checked_again(web):
    settings = {"allowed_hosts": ["127.0.0.1"]}
    page = web_tools.guarded_get(
        f"{web.page_url}/to-article", settings, max_bytes=100_000, timeout=5
    )
    assert page.url.endswith("/article") and b"Otters hold hands" in page.body
    for path, address in [
        ("/to-private", "10.255.255.1"),
        ("/to-metadata", "169.254.169.254"),
        ("/to-other-loopback", "127.0.0.2"),
    ]:
        with pytest.raises(web_tools.FetchRefused, match=address.replace(".", r"\.")):
            web_tools.guarded_get(f"{web.page_url}{path}", settings, max_bytes=100_000, timeout=5)
    with pytest.raises(web_tools.FetchRefused, match="redirects"):
        web_tools.guarded_get(f"{web.page_url}/loop", settings, max_bytes=100_000, timeout=5)
    with pytest.raises(web_tools.FetchRefused, match="http"):
        web_tools.guarded_get("file:///etc/passwd", settings, max_bytes=100, timeout=5)


# --- the tools -----------------------------------------------------------------------------


def test_fetch_page_returns_readable_text_as_a_source(sqlite_app, tool_user, web):
    configure(sqlite_app, tool_user, allowed_hosts="127.0.0.1")
    result = run(sqlite_app, web_tools.FETCH_PAGE, {"url": f"{web.page_url}/to-article"}, tool_user)
    assert isinstance(result, ToolResult)
    [source] = result.sources
    assert source["url"] == f"{web.page_url}/article"
    assert "Sea otters hold hands while they sleep" in source["content"]
    assert "densest of any animal" in source["content"]
    assert "secretScript" not in source["content"] and "color:red" not in source["content"]
    assert "footer-noise" not in source["content"], "readability keeps the main content only"
    assert "Quotes" in source["title"]


def test_fetch_page_refusals_are_results_the_model_reads(sqlite_app, tool_user, web):
    base = web.page_url
    configure(sqlite_app, tool_user)  # nothing private allowed
    refused = failure(sqlite_app, web_tools.FETCH_PAGE, {"url": f"{base}/article"}, tool_user)
    assert "Refused" in refused.text and refused.code == "address_refused"
    configure(sqlite_app, tool_user, allowed_hosts=["127.0.0.1"])
    redirected = failure(sqlite_app, web_tools.FETCH_PAGE, {"url": f"{base}/to-private"}, tool_user)
    assert "10.255.255.1" in redirected.text and redirected.code == "address_refused"
    assert "not a text page" in run(
        sqlite_app, web_tools.FETCH_PAGE, {"url": f"{base}/image"}, tool_user
    )
    missing = failure(sqlite_app, web_tools.FETCH_PAGE, {"url": f"{base}/missing"}, tool_user)
    assert "HTTP 404" in missing.text and missing.code == "http_error"
    wrong = failure(sqlite_app, web_tools.FETCH_PAGE, {"url": "ftp://example.org/x"}, tool_user)
    assert "http://" in wrong.text and wrong.code == "invalid_arguments"
    big = run(
        sqlite_app, web_tools.FETCH_PAGE, {"url": f"{base}/big", "max_chars": 1000}, tool_user
    )
    assert "only the start was read" in big.text and len(big.sources[0]["content"]) == 1000


def test_stdlib_fallback_drops_scripts_and_navigation():
    extractor = web_tools._TextExtractor()
    extractor.feed(ARTICLE)
    text = extractor.text()
    assert (
        "Sea otters hold hands" in text and "secretScript" not in text and "nav-noise" not in text
    )


def test_web_search_through_searxng(sqlite_app, tool_user, web):
    assert "not set up" in run(sqlite_app, web_tools.WEB_SEARCH, {"query": "otters"}, tool_user)
    configure(
        sqlite_app,
        tool_user,
        search_backend="searxng",
        searxng_url=web.search_url + "/",
        allowed_hosts=["127.0.0.1"],
    )
    result = run(sqlite_app, web_tools.WEB_SEARCH, {"query": "sea otters"}, tool_user)
    assert [s["url"] for s in result.sources] == [
        f"{web.page_url}/article",
        "https://example.org/otters?a=1&b=<2>",
    ]
    assert result.sources[0]["title"] == "Otters and sea otters"
    assert result.sources[0]["content"] == "Sea otters hold hands while sleeping."  # tags stripped
    assert any(r.startswith("/search?q=sea+otters&format=json") for r in web.requests)


def test_settings_validation_changes_nothing_on_error(sqlite_app, tool_user):
    configure(sqlite_app, tool_user, search_backend="searxng", searxng_url="http://127.0.0.1:1")
    for bad in (
        {"search_backend": "bing"},
        {"search_backend": "searxng", "searxng_url": "javascript:x"},
        {"search_backend": "brave"},
        {"allowed_hosts": ["not a host!"]},
    ):
        with pytest.raises(NumiError):
            configure(sqlite_app, tool_user, **bad)
    with sqlite_app.app_context():
        assert web_tools.load_settings(tool_user)["searxng_url"] == "http://127.0.0.1:1"


# --- a cited answer, end to end ------------------------------------------------------------


@pytest.fixture(scope="module")
def server(live_server_factory):
    started = live_server_factory(**turn_server_env())
    yield started
    started.stop()


def test_cited_answer_saved_rendered_and_exported(server, scripted, web):
    api = Api(server.url)
    status, body = post_json(
        server,
        "/settings/web-search",
        {
            "search_backend": "searxng",
            "searxng_url": web.search_url,
            "allowed_hosts": ["127.0.0.1"],
        },
    )
    assert status == 200 and "Saved." in body, body
    chat = make_chat(api, scripted, settings={"tools": ["web_search", "fetch_page"]})
    scripted.enqueue(Scenario().tool_call("web_search", {"query": "otters"}))
    scripted.enqueue(Scenario().tool_call("fetch_page", {"url": f"{web.page_url}/article"}))
    scripted.enqueue(Scenario().tool_call("fetch_page", {"url": f"{web.page_url}/to-private"}))
    scripted.enqueue(Scenario().text("Otters hold hands [1]; see also [2]."))
    events = stream(server, {"session": chat["id"], "message": "Tell me about otters"})
    assert events[-1]["type"] == "turn_end"
    assert "done" in [e["type"] for e in events]

    # The model saw numbered sources; the fetched page kept the number its search result had.
    tool_texts = [
        m["content"] for m in scripted.requests[-1].body["messages"] if m.get("role") == "tool"
    ]
    assert tool_texts[0].count("[1] Otters and otters") == 1 and "[2] " in tool_texts[0]
    assert tool_texts[1].startswith("Fetched") and "[1] " in tool_texts[1]
    assert "Sea otters hold hands while they sleep" in tool_texts[1]
    assert "10.255.255.1" in tool_texts[2] and "Refused" in tool_texts[2]
    assert not any("10.255.255.1" in r for r in web.requests), (
        "nothing was sent to the private address"
    )

    [(raw,)] = db_rows(
        server,
        "SELECT citation_sources_json FROM messages WHERE chat_id = ? AND role = 'assistant' "
        "AND citation_sources_json IS NOT NULL",
        chat["id"],
    )
    sources = json.loads(raw)
    assert [s["n"] for s in sources] == [1, 2]
    assert sources[1]["title"] == HOSTILE_TITLE
    assert all("content" not in s for s in sources)

    html = urlopen_text(server, f"/c/{chat['id']}")
    assert 'href="https://example.org/otters?a=1&amp;b=&lt;2&gt;"' in html
    assert 'rel="noopener noreferrer nofollow"' in html
    assert "&lt;img src=x onerror=alert(1)&gt; &#34;Quotes&#34;" in html
    assert "<img src=x onerror" not in html and 'href="javascript:' not in html

    markdown = urlopen_text(server, f"/api/session/{chat['id']}/export?fmt=md")
    assert "https://example.org/otters" in markdown and f"{web.page_url}/article" in markdown


def stream(server, body) -> list[dict]:
    """POST /api/chat_stream and read its events to turn_end."""
    client = SSE(server, "POST", "/api/chat_stream", body)
    try:
        events = []
        for event in client.events():
            events.append(event)
            if event["type"] == "turn_end":
                break
        return events
    finally:
        client.close()


def post_json(server, path: str, body: dict) -> tuple[int, str]:
    """POST a JSON body as the page's HTMX form would (HX-Request: a fragment comes back)."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(
            "POST",
            path,
            body=json.dumps(body),
            headers={"Content-Type": "application/json", "HX-Request": "true", **server.headers},
        )
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def urlopen_text(server, path: str) -> str:
    import urllib.request

    request = urllib.request.Request(server.url + path, headers=server.headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


def test_settings_page_saves_the_backend_and_never_shows_the_key(sqlite_client):
    page = sqlite_client.get("/settings/web-search").get_data(as_text=True)
    assert "Web search" in page and 'name="searxng_url"' in page
    response = sqlite_client.post(
        "/settings/web-search",
        headers={"HX-Request": "true"},
        data={
            "search_backend": "brave",
            "brave_api_key": "BSA-very-secret-key",
            "allowed_hosts": "127.0.0.1 10.0.0.0/8",
        },
    )
    assert response.status_code == 200, response.get_data(as_text=True)
    html = response.get_data(as_text=True)
    assert "Saved." in html and 'value="127.0.0.1 10.0.0.0/8"' in html
    assert "BSA-very-secret-key" not in html and "BSA-very-secret-key" not in sqlite_client.get(
        "/settings/web-search"
    ).get_data(as_text=True)
    # An empty key field keeps the saved key; a bad backend changes nothing.
    assert (
        sqlite_client.post("/settings/web-search", data={"search_backend": "brave"}).status_code
        == 302
    )
    assert (
        sqlite_client.post("/settings/web-search", data={"search_backend": "bing"}).status_code
        == 400
    )
    assert 'value="brave" selected' in sqlite_client.get("/settings/web-search").get_data(
        as_text=True
    )


def test_the_search_key_is_encrypted_at_rest_and_still_used(sqlite_app, tool_user):
    """The Brave key is sealed like endpoint keys; one stored as plaintext before is sealed
    at start-up and both still reach the search API."""
    from numi.database import upgrade

    with sqlite_app.app_context():
        web_tools.save_settings(
            tool_user, {"search_backend": "brave", "brave_api_key": "BSA-very-secret-key"}
        )
        raw = db.session.execute(
            db.text("SELECT settings_json FROM tool_settings WHERE user_id = :u"), {"u": tool_user}
        ).scalar_one()
        assert "BSA-very-secret-key" not in raw and "numi:v1:" in raw
        assert web_tools.brave_key(web_tools.load_settings(tool_user)) == "BSA-very-secret-key"
        db.session.execute(
            db.text("UPDATE tool_settings SET settings_json = :s WHERE user_id = :u"),
            {
                "s": json.dumps({"search_backend": "brave", "brave_api_key": "BSA-old-plain"}),
                "u": tool_user,
            },
        )
        db.session.commit()
    upgrade(sqlite_app)
    with sqlite_app.app_context():
        raw = db.session.execute(
            db.text("SELECT settings_json FROM tool_settings WHERE user_id = :u"), {"u": tool_user}
        ).scalar_one()
        assert "BSA-old-plain" not in raw
        assert web_tools.brave_key(web_tools.load_settings(tool_user)) == "BSA-old-plain"
