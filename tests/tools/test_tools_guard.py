"""The address guard in multi-user mode: only an admin may allow private addresses (checked
on save and again at use), and a non-admin's MCP servers and endpoints, and every redirect
they follow, stay off loopback and private networks. Connection errors name no address."""

from __future__ import annotations

import socket

import pytest

from numi.agent.tools import ToolContext, ToolFailure
from numi.agent.tools import web as web_tools
from numi.extensions import db, turn_manager
from numi.models import Endpoint, McpServer, ToolSettings


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def assert_refused(response, status=400):
    body = response.get_json()
    assert response.status_code == status and body["error"]["code"] == "address_refused", body
    return body["error"]["message"]


# --- the web tools' overrides -------------------------------------------------------------


def test_a_non_admin_cannot_switch_the_guard_off(multi_app, users, client_a, admin_client):
    for data in (
        {"allow_private": "1"},
        {"allowed_hosts": "127.0.0.1"},
        {"allowed_hosts": "10.0.0.0/8"},
    ):
        for response in (
            client_a.post("/settings/web-search", data=data),
            client_a.post("/settings/web-search", json=data),
        ):
            assert response.status_code == 403 and "Only an administrator" in response.get_data(
                as_text=True
            )
    with multi_app.app_context():
        assert db.session.get(ToolSettings, users["a"].id) is None, "a refused save stores nothing"
    page = client_a.get("/settings/web-search").get_data(as_text=True)
    assert 'name="allow_private"' not in page and 'name="allowed_hosts"' not in page
    internal = client_a.post(
        "/settings/web-search",
        json={"search_backend": "searxng", "searxng_url": "http://127.0.0.1:8888"},
    )
    assert internal.status_code == 400 and "administrators" in internal.get_data(as_text=True)
    # Ordinary settings still save for a non-admin; an admin may allow private hosts.
    assert client_a.post("/settings/web-search", data={"search_backend": ""}).status_code in (
        200,
        302,
    )
    assert admin_client.post(
        "/settings/web-search", data={"allowed_hosts": "127.0.0.1"}
    ).status_code in (200, 302)
    assert 'name="allow_private"' in admin_client.get("/settings/web-search").get_data(as_text=True)


def test_a_stored_override_of_a_non_admin_is_ignored_at_use(multi_app, users, web):
    """An override stored before the rule (or by any other path) does not open the guard."""
    with multi_app.app_context():
        db.session.add(
            ToolSettings(
                user_id=users["a"].id,
                settings={"allow_private": True, "allowed_hosts": ["127.0.0.1"]},
            )
        )
        db.session.commit()
        url = f"{web.page_url}/article"
        with pytest.raises(ToolFailure) as refused:
            web_tools.FETCH_PAGE.run({"url": url}, ToolContext(user_id=users["a"].id, chat_id="c"))
        assert (
            refused.value.text.startswith("Error: Refused")
            and refused.value.code == "address_refused"
        )
        as_admin = web_tools.FETCH_PAGE.run(
            {"url": url}, ToolContext(user_id=users["a"].id, chat_id="c", is_admin=True)
        )
        assert "Otters hold hands" in as_admin.sources[0]["content"]


# --- MCP servers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/mcp",
        "http://localhost:8080/mcp",
        "http://[::1]/mcp",
        "http://10.0.0.7/mcp",
        "http://169.254.169.254/latest",
    ],
)
def test_a_non_admin_cannot_add_an_internal_mcp_url(client_a, url):
    message = assert_refused(client_a.post("/api/mcp_servers", json={"name": "local", "url": url}))
    assert "127.0.0.1" not in message and ":9" not in message
    assert client_a.get("/api/mcp_servers").get_json()["servers"] == []


def test_a_stored_loopback_mcp_url_of_a_non_admin_is_refused_at_use(
    multi_app, users, client_a, require_extra
):
    require_extra("mcp", "mcp")
    port = closed_port()
    with multi_app.app_context():
        server = McpServer(
            user_id=users["a"].id,
            name="local",
            transport="http",
            url=f"http://127.0.0.1:{port}/mcp",
        )
        db.session.add(server)
        db.session.commit()
        server_id = server.id
    body = client_a.post(f"/api/mcp_servers/{server_id}/test").get_json()
    assert body["ok"] is False and "address_refused" in body["message"]
    assert str(port) not in body["message"] and "127.0.0.1" not in body["message"]


def test_mcp_test_errors_name_no_address_or_port(admin_client, require_extra):
    require_extra("mcp", "mcp")
    port = closed_port()
    created = admin_client.post(
        "/api/mcp_servers", json={"name": "gone", "url": f"http://127.0.0.1:{port}/mcp"}
    )
    assert created.status_code == 201, "an admin may use loopback"
    body = admin_client.post(f"/api/mcp_servers/{created.get_json()['id']}/test").get_json()
    assert body["ok"] is False and "mcp_unreachable" in body["message"]
    assert str(port) not in body["message"] and "127.0.0.1" not in body["message"]


# --- endpoints ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "base_url",
    [
        "http://127.0.0.1:11434/v1",
        "http://localhost:8000/v1",
        "http://[::1]:8080",
        "http://192.168.1.10/v1",
        "http://0.0.0.0:9/v1",
        "http://[64:ff9b:1::808:808]/v1",  # NAT64 for local use (issue 34)
    ],
)
def test_a_non_admin_cannot_add_an_internal_endpoint(client_a, base_url):
    assert_refused(
        client_a.post(
            "/api/endpoints", json={"name": "local", "kind": "openai_chat", "base_url": base_url}
        )
    )
    form = client_a.post(
        "/settings/endpoints", data={"name": "local", "kind": "openai_chat", "base_url": base_url}
    )
    assert form.status_code == 400
    assert client_a.get("/api/endpoints").get_json()["endpoints"] == []


def test_a_non_admin_cannot_move_an_endpoint_onto_loopback(client_a):
    created = client_a.post(
        "/api/endpoints",
        json={"name": "remote", "kind": "openai_chat", "base_url": "https://api.example.test/v1"},
    )
    assert created.status_code == 201
    endpoint_id = created.get_json()["id"]
    assert_refused(
        client_a.patch(f"/api/endpoints/{endpoint_id}", json={"base_url": "http://127.0.0.1:9/v1"})
    )
    assert (
        client_a.get("/api/endpoints").get_json()["endpoints"][0]["base_url"]
        == "https://api.example.test/v1"
    )


def test_a_stored_loopback_endpoint_of_a_non_admin_is_refused_at_use(multi_app, users, client_a):
    port = closed_port()
    with multi_app.app_context():
        endpoint = Endpoint(
            user_id=users["a"].id,
            name="sneaky",
            kind="openai_chat",
            base_url=f"http://127.0.0.1:{port}/v1",
        )
        db.session.add(endpoint)
        db.session.commit()
        endpoint_id = endpoint.id
    message = assert_refused(
        client_a.get(f"/api/endpoints/{endpoint_id}/models?refresh=1"), status=403
    )
    assert str(port) not in message


def test_an_admin_may_use_loopback_and_errors_name_no_port(admin_client):
    port = closed_port()
    created = admin_client.post(
        "/api/endpoints",
        json={"name": "Ollama", "kind": "openai_chat", "base_url": f"http://127.0.0.1:{port}/v1"},
    )
    assert created.status_code == 201
    response = admin_client.get(f"/api/endpoints/{created.get_json()['id']}/models?refresh=1")
    error = response.get_json()["error"]
    assert response.status_code == 502 and error["code"] == "provider_unavailable"
    assert str(port) not in error["message"] and "127.0.0.1" not in error["message"]


def test_every_redirect_an_endpoint_follows_is_checked(sqlite_app, web):
    """A guarded connection (a non-admin's endpoint or MCP server) checks every hop: here the
    first hop is allowed, the redirect to another loopback address is not."""
    from numi import addresses
    from numi.providers import ProviderError, get_adapter

    policy = addresses.AddressPolicy(allowed_hosts=("127.0.0.1",))
    adapter = get_adapter(
        "openai_chat",
        f"{web.page_url}/v1",
        "key",
        max_retries=0,
        transport=addresses.guarded_transport(policy),
    )
    with pytest.raises(ProviderError) as refused:
        adapter.list_models()
    causes, error = [], refused.value
    while error is not None:
        causes.append(error)
        error = error.__cause__ or error.__context__
    assert any(isinstance(c, addresses.AddressRefused) for c in causes), causes
    assert "127.0.0.2" not in refused.value.message
    with pytest.raises(addresses.AddressRefused):
        addresses.check_url(f"http://127.0.0.2:{web.page.server_address[1]}/", policy)


def test_the_mcp_transport_checks_every_redirect_too(web):
    """The asyncio transport the MCP SDK gets, in an OS thread with its own event loop as
    MCP sessions run: the allowed first hop answers, the redirect to 127.0.0.2 is refused."""
    import asyncio

    import gevent
    import httpx2

    from numi import addresses

    policy = addresses.AddressPolicy(allowed_hosts=("127.0.0.1",))

    async def fetch(path):
        async with httpx2.AsyncClient(
            transport=addresses.guarded_async_transport(policy), follow_redirects=True
        ) as client:
            return await client.get(f"{web.page_url}{path}")

    def run(path):
        return asyncio.run(fetch(path))

    assert b"Otters hold hands" in gevent.get_hub().threadpool.apply(run, ("/to-article",)).content
    with pytest.raises(addresses.AddressRefused):
        gevent.get_hub().threadpool.apply(run, ("/to-other-loopback",))


def test_a_turn_on_a_stored_loopback_endpoint_of_a_non_admin_is_refused(multi_app, users):
    """The check at use in a turn: the agent refuses the route before calling the model."""
    from numi.chat import chats
    from numi.turns.turn import TurnRequest

    port = closed_port()
    with multi_app.app_context():
        endpoint = Endpoint(
            user_id=users["a"].id,
            name="sneaky",
            kind="openai_chat",
            base_url=f"http://127.0.0.1:{port}/v1",
            default_model="m",
        )
        db.session.add(endpoint)
        db.session.commit()
        chat = chats.create_chat(
            users["a"].id, {"endpoint_id": endpoint.id, "model": "m"}, multi_app.config
        )
        chat_id = chat.id
    manager = turn_manager(multi_app)
    subscription, _ = manager.subscribe(chat_id)
    manager.start(TurnRequest(user_id=users["a"].id, chat_id=chat_id, message="hello"))
    events = []
    while not events or events[-1]["type"] != "turn_end":
        event = subscription.get(timeout=20)
        assert event is not None, [e["type"] for e in events]
        events.append(event)
    [error] = [e["data"] for e in events if e["type"] == "error"]
    assert error["code"] == "address_refused" and str(port) not in error["message"]


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::7f00:1",
        "64:ff9b::a9fe:a9fe",
        "2002:7f00:1::1",
        "2002:a00:1::",
        "::127.0.0.1",
        "::10.0.0.1",
        "::ffff:127.0.0.1",
        # Issue 34: local-use NAT64 maps into the operator's own network, whatever it carries.
        "64:ff9b:1::808:808",
        "64:ff9b:1:ffff::a00:1",
        "5f00::1",
        "3fff::1",
    ],
)
def test_ipv6_forms_of_internal_ipv4_addresses_are_refused(address):
    """Issue 28 item 15: NAT64, 6to4 and IPv4-compatible addresses carrying 127.0.0.1,
    10/8 or the metadata address used to pass the guard for a non-admin's endpoint."""
    from numi.addresses import AddressRefused, check_host

    def answers(host, port, type=None):
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))]

    with pytest.raises(AddressRefused):
        check_host("rebound.example", 443, getaddrinfo=answers)


def test_ipv6_forms_of_public_ipv4_addresses_pass():
    from numi.addresses import check_host

    for address in ("64:ff9b::808:808", "2002:808:808::1", "2606:4700:4700::1111"):
        check_host(
            "public.example",
            443,
            getaddrinfo=lambda h, p, type=None, a=address: [
                (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, p, 0, 0))
            ],
        )


def test_a_fetch_page_refusal_does_not_name_the_resolved_address(multi_app, users):
    """Issue 28 item 15: "resolves to 127.0.0.1" told the model what internal names resolve to."""
    with multi_app.app_context(), pytest.raises(ToolFailure) as refused:
        web_tools.FETCH_PAGE.run(
            {"url": f"http://localhost:{closed_port()}/"},
            ToolContext(user_id=users["a"].id, chat_id="c"),
        )
    assert refused.value.code == "address_refused", refused.value.text
    assert "localhost" in refused.value.text
    assert "127.0.0.1" not in refused.value.text and "::1" not in refused.value.text, (
        refused.value.text
    )
