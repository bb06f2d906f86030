"""The pages and sheets beyond the chat that `bench/screenshots.py` shoots: the Library with
a search, a project's page, Tasks with a run's history, Usage, Archived, the search
page, Settings sections (endpoints, switches, the import preview), the plain sign-in page
and the "Reconnecting…" bar. `seed` gives them something to show, through the live
server's API as a user's programs would; `shoot_pages` takes them in one browser context."""

from __future__ import annotations

import json
import re
import time
import urllib.request
import uuid
from collections.abc import Callable

from live import LiveNumi

DOCUMENTS = {
    "sourdough.md": "# Sourdough\n\nA sourdough loaf keeps four days in a bread box: its "
    "acidity slows staling and keeps mould away.\n",
    "freezing.md": "# Freezing bread\n\nSlice the loaf before freezing, then toast the slices "
    "from frozen. Frozen bread keeps three months.\n",
}


def _request(numi: LiveNumi, method: str, path: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(
        numi.url + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **numi.headers},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        raw = response.read()
    return json.loads(raw) if raw else {}


def _upload(numi: LiveNumi, name: str, text: str) -> None:
    """One document into the Library, as a multipart upload (what the page's form sends)."""
    boundary = uuid.uuid4().hex
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        f"Content-Type: text/markdown\r\n\r\n{text}\r\n--{boundary}--\r\n"
    ).encode()
    request = urllib.request.Request(
        numi.url + "/api/upload",
        data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}", **numi.headers},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60):
        pass


def _until(check: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {seconds:.0f} s")
        time.sleep(0.2)  # a one-off script polling its own server; no test waits on this


def seed(numi: LiveNumi, chat_id: str, archived_chat_id: str) -> dict:
    """Documents, a project holding the chat, a task run once, an archived chat; the ids."""
    for name, text in DOCUMENTS.items():
        _upload(numi, name, text)
    project = _request(
        numi,
        "POST",
        "/api/projects",
        {"name": "Kitchen notes", "instructions": "Answer as a baker would, briefly."},
    )
    _request(numi, "PATCH", f"/api/session/{chat_id}", {"project_id": project["id"]})
    _request(numi, "PATCH", f"/api/session/{archived_chat_id}", {"archived": True})
    endpoint = next(
        e for e in _request(numi, "GET", "/api/endpoints")["endpoints"] if "Demo" in e["name"]
    )
    task = _request(
        numi,
        "POST",
        "/api/tasks",
        {
            "name": "Morning bread digest",
            "prompt": "Which bread should I bake today?",
            "schedule": "every weekday at 8:00",
            "timezone": "Europe/Berlin",
            "endpoint_id": endpoint["id"],
        },
    )
    _request(numi, "POST", f"/api/tasks/{task['id']}/run")

    def run_ended() -> bool:
        runs = _request(numi, "GET", f"/api/tasks/{task['id']}/runs")["runs"]
        return bool(runs) and runs[0]["status"] not in ("queued", "running")

    _until(run_ended, "the task's run")
    return {"project": project["id"], "task": task["id"]}


def shoot_pages(page, url: str, ids: dict, chat_id: str, take: Callable[..., None]) -> None:
    """Each page in `page` (signed in), `take(name)` once it shows what it is for."""
    page.goto(f"{url}/library?q=keeps+four+days")
    page.locator("main").get_by_text("sourdough.md").first.wait_for()
    take("library-search")

    page.goto(f"{url}/p/{ids['project']}")
    page.get_by_text("Which bread keeps longest?").first.wait_for()
    take("project")

    page.goto(f"{url}/tasks")
    task = page.locator("li.task").first
    task.locator("details.task-history summary").click()
    task.locator(".task-history tbody tr").first.wait_for()
    task.scroll_into_view_if_needed()
    take("tasks")

    page.goto(f"{url}/usage")
    page.locator("main").wait_for()
    take("usage")
    page.goto(f"{url}/archived")
    page.get_by_text("What rises the dough?").first.wait_for()
    take("archived")
    page.goto(f"{url}/search?q=bread")
    page.locator("main .chat-list li").first.wait_for()
    take("search")

    page.goto(f"{url}/settings")
    take("settings-index")
    for section in ("endpoints", "appearance", "account"):
        page.goto(f"{url}/settings/{section}")
        take(f"settings-{section}")
    page.goto(f"{url}/settings/import")
    page.locator("form input[type=file]").first.set_input_files(
        files=[
            {
                "name": "chats.json",
                "mimeType": "application/json",
                "buffer": json.dumps(_export()).encode(),
            }
        ]
    )
    page.get_by_role("button", name="Preview", exact=True).click()
    page.locator("#import-preview .import-preview").wait_for()
    take("settings-import-preview")

    # A connection that cannot be made: each of the page's sockets is closed as it opens,
    # and the bar says so once the first retries have failed.
    cut_off = page.context.new_page()
    cut_off.route_web_socket(re.compile(r"/ws/"), lambda socket: socket.close())
    cut_off.goto(f"{url}/c/{chat_id}")
    cut_off.get_by_role("status").get_by_text("Reconnecting…").wait_for()
    take("reconnecting", cut_off)
    cut_off.close()


def _export() -> dict:
    return {
        "format": "numi.chat",
        "version": 1,
        "chat": {"title": "Rye or spelt?", "model": "gpt-4o-mini"},
        "messages": [
            {"role": "user", "content": "Rye or spelt for a dense loaf?"},
            {"role": "assistant", "content": "Rye: it holds water and bakes dense."},
        ],
    }


def shoot_signed_out(page, url: str, take: Callable[..., None]) -> None:
    """What a visitor without a session sees: the plain sign-in page."""
    page.goto(f"{url}/")
    page.locator("form").first.wait_for()
    take("sign-in")
