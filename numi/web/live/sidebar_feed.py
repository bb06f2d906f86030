"""The sidebar's feed: `/ws/sidebar/feed`, a WebSocket that tells a page of the signed-in
user's chats that start or stop answering or get a new title (issue 36: the sidebar asked
`/chats/running` every 4 seconds instead).

The turn manager tells `chat_changed` of each change (its change hooks: a turn starts, ends,
or has its title); the feed sends each of the user's open feeds
`{"chat_id", "running", "title"}`, read then, owner-scoped, and static/js/sidebar.js marks
the chat's item. The socket takes no client message: any closes it. A stopping server
closes it with 1012 (web.live.open_sockets), as the chat sockets.

Changes reach the feeds of the process whose turn it is: with several processes
(`NUMI_REDIS_URL`), a page served by another learns of them when it next loads.
"""

from __future__ import annotations

import json
import logging

import gevent
from flask import Blueprint, current_app, g, session
from gevent.queue import Queue
from simple_websocket import ConnectionClosed
from sqlalchemy import select

from ...chat import chats
from ...errors import NotFound
from ...extensions import db, sock, turn_manager
from ...services import services
from ...models import User
from .. import access
from .open_sockets import CLOSE_SERVICE_RESTART, open_sockets

log = logging.getLogger(__name__)

bp = Blueprint("sidebar_feed", __name__)

_CLOSED = None  # what a feed's queue gets when its socket ends


class SidebarFeeds:
    """One per app: the open feeds' queues by user id."""

    def __init__(self):
        self.queues: dict[int, set[Queue]] = {}

    def tell(self, user_id: int, chat_id: str) -> None:
        for queue in list(self.queues.get(user_id, ())):
            queue.put(chat_id)


def sidebar_feeds(app) -> SidebarFeeds:
    """The app's open sidebar feeds (a Services field)."""
    return services(app).sidebar_feeds


def chat_changed(app, turn) -> None:
    """A change hook of the turn manager: tell the chat owner's feeds (never blocks)."""
    sidebar_feeds(app).tell(turn.request.user_id, turn.request.chat_id)


@sock.route("/ws/sidebar/feed", bp=bp)
def sidebar_socket(ws):
    Feed(ws).serve()


class Feed:
    """One page's feed socket."""

    def __init__(self, ws):
        self.ws = ws
        self.app = current_app._get_current_object()
        self.user_id = g.user.id
        # A login cookie's session ends with logout or a password change (as the chat
        # sockets': web.live.ws); the feed sends nothing more once it has.
        by_cookie = "user_id" in session or access.SESSION_KEY in session
        self.session_version = g.user.session_version if by_cookie else None
        self.queue: Queue = Queue()
        self.done = False
        db.session.commit()  # end the read transaction: this request may live for hours

    def serve(self) -> None:
        feeds, sockets = sidebar_feeds(self.app), open_sockets(self.app)
        feeds.queues.setdefault(self.user_id, set()).add(self.queue)
        sockets.connections.add(self)
        reader = gevent.spawn(self._read)
        try:
            if sockets.stopping:
                self.close_for_restart()
                return
            while (chat_id := self.queue.get()) is not _CLOSED:
                message = self._change(chat_id)
                if message is None:
                    break
                if message:
                    self.ws.send(json.dumps(message))
        except ConnectionClosed:
            pass  # the page went away
        finally:
            reader.kill()
            feeds.queues.get(self.user_id, set()).discard(self.queue)
            sockets.connections.discard(self)
            self.done = True

    def _read(self) -> None:
        """Wait for the socket's end; a client message ends it too (the feed takes none)."""
        try:
            self.ws.receive()
        except ConnectionClosed:
            pass
        self.queue.put(_CLOSED)

    def _change(self, chat_id: str) -> dict | None:
        """What the page is told of `chat_id` ({} for a chat it may not see), or None once
        the session has ended."""
        try:
            if self.session_version is not None and self.session_version != db.session.scalar(
                select(User.session_version).where(User.id == self.user_id)
            ):
                return None
            try:
                chat = chats.get_chat(self.user_id, chat_id)
            except NotFound:
                return {}  # deleted meanwhile
            running = chat_id in turn_manager(self.app).running_among([chat_id])
            return {"chat_id": chat_id, "running": running, "title": chat.title}
        finally:
            db.session.commit()  # no transaction held while the feed waits

    # --- what web.live.open_sockets needs ---------------------------------------------------

    def drained(self) -> bool:
        return True  # nothing held: a change is read when it is sent

    def close_for_restart(self) -> None:
        try:
            self.ws.close(reason=CLOSE_SERVICE_RESTART, message="server restarting")
        except Exception:  # the client closed first, or is gone
            pass
        self.queue.put(_CLOSED)

    def finished(self) -> bool:
        return self.done
