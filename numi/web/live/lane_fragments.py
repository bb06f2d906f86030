"""A compare turn's lanes in the HTML view: one column per lane (a swipeable tab on a
phone), each streaming like a turn of its own.

`HtmlView` hands every event that carries `lane` to its `LaneSet`. Each lane is drawn by a
`LaneView`, the HTML view's own machinery run under the lane's DOM id
(`turn-{turn_id}-l{lane}`): its live part, tool cards, notices and saved messages land in
its column (partials/_compare_lanes.html). A lane's saved rows are versions beside the
shown one, so they are read without the transcript's filter (scoped to the chat). When a
lane ends its Stop gives way to its state; when the turn ends each lane that answered
offers "Continue with this", which shows that version (the transcript's own
show-version route) and the chat goes on from it.
"""

from __future__ import annotations

from typing import Any

from flask import render_template

from ...models import Message
from .tool_cards import snapshot_cards
from .fragments import HtmlView


def lane_dom_id(turn_id: str, lane: int) -> str:
    return f"{turn_id}-l{int(lane)}"


class LaneView(HtmlView):
    """One lane's column: the HTML view's rendering under the lane's own DOM id."""

    def __init__(self, chat, turn_id: str, lane: int, route: dict[str, Any] | None = None):
        super().__init__(chat)
        self.parent_turn = turn_id
        self.lane = lane
        self.route = route or {}
        self.turn_id = lane_dom_id(turn_id, lane)
        self.has_container = True
        self.running = True
        self.first_id: int | None = None  # the lane's version: its first saved answer row
        self.state: str = "running"  # running | done | stopped | failed

    def feed(self, event: dict[str, Any]) -> list[str]:
        kind, data = event["type"], event["data"]
        dom_id = self.turn_id
        if kind == "message_saved":
            if data.get("role") == "assistant" and self.first_id is None:
                self.first_id = data["message_id"]
            return self._on_message_saved(dom_id, data, None)
        if kind == "done":
            return self._end("done")
        if kind == "error":
            return self._failed(data)
        handler = getattr(self, "_on_" + kind, None)
        if handler is None or kind in ("turn_start", "turn_end", "accepted", "snapshot"):
            return []
        return handler(dom_id, data) or []

    def _failed(self, data: dict[str, Any]) -> list[str]:
        code = data.get("code")
        out = self._end("stopped" if code == "cancelled" else "failed")
        if self.saved_error != code:
            out.append(
                render_template(
                    "partials/_turn_error.html",
                    turn_id=self.turn_id,
                    chat=self.chat,
                    code=code,
                    message=data.get("message"),
                    retry=False,
                )
            )
        self.saved_error = None
        return out

    def _end(self, state: str) -> list[str]:
        self.running = False
        self.state = state
        self.content, self.reasoning, self.preparing, self.renders = "", "", {}, {}
        return [
            render_template("partials/_turn_live.html", turn_id=self.turn_id, delete=True),
            self.actions(),
        ]

    def actions(self, *, turn_over: bool = False) -> str:
        return render_template(
            "partials/_lane_actions.html",
            chat=self.chat,
            dom_id=self.turn_id,
            lane=self.lane,
            state=self.state,
            version_id=self.first_id if turn_over else None,
            model=self.route.get("model"),
            oob=True,
        )

    def restore(self, data: dict[str, Any], last_message_id: int) -> list[str]:
        """Draw the lane from a snapshot: its saved rows, then its live part."""
        out = []
        ids = list(data.get("saved_message_ids", []))
        for message in self._load_many(ids):
            if message.role == "assistant" and self.first_id is None:
                self.first_id = message.id
            if message.active and message.id <= last_message_id:
                # The page drew it in the transcript (lane 0's rows are shown): it moves
                # into its lane.
                out.append(f'<div id="msg-{message.id}" hx-swap-oob="delete"></div>')
            out.append(self._insert_message(self.turn_id, message))
        error = data.get("error")
        self.step = data.get("step", 0)
        if data.get("finished"):
            state = "done"
            if error:
                state = "stopped" if error.get("code") == "cancelled" else "failed"
            out += self._end(state)
            return out
        self.content = data.get("content", "").replace("\r\n", "\n")
        self.reasoning = data.get("reasoning", "").replace("\r\n", "\n")
        self.preparing = {
            t["call_id"]: t for t in data.get("tools", []) if t.get("status") == "preparing"
        }
        out += [
            render_template("partials/_tool_card.html", card=card, oob=True)
            for card in snapshot_cards(data)
        ]
        out.append(self._live(self.turn_id))
        return out

    def _drawable(self) -> Any:
        # A lane's rows are versions the transcript may not show: any of them but the
        # deleted ones.
        return Message.deleted_at.is_(None)


class LaneSet:
    """The lanes of the compare turn a client follows."""

    def __init__(self, chat, turn_id: str, routes: list[dict[str, Any]]):
        self.chat = chat
        self.turn_id = turn_id
        self.routes = routes
        self.views: dict[int, LaneView] = {}

    def view(self, lane: int) -> LaneView:
        view = self.views.get(lane)
        if view is None:
            route = next((r for r in self.routes if r.get("lane") == lane), None)
            view = self.views[lane] = LaneView(self.chat, self.turn_id, lane, route)
        return view

    def columns(self) -> str:
        """The lanes' columns, placed before the turn's live part (which they replace)."""
        return render_template(
            "partials/_compare_lanes.html", chat=self.chat, turn_id=self.turn_id, lanes=self.routes
        )

    def render(self, event: dict[str, Any]) -> list[str]:
        return self.view(event["data"]["lane"]).feed(event)

    def restore(self, lanes: list[dict[str, Any]], last_message_id: int) -> list[str]:
        out = [self.columns()]
        for data in lanes:
            out += self.view(data["lane"]).restore(data, last_message_id)
        return out

    def turn_over(self) -> list[str]:
        """Each lane that answered offers "Continue with this"."""
        return [
            view.actions(turn_over=True)
            for view in sorted(self.views.values(), key=lambda v: v.lane)
        ]


class ChatView(HtmlView):
    """The HTML view of a chat's events, lanes included: every event that carries `lane`
    goes to the lane's column; the rest as `HtmlView` draws them."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lane_set: LaneSet | None = None

    def render(self, event: dict[str, Any]) -> list[str]:
        kind, data = event["type"], event.get("data") or {}
        turn_id = event.get("turn_id")
        if kind == "turn_start":
            self.lane_set = None
        if kind == "lanes":
            self.lane_set = LaneSet(self.chat, turn_id, list(data.get("lanes") or []))
            return [self.lane_set.columns()]
        if data.get("lane") is not None and turn_id is not None:
            if self.lane_set is None or self.lane_set.turn_id != turn_id:
                # Joined after the lanes were announced (a replay from an event id).
                self.lane_set = LaneSet(self.chat, turn_id, [])
            return self.lane_set.render(event)
        out = super().render(event)
        if kind == "snapshot" and data.get("lanes") and not data.get("finished"):
            self.lane_set = LaneSet(self.chat, turn_id, list(data["lanes"]))
            out += self.lane_set.restore(data["lanes"], self.last_message_id)
        elif kind == "turn_end" and self.lane_set is not None and self.lane_set.turn_id == turn_id:
            out += self.lane_set.turn_over()
        return out
