"""Pages: first-load weight of the chat page in headless Chromium, and server time and SQL
queries for a 5,000-message chat page, the same with 1,000 sibling versions (regenerated
answers), and a sidebar over 10,000 chats (with pins, archived chats and tags: the sidebar,
its tag filter and the Archived view)."""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from live import ACCESS_TOKEN, ROOT, LiveNumi
from numi.sign_in_links import new_code
from numi.web.bundles import BUNDLES
from stats import row

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def page_weight(runs: int = 3) -> list[dict]:
    """The chat page's first load in a fresh browser profile (no cache): bytes on the wire
    (compressed bodies and headers) and requests, over `runs` loads."""
    chromium = shutil.which("chromium")
    if chromium is None:
        return [row("page weight", "chat page (chromium missing)", [], "")]
    from playwright.sync_api import sync_playwright

    sizes, counts = [], []
    with LiveNumi() as numi:
        chat_id = numi.post("/api/session", {"title": "Weight"})["id"]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            cookies = _session_cookies(browser, numi)  # signing in is not counted
            ratios = []
            for _ in range(runs):
                context = browser.new_context()  # an empty cache each run
                context.add_cookies(cookies)
                page = context.new_page()
                finished = []
                page.on("requestfinished", lambda request: finished.append(request))
                _signed_in(page.goto(f"{numi.url}/c/{chat_id}", wait_until="networkidle"))
                assets = [r for r in finished if r.resource_type != "websocket"]
                total = static = 0
                for request in assets:
                    request_sizes = request.sizes()
                    total += (
                        request_sizes["responseBodySize"] + request_sizes["responseHeadersSize"]
                    )
                    path = urlsplit(request.url).path.removeprefix("/static/")
                    if urlsplit(request.url).path.startswith("/static/"):
                        # A bundle's floor is its members' (numi.web.bundles).
                        for member in BUNDLES.get(path, (path,)):
                            static += (ROOT / "static" / member).stat().st_size
                sizes.append(total / 1000)
                counts.append(len(assets))
                ratios.append(total / static)
                context.close()
            browser.close()
    return [
        row(
            "page weight",
            "chat page, first load: bytes transferred (compressed)",
            sizes,
            "KB",
            "≤ 60 KB",
            ratio=ratios,
            note=f"floor: the static files it loads, {static / 1000:.1f} KB on disk, uncompressed",
        ),
        row("page weight", "chat page, first load: requests", counts, "", "≤ 10"),
    ]


def offline_weight(runs: int = 3) -> list[dict]:
    """The installable page (issue 24): the chat page's first load in a fresh profile with
    everything the service worker fetches to install counted too, then its load with the
    network off. Counted from Playwright's request sizes (compressed bodies and headers),
    the worker's own requests included (PW_EXPERIMENTAL_SERVICE_WORKER_NETWORK_EVENTS)."""
    import os

    chromium = shutil.which("chromium")
    if chromium is None:
        return [row("page weight", "offline load (chromium missing)", [], "")]
    os.environ["PW_EXPERIMENTAL_SERVICE_WORKER_NETWORK_EVENTS"] = "1"
    from playwright.sync_api import sync_playwright

    first, first_requests, offline_wire, offline_cached, offline_requests = [], [], [], [], []

    def on_wire(request) -> bool:
        # The worker's precache asks again for files the page just loaded: those come from
        # the HTTP cache (immutable), with no body on the wire.
        return request.service_worker is None or request.sizes()["responseBodySize"] > 0

    def wire(requests) -> int:
        total = 0
        for request in requests:
            sizes = request.sizes()
            total += sizes["responseBodySize"] + sizes["responseHeadersSize"]
        return total

    with LiveNumi() as numi:
        chat_id = numi.post("/api/session", {"title": "Weight"})["id"]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            cookies = _session_cookies(browser, numi)  # signing in is not counted
            for _ in range(runs):
                context = browser.new_context()  # an empty cache and no worker each run
                context.add_cookies(cookies)
                finished = []
                context.on("requestfinished", lambda request: finished.append(request))
                page = context.new_page()
                _signed_in(page.goto(f"{numi.url}/c/{chat_id}", wait_until="networkidle"))
                page.wait_for_function("() => navigator.serviceWorker.controller !== null")
                page.wait_for_load_state("networkidle")
                counted = [r for r in finished if r.resource_type != "websocket" and on_wire(r)]
                first.append(wire(counted) / 1000)
                first_requests.append(len(counted))
                page.reload(wait_until="networkidle")  # the worker keeps this page now
                context.set_offline(True)
                finished.clear()
                page.reload(wait_until="load")
                page.locator("#transcript").wait_for()
                counted = [r for r in finished if r.resource_type != "websocket"]
                from_worker = [
                    r for r in counted if r.response() and r.response().from_service_worker
                ]
                offline_wire.append(wire([r for r in counted if r not in from_worker]) / 1000)
                offline_cached.append(sum(len(r.response().body()) for r in from_worker) / 1000)
                offline_requests.append(len(counted))
                context.close()
            browser.close()
    return [
        row(
            "page weight",
            "chat page, first load with the service worker installing: bytes transferred",
            first,
            "KB",
            "",
            note="compressed bodies and headers; the worker's precache requests that reach the network included",
        ),
        row("page weight", "chat page, first load with the worker: requests", first_requests, ""),
        row("page weight", "chat page, offline load: bytes from the network", offline_wire, "KB"),
        row(
            "page weight",
            "chat page, offline load: bytes served by the worker's cache (uncompressed)",
            offline_cached,
            "KB",
            note=f"in {offline_requests[-1] if offline_requests else 0} requests",
        ),
    ]


def _signed_in(response) -> None:
    # A sign-in that stopped working would measure the 401 page instead of the chat's.
    if response is None or response.status != 200:
        raise RuntimeError(f"the chat page answered {response and response.status}, not 200")


def _session_cookies(browser, numi) -> list[dict]:
    """The session cookie a browser gets from a one-time sign-in link, as `numi serve`
    prints one (the token in a URL signs no one in since the sign-in links)."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{numi.url}/sign-in?code={new_code(ACCESS_TOKEN)}", wait_until="commit")
    page.wait_for_url(f"{numi.url}/")
    cookies = context.cookies()
    context.close()
    return cookies


def long_chat(runs: int = 7) -> list[dict]:
    from sqlalchemy import event, insert

    from numi import create_app
    from numi.database import upgrade
    from numi.extensions import db
    from numi.identity import local_user
    from numi.models import Chat, ChatTag, Message

    data_dir = tempfile.mkdtemp(prefix="numi-bench-pages-")
    app = create_app(
        {"NUMI_DATA_DIR": data_dir, "NUMI_LOG_LEVEL": "WARNING", "NUMI_ACCESS_TOKEN": ACCESS_TOKEN}
    )
    upgrade(app)
    with app.test_request_context():
        user_id = local_user().id
        base = datetime.utcnow()
        # Every 500th chat pinned (20), every 5th archived, every 3rd tagged (three tags in turn).
        chats = [
            {
                "id": str(uuid.uuid4()),
                "user_id": user_id,
                "title": f"Chat {i}",
                "settings_json": None,
                "created_at": base - timedelta(minutes=i),
                "updated_at": base - timedelta(minutes=i),
                "pinned_at": base if i % 500 == 1 else None,
                "archived_at": base if i % 5 == 4 else None,
            }
            for i in range(10_000)
        ]
        db.session.execute(insert(Chat), chats)
        db.session.execute(
            insert(ChatTag),
            [
                {"chat_id": chat["id"], "user_id": user_id, "tag": f"tag {i % 9 // 3}"}
                for i, chat in enumerate(chats)
                if i % 3 == 0
            ],
        )
        long_id, versions_id = chats[0]["id"], chats[1]["id"]
        text = "**markdown** with `code` and a [link](https://example.org).\n\n- a\n- b"
        # Ids and parents are given: a bulk insert computes the parent default once for all rows.
        db.session.execute(
            insert(Message),
            [
                {
                    "id": i + 1,
                    "parent_id": i,
                    "chat_id": long_id,
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"Message {i}: {text}",
                    "created_at": base,
                }
                for i in range(5000)
            ],
        )
        db.session.execute(insert(Message), versions_chat(versions_id, 5001, text, base))
        db.session.commit()
        queries = {"count": 0}
        event.listen(
            db.engine,
            "before_cursor_execute",
            lambda *a, **k: queries.__setitem__("count", queries["count"] + 1),
        )
    client = app.test_client()
    bearer = {"Authorization": f"Bearer {ACCESS_TOKEN}"}
    results = []
    for label, url, headers, target in (
        ("chat page of 5,000 messages", f"/c/{long_id}", {**bearer}, "≤ 100 ms"),
        (
            "chat page of 5,000 messages with 1,000 sibling versions",
            f"/c/{versions_id}",
            {**bearer},
            "≤ 100 ms",
        ),
        ("sidebar over 10,000 chats", "/chats", {"HX-Request": "true", **bearer}, "≤ 50 ms"),
        (
            "sidebar over 10,000 chats, tag filter",
            "/search?q=&mode=titles&tag=tag%201",
            {"HX-Request": "true", **bearer},
            "≤ 50 ms",
        ),
        ("Archived view over 10,000 chats", "/archived", {**bearer}, "≤ 50 ms"),
    ):
        times, counts = [], []
        client.get(url, headers=headers)  # warm templates
        for _ in range(runs):
            queries["count"] = 0
            started = time.perf_counter()
            response = client.get(url, headers=headers)
            times.append((time.perf_counter() - started) * 1000)
            counts.append(queries["count"])
            assert response.status_code == 200
        results.append(row("long chat", f"server time, {label}", times, "ms", target))
        results.append(row("long chat", f"SQL queries, {label}", counts, "", "constant"))
    shutil.rmtree(data_dir, ignore_errors=True)
    return results


def versions_chat(chat_id: str, first_id: int, text: str, created_at) -> list[dict]:
    """5,000 rows: 2,000 turns; each of the last 500 answers was regenerated twice, so it has
    two inactive sibling versions (1,000 in all) right where the page opens."""
    rows, next_id, tip = [], first_id, 0
    for turn in range(2000):
        question = next_id
        rows.append(
            {
                "id": question,
                "parent_id": tip,
                "chat_id": chat_id,
                "role": "user",
                "content": f"Question {turn}: {text}",
                "created_at": created_at,
            }
        )
        next_id += 1
        for old in range(2 if turn >= 1500 else 0):
            rows.append(
                {
                    "id": next_id,
                    "parent_id": question,
                    "chat_id": chat_id,
                    "role": "assistant",
                    "content": f"Old answer {turn}.{old}: {text}",
                    "selected": False,
                    "active": False,
                    "created_at": created_at,
                }
            )
            next_id += 1
        rows.append(
            {
                "id": next_id,
                "parent_id": question,
                "chat_id": chat_id,
                "role": "assistant",
                "content": f"Answer {turn}: {text}",
                "created_at": created_at,
            }
        )
        tip = next_id
        next_id += 1
    return rows


def picker_chat(runs: int = 7) -> list[dict]:
    """Server time and HTML of a chat page of 100 messages (50 answers, each with
    Regenerate's model picker) over 3 endpoints of 30 models; the floor is the same page
    with the endpoints removed (no pickers' options), measured in the same run."""
    from sqlalchemy import insert

    from numi import create_app
    from numi.database import upgrade
    from numi.extensions import db
    from numi.identity import local_user
    from numi.models import Chat, Endpoint, Message, utcnow

    data_dir = tempfile.mkdtemp(prefix="numi-bench-picker-")
    app = create_app(
        {"NUMI_DATA_DIR": data_dir, "NUMI_LOG_LEVEL": "WARNING", "NUMI_ACCESS_TOKEN": ACCESS_TOKEN}
    )
    upgrade(app)
    with app.test_request_context():
        user_id = local_user().id
        endpoints = []
        for e in range(3):
            endpoint = Endpoint(
                user_id=None,
                name=f"endpoint {e}",
                kind="openai_chat",
                base_url="http://127.0.0.1:9/v1",
                default_model=f"model-{e}-0",
            )
            endpoint.models = [
                {"id": f"model-{e}-{i}", "context_window": 131072} for i in range(30)
            ]
            endpoint.models_fetched_at = utcnow()  # fresh: no background fetch
            db.session.add(endpoint)
            endpoints.append(endpoint)
        db.session.commit()
        chat_id, now = str(uuid.uuid4()), datetime.utcnow()
        db.session.execute(
            insert(Chat),
            [
                {
                    "id": chat_id,
                    "user_id": user_id,
                    "title": "Pickers",
                    "endpoint_id": endpoints[0].id,
                    "model": "model-0-1",
                    "created_at": now,
                    "updated_at": now,
                }
            ],
        )
        db.session.execute(
            insert(Message),
            [
                {
                    "id": i + 1,
                    "parent_id": i or None,
                    "chat_id": chat_id,
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"Message {i}",
                    "created_at": now,
                }
                for i in range(100)
            ],
        )
        db.session.commit()
        endpoint_ids = [e.id for e in endpoints]
    client = app.test_client()
    bearer = {"Authorization": f"Bearer {ACCESS_TOKEN}"}

    def timed() -> tuple[list[float], int]:
        client.get(f"/c/{chat_id}", headers=bearer)  # warm templates
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            response = client.get(f"/c/{chat_id}", headers=bearer)
            times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200
        return times, len(response.data)

    times, size = timed()
    with app.app_context():
        for endpoint_id in endpoint_ids:
            db.session.get(Endpoint, endpoint_id).deleted_at = utcnow()
        db.session.commit()
    floor, floor_size = timed()
    shutil.rmtree(data_dir, ignore_errors=True)
    label = "chat page of 50 answers, 3 endpoints of 30 models"
    return [
        row(
            "pickers",
            f"server time, {label}",
            times,
            "ms",
            "≤ 2× the page without endpoints",
            ratio=[t / f for t, f in zip(times, floor)],
        ),
        row(
            "pickers",
            f"HTML, {label} (without endpoints: {floor_size // 1024} KB)",
            [size / 1024],
            "KB",
        ),
    ]


def measure() -> list[dict]:
    return page_weight() + offline_weight() + long_chat() + picker_chat()
