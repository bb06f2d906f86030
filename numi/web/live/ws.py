"""The WebSocket route `/ws/<chat_id>`: one chat's live turns, as HTML (default) or JSON.

Checks happen before the upgrade: the Host, Origin and user guards run in web.security,
and the chat's owner is checked here in before_request, so a foreign or deleted chat is a
plain 404 and no socket is opened.

The handler owns its socket. It loops on `ws.receive()` for client messages (`send`,
`stop`, `resume`, `approve`) while one sender greenlet relays the chat's events; every
send goes through one lock, since both may write. A send with `queue: true` while a turn
runs is queued (numi.agent.sending): the sender gets its acknowledgment here, every client
the `queue` event. A closed browser ends the connection, never the turn. A stopping
server closes its sockets with 1012 once its turns are saved (web.live.open_sockets).
"""

from __future__ import annotations

import json
import logging
import struct

import gevent
from flask import (
    Blueprint,
    copy_current_request_context,
    current_app,
    g,
    render_template,
    request,
    session,
)
from gevent.lock import Semaphore
from simple_websocket import ConnectionClosed
from sqlalchemy import select
from wsproto.connection import ConnectionState
from wsproto.utilities import LocalProtocolError

from ...agent.send import Send
from ...agent.sending import AlreadySaved, Queued, Started, start_turn, stop_turn
from ...chat import chats, followups
from ...errors import NumiError, first_line, is_storage_failure, storage_unavailable
from ...extensions import db, sock, turn_manager
from ...models import QueuedMessage, User
from ...services import services
from ...turns.channel import encoded
from .. import access
from ..pages.chat import interrupted_turn
from .lane_fragments import ChatView
from .message_rate import socket_bucket
from .open_sockets import CLOSE_SERVICE_RESTART, open_sockets
from ..request_kind import request_client
from .streams import parse_client_message

log = logging.getLogger(__name__)

bp = Blueprint("ws", __name__)

# How many queued events one WebSocket message may carry (HTML view).
MAX_BATCH = 256

# The close code of a socket that sent messages too fast (RFC 6455: policy violation).
CLOSE_FLOODING = 1008
# A relay that failed to draw an event (a bug) closes with this: the page reconnects and
# resumes from its last event on a new connection, instead of waiting for events that this
# relay would never send.
CLOSE_RELAY_FAILED = 1011

# A subscription that failed because Redis is unreachable is tried again after this long,
# doubling up to the longest wait.
RESUBSCRIBE_FIRST_DELAY = 0.5
RESUBSCRIBE_MAX_DELAY = 5.0


@bp.before_request
def _owner_check():
    chat_id = (request.view_args or {}).get("chat_id")
    if chat_id is not None:
        chats.get_chat(g.user.id, chat_id)


@sock.route("/ws/<chat_id>", bp=bp)
def chat_socket(ws, chat_id: str):
    Connection(ws, chat_id, as_json=request.args.get("format") == "json").serve()


class Connection:
    """One client socket on one chat."""

    def __init__(self, ws, chat_id: str, *, as_json: bool):
        self.ws = ws
        self.chat_id = chat_id
        self.as_json = as_json
        self.app = current_app._get_current_object()
        # Plain values: the request's session is released between messages.
        self.user_id, self.is_admin = g.user.id, bool(g.user.is_admin)
        # A login cookie's session (multi-user mode) ends with logout or a password change,
        # a single-user browser's with Sign out (auth.logout); so does its
        # socket, at its next message. Bearer tokens are not sessions.
        by_cookie = "user_id" in session or access.SESSION_KEY in session
        self.session_version = g.user.session_version if by_cookie else None
        self.client = request_client("websocket")  # kept with each question it sends
        self.ended = False
        self.manager = turn_manager(self.app)
        self.lock = Semaphore()
        self.frames = _frame_protocol(ws)
        self.subscription = None
        self.sender: gevent.Greenlet | None = None
        self.relaying = False  # the sender holds events it has not sent yet
        # Tries the subscription again while Redis is unreachable (`subscribe`).
        self.resubscriber: gevent.Greenlet | None = None
        self.done = False  # serve() has returned
        self.chat = chats.get_chat(self.user_id, chat_id)
        db.session.expunge(
            self.chat
        )  # the views read its id and title long after this request's query
        self.view = None
        self.bucket = socket_bucket(self.app.config)
        self.user_buckets = services(self.app).ws_user_buckets
        db.session.commit()  # end the read transaction: this request may live for hours

    def serve(self) -> None:
        registry = open_sockets(self.app)
        registry.connections.add(self)
        try:
            if registry.stopping:  # a page reconnecting to a server that stops: elsewhere
                self.close_for_restart()
                return
            while True:
                raw = self.ws.receive()
                if raw is None:
                    break
                if not self._within_rate():
                    self._close_flooding()
                    break
                self.handle(raw)
                if self.ended:
                    break
        except ConnectionClosed:
            pass  # the client closed, or its connection broke while we answered it
        finally:
            registry.connections.discard(self)
            self.done = True
            self._stop_resubscribing()
            self.unsubscribe()
            # A client going away is ordinary (tabs close, laptops sleep): INFO, no trace.
            log.info("WebSocket client of chat %s went away", self.chat_id)

    def handle(self, raw) -> None:
        try:
            if self.session_version is not None and not self._session_current():
                self.ended = True
                raise NumiError("auth_required", "You have been logged out. Log in again.", 401)
            message = parse_client_message(raw, self.app.config)
            kind = message["type"]
            if kind == "resume":
                self.subscribe(
                    message.get("last_event_id"),
                    message.get("last_message_id"),
                    message.get("turn_id"),
                )
            elif kind == "send":
                if self.subscription is None:
                    self.subscribe(self.manager.last_event_id(self.chat_id), None, None)
                if self.view is not None:
                    self.view.pending_send = True
                send = Send.from_payload(message, self.app.config)
                match start_turn(
                    self.user_id, self.is_admin, self.chat_id, send, client=self.client
                ):
                    case Started():
                        pass  # its events come through this socket's subscription
                    case Queued(item):
                        self.send_queued(send.request_id, item)
                    case AlreadySaved():
                        self.send_queued(send.request_id, None)
            elif kind == "stop":
                stop_turn(
                    self.chat_id,
                    self.user_id,
                    clear_queue=message.get("clear_queue"),
                    lane=message.get("lane"),
                    write=message.get("write"),
                )
            elif kind == "approve":
                if not self.manager.approve(
                    self.chat_id, message["call_id"], message["decision"], message.get("digest")
                ):
                    raise NumiError(
                        "no_such_approval", "That tool call is not waiting for approval.", 409
                    )
        except NumiError as exc:
            self.send_error(exc.code, exc.message)
        except Exception as exc:
            db.session.rollback()
            if is_storage_failure(exc):  # an outage, not a bug: one line, a clear code
                log.error("WebSocket message of chat %s: storage unavailable: %s",
                          self.chat_id, first_line(exc))  # fmt: skip
                refusal = storage_unavailable()
                self.send_error(refusal.code, refusal.message)
                return
            # A bug in handling one message must not drop the socket (and the page's stream).
            log.exception("handling a WebSocket message failed")
            self.send_error(
                "internal_error", "Something went wrong on the server. The log has the details."
            )
        finally:
            db.session.remove()

    def _within_rate(self) -> bool:
        # Both buckets are charged: the socket's own, and its user's across their sockets.
        within_socket = self.bucket.take()
        return self.user_buckets.take(self.user_id) and within_socket

    def _close_flooding(self) -> None:
        """Tell the client why, then close: what it sent after the limit is never read."""
        log.warning("closing a WebSocket of user %s: too many messages", self.user_id)
        try:
            refusal = NumiError(
                "rate_limited_client",
                "Too many messages on this connection: it was closed. Reload to reconnect.",
                429,
            )
            self.send_error(refusal.code, refusal.message)
            with self.lock:
                self.ws.close(reason=CLOSE_FLOODING, message="too many messages")
            # Closing the TCP socket while the flood is still arriving resets it, and a
            # reset can drop the frames above before the client reads them: the reader ends
            # when the client's close reply (or anything) comes, so wait for it, briefly.
            reader = getattr(self.ws, "thread", None)
            if reader is not None:
                reader.join(timeout=2)
        except ConnectionClosed:
            pass
        finally:
            db.session.remove()

    def drained(self) -> bool:
        """Whether the sender has sent every event handed to this socket so far."""
        subscription = self.subscription
        return subscription is None or (subscription.queue.empty() and not self.relaying)

    def close_for_restart(self) -> None:
        """Close with 1012 (service restart): the page reconnects, to a server that runs."""
        with self.lock:
            try:
                self.ws.close(reason=CLOSE_SERVICE_RESTART, message="server restarting")
            except (ConnectionClosed, LocalProtocolError, OSError):
                pass  # the client closed first, or is gone
        # serve() waits in receive() for the client's close reply; a client that never
        # sends one must not hold the stopping process, so it is woken now.
        self.ws.event.set()

    def finished(self) -> bool:
        return self.done

    def _session_current(self) -> bool:
        version = db.session.execute(
            select(User.session_version).where(User.id == self.user_id)
        ).scalar()
        return version == self.session_version

    # --- events -----------------------------------------------------------------------------

    def subscribe(self, last_event_id, last_message_id, client_turn_id) -> None:
        """(Re)start relaying the chat's events after `last_event_id`. When Redis cannot
        be reached, the client is told `live_unavailable` (raised) and the subscription is
        tried again until it holds: a socket left without one would show nothing more."""
        self._stop_resubscribing()
        try:
            self._subscribe(last_event_id, last_message_id, client_turn_id)
        except NumiError as exc:
            if exc.code != "live_unavailable":
                raise
            self.unsubscribe()
            self.resubscriber = gevent.spawn(
                copy_current_request_context(self._resubscribe),
                last_event_id,
                last_message_id,
                client_turn_id,
            )
            raise

    def _resubscribe(self, *subscribe_args) -> None:
        delay = RESUBSCRIBE_FIRST_DELAY
        while not (self.ended or self.done):
            gevent.sleep(delay)
            try:
                self._subscribe(*subscribe_args)
                return
            except NumiError as exc:
                self.unsubscribe()
                if exc.code != "live_unavailable":
                    self.send_error(exc.code, exc.message)
                    return
            except ConnectionClosed:
                return
            finally:
                db.session.remove()
            delay = min(delay * 2, RESUBSCRIBE_MAX_DELAY)

    def _stop_resubscribing(self) -> None:
        if self.resubscriber is not None and self.resubscriber is not gevent.getcurrent():
            self.resubscriber.kill(block=False)
        self.resubscriber = None

    def _subscribe(self, last_event_id, last_message_id, client_turn_id) -> None:
        self.unsubscribe()
        subscription, backlog = self.manager.subscribe(self.chat_id, last_event_id)
        self.subscription = subscription
        # Both views: a client following a turn the server no longer knows is told it ended.
        backlog = self._lost_turn(client_turn_id, backlog) + backlog
        if not self.as_json:
            self.view = ChatView(
                self.chat,
                last_message_id=last_message_id or 0,
                client_turn_id=client_turn_id,
            )
            # What waits in the queue now: the page may have missed changes while away.
            items = [item.to_dict() for item in followups.list_items(self.user_id, self.chat_id)]
            db.session.commit()
            backlog.insert(
                0,
                {
                    "event_id": None,
                    "turn_id": None,
                    "type": "queue",
                    "data": {
                        "items": items,
                        "paused": bool(items) and not self.manager.is_running(self.chat_id),
                    },
                },
            )
        self.relaying = bool(backlog)
        # A copy of this request's context: templates build URLs, and the sender greenlet
        # gets its own app context (and so its own database session).
        self.sender = gevent.spawn(copy_current_request_context(self._relay), subscription, backlog)

    def _lost_turn(self, client_turn_id, backlog) -> list[dict]:
        """Events that close a live turn the page still shows but the server no longer
        knows (it restarted mid-turn): the page's Stop and live text go, and when the
        transcript ends without an answer it gets the `interrupted` notice with Retry."""
        if not client_turn_id or backlog:
            return []
        status = self.manager.status(self.chat_id)  # any process's turn (with Redis)
        if status["running"] or status["turn_id"] == client_turn_id:
            return []
        events = []
        recent = chats.list_messages(self.chat, limit=3).items
        if interrupted_turn(recent):
            events.append(
                {
                    "event_id": None,
                    "turn_id": client_turn_id,
                    "type": "error",
                    "data": {
                        "code": "interrupted",
                        "message": "This answer was interrupted: the server stopped before it finished.",
                    },
                }
            )
        db.session.commit()
        events.append({"event_id": None, "turn_id": client_turn_id, "type": "turn_end", "data": {}})
        return events

    def unsubscribe(self) -> None:
        if self.subscription is not None:
            self.subscription.close()
            self.subscription = None
        if self.sender is not None and self.sender is not gevent.getcurrent():
            self.sender.kill(block=False)
            self.sender = None

    def _relay(self, subscription, backlog) -> None:
        """Send the backlog, then live events, until the subscription closes."""
        try:
            pending = list(backlog)
            while not subscription.closed:
                if not pending:
                    self.relaying = False
                    event = subscription.get()
                    if event is None:
                        return
                    pending.append(event)
                self.relaying = True
                if not self.as_json:
                    # Everything already queued goes out in one message.
                    while (
                        len(pending) < MAX_BATCH
                        and not subscription.queue.empty()
                        and not subscription.resync
                    ):
                        event = subscription.get(timeout=0)
                        if event is None:
                            break
                        pending.append(event)
                batch, pending = pending, []
                self._send_events(batch)
                if not self.as_json:
                    # The HTML view reads saved messages; hand the connection back now. Kept
                    # until the socket closes, every open tab would hold one of the pool's
                    # few connections (the 16th stream waited 30 s and failed) and an open
                    # read transaction that keeps SQLite's WAL from being checkpointed.
                    db.session.remove()
        except ConnectionClosed:
            pass  # the browser went away; the turn goes on regardless (serve logs it)
        except Exception:
            log.exception("relay to a client failed: closing it, so that the page resumes")
            self._close_relay_failed()
        finally:
            db.session.remove()

    def _close_relay_failed(self) -> None:
        """Close with 1011: the page's events stopped here, and it would wait for them
        silently until reloaded. It reconnects and resumes from the last event it drew (its
        cursor), on a connection whose view starts afresh."""
        with self.lock:
            try:
                self.ws.close(reason=CLOSE_RELAY_FAILED, message="resume")
            except (ConnectionClosed, LocalProtocolError, OSError):
                pass  # the client closed first, or is gone

    def _send_events(self, events) -> None:
        if self.as_json:
            for event in events:
                self._send(encoded(event))  # the JSON made once when the event was published
            return
        parts: list[str] = []
        for event in events:
            parts.extend(self.view.render(event))
        numbered = [e["event_id"] for e in events if e["event_id"] is not None]
        if numbered:  # (events made here for a lost turn carry no id)
            parts.append(self.view.cursor(numbered[-1]))
        self._send("".join(parts))

    def send_queued(self, request_id: str | None, item: QueuedMessage | None) -> None:
        """This client's send waits in the queue (or was saved before): its composer may
        clear. Every client sees the queue itself through the channel's `queue` event."""
        if self.as_json:
            self._send(
                json.dumps(
                    {
                        "event_id": None,
                        "turn_id": None,
                        "type": "queued",
                        "data": {
                            "request_id": request_id,
                            "item": item.to_dict() if item is not None else None,
                        },
                    },
                    ensure_ascii=False,
                )
            )
        else:
            self.view.pending_send = False
            self._send(
                render_template("partials/_composer_feedback.html", accepted=request_id or "")
            )

    def send_error(self, code: str, message: str) -> None:
        event = {
            "event_id": None,
            "turn_id": None,
            "type": "error",
            "data": {"code": code, "message": message},
        }
        if self.as_json:
            self._send(json.dumps(event))
        else:
            view = self.view or ChatView(self.chat)
            self._send("".join(view.render(event)))

    def _send(self, data: str) -> None:
        with self.lock:
            try:
                if self.frames is None:
                    self.ws.send(data)
                else:
                    self._write_text(data)
            except OSError as exc:
                # A reset or broken pipe: the client is gone, as with a close. The reader
                # sees it too and ends `serve`.
                self.ws.connected = False
                raise ConnectionClosed(None, type(exc).__name__) from None

    def _write_text(self, data: str) -> None:
        """One unfragmented text message, framed here and written whole.

        simple_websocket's `send` builds wsproto event objects and serialises the frame
        through wsproto's extension chain for every message, then writes it with a plain
        `send` (which may write part of it): that was 14-19 % of a streaming server's CPU
        (bench/PROFILE.md). A server's frame is unmasked, so its header is 2 to 10 bytes;
        with no extension negotiated it is all wsproto would produce. Close, ping and pong
        stay with simple_websocket (its reader answers them; this lock is not theirs, as
        before). `sendall` writes the frame whole even when the socket buffer is full."""
        ws = self.ws
        if not ws.connected:
            raise ConnectionClosed(ws.close_reason, ws.close_message)
        if self.frames.state is not ConnectionState.OPEN:
            ws.send(data)  # closing: wsproto refuses the message as it always did
            return
        payload = data.encode()
        size = len(payload)
        if size < 126:
            header = bytes((0x81, size))  # FIN + text opcode; length in the second byte
        elif size < 65536:
            header = struct.pack("!BBH", 0x81, 126, size)
        else:
            header = struct.pack("!BBQ", 0x81, 127, size)
        ws.sock.sendall(header + payload)


def _frame_protocol(ws):
    """The socket's wsproto connection when this module may frame messages itself: a
    server connection with no extension in use. With permessage-deflate (browsers offer
    it) messages go through simple_websocket, which compresses them."""
    connection = getattr(getattr(ws, "ws", None), "connection", None)
    proto = getattr(connection, "_proto", None)
    if proto is None or proto.client or proto.extensions or not hasattr(ws, "sock"):
        return None
    return connection
