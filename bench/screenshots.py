"""Not a benchmark: re-shoots the screenshots of docs/design.md that a live `numi serve
--demo` can show (the chat and its menus; the Library, Projects, Tasks, Usage, Archived,
search and Settings pages, the sign-in page, the "Reconnecting…" bar: see
bench/screenshot_pages.py) at 1280×800 and 390×844, light and dark, from imported chats and
data seeded through the API, so they follow the page as it is now. Run from the repository
root:

    python bench/screenshots.py [--out docs/screenshots]

Look at every picture it writes before committing them."""

from __future__ import annotations

import argparse
import json
import shutil
import time
import urllib.request
from pathlib import Path

from live import ACCESS_TOKEN, ROOT, LiveNumi
from numi.sign_in_links import new_code
from pages import CHROMIUM_ARGS
from screenshot_pages import seed, shoot_pages, shoot_signed_out

SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}

ANSWER = """## Three ways to keep bread fresh

Bread goes stale as its starch recrystallises, not as it dries, so the fridge makes it *worse*.

```python
def days_fresh(method: str) -> int:
    return {"counter": 2, "bread box": 4, "freezer": 90}[method]
```

| Method | Keeps | Best for |
|---|---|---|
| Bread box | 3 to 4 days | a loaf eaten this week |
| Freezer | 3 months | slices toasted from frozen |

- [x] Slice before freezing
- [ ] Never refrigerate
"""

CHAT = {
    "format": "numi.chat",
    "version": 1,
    "chat": {"title": "Which bread keeps longest?", "model": "gpt-4o-mini"},
    "messages": [
        {"role": "user", "content": "Which bread keeps longest?"},
        {"role": "assistant", "content": "Sourdough keeps longest: its acidity slows staling."},
        {"role": "user", "content": "How do I keep it fresh?"},
        {"role": "assistant", "content": ANSWER},
    ],
}


class DemoNumi(LiveNumi):
    def command(self) -> list[str]:
        return [*super().command(), "--demo"]


ARCHIVED = {
    "format": "numi.chat",
    "version": 1,
    "chat": {"title": "What rises the dough?", "model": "gpt-4o-mini"},
    "messages": [
        {"role": "user", "content": "What rises the dough?"},
        {"role": "assistant", "content": "Yeast: it eats the flour's sugars and breathes out gas."},
    ],
}


def imported_chat(numi: LiveNumi, chat: dict = CHAT) -> str:
    """A chat the pictures show, through the JSON import; its id once the job is done."""
    request = urllib.request.Request(
        numi.url + "/api/import",
        data=json.dumps(chat).encode(),
        headers={"Content-Type": "application/json", **numi.headers},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        job = json.loads(response.read())["job"]
    while job["state"] == "running":
        time.sleep(0.1)  # a one-off script polling its own job; no test waits on this
        status = urllib.request.Request(f"{numi.url}/api/imports/{job['id']}", headers=numi.headers)
        with urllib.request.urlopen(status, timeout=60) as response:
            job = json.loads(response.read())["job"]
    if job["state"] != "done":
        raise RuntimeError(f"the import did not finish: {job}")
    return job["result"]["chat"]["id"]


def shoot(out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    written = []
    with DemoNumi() as numi, sync_playwright() as playwright:
        chat_id = imported_chat(numi)
        ids = seed(numi, chat_id, imported_chat(numi, ARCHIVED))
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS
        )
        for size, viewport in SIZES.items():
            for scheme in ("light", "dark"):
                context = browser.new_context(
                    viewport=viewport,
                    color_scheme=scheme,
                    has_touch=size == "phone",
                    is_mobile=size == "phone",
                )
                page = context.new_page()
                page.goto(f"{numi.url}/sign-in?code={new_code(ACCESS_TOKEN)}")
                page.wait_for_url(f"{numi.url}/")
                page.goto(f"{numi.url}/c/{chat_id}")
                page.wait_for_selector("#connection[data-state=open]", state="attached")
                page.get_by_text("Never refrigerate").wait_for()

                def take(name: str, target=None) -> None:
                    path = out / f"{name}-{size}-{scheme}.png"
                    (target or page).screenshot(path=str(path))
                    written.append(path)

                take("chat")
                page.locator("#transcript .msg-assistant .msg-more > summary").last.click()
                page.locator(".msg-more[open] .menu-items").last.wait_for()
                take("message-menu")
                page.keyboard.press("Escape")
                page.locator("#composer-plus > summary").click()
                page.locator("#compare-picker > summary").click()
                page.locator("#compare-picker .compare-routes").wait_for()
                take("composer-plus")
                page.keyboard.press("Escape")
                page.locator("#composer-plus").evaluate("el => { el.open = false; }")
                page.locator("#chat-more > summary").click()
                page.locator(".chat-settings > summary").click()
                page.locator(".chat-settings[open]").wait_for()
                take("chat-settings")
                page.keyboard.press("Escape")
                shoot_pages(page, numi.url, ids, chat_id, take)
                context.close()
                signed_out = browser.new_context(
                    viewport=viewport,
                    color_scheme=scheme,
                    has_touch=size == "phone",
                    is_mobile=size == "phone",
                )
                page = signed_out.new_page()
                shoot_signed_out(page, numi.url, take)
                signed_out.close()
        browser.close()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for path in shoot(args.out):
        print(path)


if __name__ == "__main__":
    main()
