"""An open chat far down the chat list (issue 43): its page renders the list's first page
and the chat's neighbourhood, not every row above it; the rows between load when the list
is scrolled there (HTMX pages), and the date groups stay one header each."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest

from numi.web.pages.chat_list import AROUND_OPEN_CHAT

ITEM = re.compile(r'<li draggable="true" id="chat-([^"]+)" class="chat-item')
HEADER = re.compile(r'<li class="chat-group"( id="[^"]+")?><h2 class="chat-group-title">([^<]+)<')
LOADER = re.compile(r'<li class="load-more" hx-get="([^"]+)"')
PAGE_SIZE = 50


@pytest.fixture
def many_chats(sqlite_app, sqlite_client):
    """520 chats, one every two hours back from now, the newest now (an hour ago was
    yesterday when the suite ran between midnight and one): every date group, 11 keyset
    pages; their ids, newest first."""
    from numi.extensions import db
    from numi.identity import local_user
    from numi.models import Chat, utcnow

    sqlite_client.get("/")  # the local user exists
    with sqlite_app.app_context():
        user_id, now = local_user().id, utcnow()
        ids = [str(uuid.uuid4()) for _ in range(520)]
        db.session.add_all(
            Chat(id=chat_id, user_id=user_id, title=f"Old chat {i + 1:03d}", updated_at=stamp)
            for i, chat_id in enumerate(ids)
            for stamp in [now - timedelta(hours=2 * i)]
        )
        db.session.commit()
        db.session.remove()
    return ids


def sidebar_of(page: str) -> str:
    return page.split('id="chat-list"', 1)[1].split("</ul>", 1)[0]


def scroll_everything(client, sidebar: str) -> str:
    """The list as a browser holds it after scrolling every loader into view: each loader's
    page replaces it, and an out-of-band delete removes its header."""
    while match := LOADER.search(sidebar):
        url = match.group(1).replace("&amp;", "&")
        loaded = client.get(url, headers={"HX-Request": "true"}).get_data(as_text=True)
        for dropped in re.findall(r'<li id="([^"]+)" hx-swap-oob="delete"></li>', loaded):
            loaded = loaded.replace(f'<li id="{dropped}" hx-swap-oob="delete"></li>', "")
            sidebar = re.sub(rf'<li class="chat-group" id="{dropped}">.*?</li>', "", sidebar)
        start = sidebar.index(match.group(0))
        end = sidebar.index("</li>", start) + len("</li>")
        sidebar = sidebar[:start] + loaded + sidebar[end:]
    return sidebar


@pytest.mark.parametrize("place", [120, 450, 519])
def test_a_chat_far_down_renders_its_neighbourhood_and_loads_the_rest(
    sqlite_client, many_chats, place
):
    page = sqlite_client.get(f"/c/{many_chats[place]}").get_data(as_text=True)
    sidebar = sidebar_of(page)
    shown = ITEM.findall(sidebar)
    # The first page, then the chat with its neighbours: not the 450 rows above it.
    assert shown[:PAGE_SIZE] == many_chats[:PAGE_SIZE]
    around = many_chats[place - AROUND_OPEN_CHAT : place + AROUND_OPEN_CHAT + 1]
    assert shown[PAGE_SIZE:] == around
    assert 'class="chat-item current"' in sidebar and f'id="chat-{many_chats[place]}"' in sidebar
    # Between the two and below, a loader each, which bring in every chat once, in order.
    assert len(LOADER.findall(sidebar)) == (2 if place + AROUND_OPEN_CHAT < 519 else 1)
    whole = scroll_everything(sqlite_client, sidebar)
    assert ITEM.findall(whole) == many_chats
    headers = [name for _, name in HEADER.findall(whole)]
    assert len(headers) == len(set(headers)), headers  # one header per date group
    assert headers[:4] == ["Today", "Yesterday", "Previous 7 days", "Previous 30 days"]


def test_a_chat_just_past_the_first_page_needs_no_gap(sqlite_client, many_chats):
    """The neighbourhood begins where the first page ends: no loader between, and the date
    group the first page ends in is not headed again."""
    place = PAGE_SIZE + 3
    sidebar = sidebar_of(sqlite_client.get(f"/c/{many_chats[place]}").get_data(as_text=True))
    assert ITEM.findall(sidebar) == many_chats[: place + AROUND_OPEN_CHAT + 1]
    assert len(LOADER.findall(sidebar)) == 1  # the one below
    headers = [name for _, name in HEADER.findall(scroll_everything(sqlite_client, sidebar))]
    assert len(headers) == len(set(headers)), headers


def test_a_chat_on_the_first_page_renders_the_first_page(sqlite_client, many_chats):
    sidebar = sidebar_of(sqlite_client.get(f"/c/{many_chats[7]}").get_data(as_text=True))
    assert ITEM.findall(sidebar) == many_chats[:PAGE_SIZE]
    assert "chat-group-around" not in sidebar
