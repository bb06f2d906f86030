"""Compare: one question answered by 2 to 4 routes at once, in lanes.

A send with `compare: [{endpoint_id, model}, ...]` is one turn with one turn_id. The
`CompareAgent` saves the question as any turn does, announces the lanes (`lanes` event:
each lane's number, endpoint and model), then runs each lane in a greenlet of its own
with its own app context and database session. A lane is a whole `Agent` on a
`LaneTurn` (turns/turn.py): its own provider stream with the adapter's retries and idle
deadline, its own fallbacks (the chat's chain without the compared routes), tools,
approvals and Stop; every event it emits carries `lane`. `turn_end` comes once, after
every lane has ended (the manager emits it when this agent returns).

Every lane's answer is a version of the same answer: its first row's parent is the
question (`LaneContext` saves with an explicit parent), lane 0's is the version shown and
the others are saved unselected beside it, so the ‹ n/m › switcher, exports and imports
carry them; "Continue with this" is switching to that version. A lane that answers in
several steps (tools) saves them below its own first row, and reads its history from its
own branch, not from the shown one. Lanes share nothing but the question.
"""

from __future__ import annotations

import logging
from typing import Any

import gevent
from sqlalchemy import and_, false, or_, select

from .. import endpoints as endpoint_store
from ..chat import versions
from ..chat.context import ChatContextService, ChatMeta
from ..errors import NotFound, NumiError
from ..extensions import db
from ..models import Message
from ..turns.turn import LaneTurn
from .routes import Route, fallback_chain
from .runtime import Agent
from .step import StepResult

log = logging.getLogger(__name__)

MAX_LANES = 4


# --- the send's `compare` field -----------------------------------------------------------


def compare_routes(value: Any) -> tuple[tuple[int, str], ...] | None:
    """The routes of a send's `compare` field as (endpoint_id, model) pairs, their form
    checked (None: no compare): 2 to 4 entries, each `{endpoint_id, model}` or, from the
    page's form, the text "endpoint_id:model". Whether the user may use each endpoint is
    `check_compare`'s, when the turn starts."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = [value]  # the page's form: one checked route is one value, not a list
    if not isinstance(value, list):
        raise NumiError(
            "compare_invalid", "compare must be a list of routes: {endpoint_id, model}.", 400
        )
    if len(value) < 2:
        raise NumiError(
            "compare_too_few",
            f"Compare needs 2 to {MAX_LANES} routes (endpoint and model); it got {len(value)}.",
            400,
        )
    if len(value) > MAX_LANES:
        raise NumiError(
            "compare_too_many",
            f"Compare takes at most {MAX_LANES} routes at once; it got {len(value)}.",
            400,
        )
    routes: list[tuple[int, str]] = []
    for number, entry in enumerate(value, 1):
        if isinstance(entry, str) and ":" in entry:
            entry = dict(zip(("endpoint_id", "model"), entry.split(":", 1)))  # "3:model"
        endpoint_id = entry.get("endpoint_id") if isinstance(entry, dict) else None
        model = entry.get("model") if isinstance(entry, dict) else None
        if isinstance(endpoint_id, str) and endpoint_id.isdecimal() and len(endpoint_id) <= 18:
            endpoint_id = int(endpoint_id)
        if (
            not isinstance(endpoint_id, int)
            or isinstance(endpoint_id, bool)
            or not isinstance(model, str)
            or not model.strip()
            or len(model) > 200
        ):
            raise NumiError(
                "compare_invalid",
                f"Route {number} of compare needs an endpoint_id (a number) and a model (text).",
                400,
            )
        routes.append((endpoint_id, model.strip()))
    return tuple(routes)


def check_compare(user_id: int, routes: tuple[tuple[int, str], ...]) -> list[dict[str, Any]]:
    """The compared routes as the turn takes them (`{endpoint_id, model}`), once each is an
    endpoint the user can use, enabled, and no route comes twice."""
    checked: list[dict[str, Any]] = []
    seen: set[tuple[int, str]] = set()
    for number, (endpoint_id, model) in enumerate(routes, 1):
        try:
            endpoint = endpoint_store.get_endpoint(user_id, endpoint_id)
        except NotFound:
            endpoint = None
        if endpoint is None or not endpoint.enabled:
            raise NumiError(
                "compare_route_not_found",
                f"Route {number} of compare names endpoint {endpoint_id}, which does not exist, "
                "is not yours or is turned off.",
                404,
            )
        if (endpoint.id, model) in seen:
            raise NumiError(
                "compare_duplicate_route",
                f"Route {number} of compare repeats {model} on {endpoint.name}: "
                "compare each route once.",
                400,
            )
        seen.add((endpoint.id, model))
        checked.append({"endpoint_id": endpoint.id, "model": model})
    return checked


def compare_unsupported(action: str) -> NumiError:
    """The refusal of a compare where one version is answered (an edit, a regenerate, a
    retry), saying which."""
    return NumiError(
        "compare_unsupported",
        f"Compare is not available on {action}: it answers one new question. "
        "Send the question with compare instead.",
        400,
    )


def refuse_compare(data: dict[str, Any], action: str) -> None:
    """An edit or a regenerate answers in one version: a `compare` there is refused,
    saying which, before anything changes."""
    if data.get("compare") not in (None, "", []):
        raise compare_unsupported(action)


# --- the turn -----------------------------------------------------------------------------


def lane_routes(user_id: int, meta: ChatMeta, compare: list[dict[str, Any]]) -> list[list[Route]]:
    """Each lane's route, then its fallbacks: the chat's chain without any compared route
    (a lane must not fall back onto another lane's model)."""
    primaries = []
    for entry in compare:
        endpoint = endpoint_store.get_endpoint(user_id, entry["endpoint_id"])
        endpoint_store.check_address(endpoint)
        endpoint_store.refresh_when_stale(endpoint)
        primaries.append(Route.of(endpoint, entry["model"]))
    taken = {(route.endpoint_id, route.model) for route in primaries}
    fallbacks: list[Route] = []
    for fallback in fallback_chain(user_id, meta.settings, meta.project_id):
        try:
            endpoint = endpoint_store.get_endpoint(
                user_id, int(fallback.get("endpoint_id") or meta.endpoint_id or 0)
            )
            endpoint_store.check_address(endpoint)
        except (NumiError, TypeError, ValueError):
            continue
        model = fallback.get("model")
        if not (endpoint.enabled and isinstance(model, str) and model):
            continue
        if (endpoint.id, model) not in taken:
            taken.add((endpoint.id, model))
            fallbacks.append(Route.of(endpoint, model))
    return [[primary, *fallbacks] for primary in primaries]


class CompareAgent(Agent):
    """A compare turn: the question saved once, then its lanes run side by side."""

    def _routes(self, meta: ChatMeta) -> list[Route]:
        self.lanes = lane_routes(self.request.user_id, meta, self.request.options["compare"])
        for routes in self.lanes[1:]:  # the agent checks the first lane's before saving
            self.window.check_attachments(routes[0])
        self.budget.lanes = self.lanes  # every lane's estimate is reserved before any starts
        return self.lanes[0]

    def _loop(self, meta: ChatMeta, routes: list[Route]) -> None:
        question_id = self.saves.tip_id
        if question_id is None:  # Agent._run saves the question before the lanes start
            raise RuntimeError("a compare turn reached its lanes without a saved question")
        self._started()
        self.context.release()
        turn = self.turn
        turn.emit(
            "lanes",
            {
                "lanes": [
                    {
                        "lane": number,
                        "endpoint_id": chain[0].endpoint_id,
                        "model": chain[0].model,
                        "endpoint": chain[0].endpoint_name,
                    }
                    for number, chain in enumerate(self.lanes)
                ]
            },
        )
        agents: list[LaneAgent | None] = [None] * len(self.lanes)
        greenlets = [
            gevent.spawn(self._run_lane, LaneTurn(turn, number), chain, question_id, agents)
            for number, chain in enumerate(self.lanes)
        ]
        gevent.joinall(greenlets)
        if not turn.lost:
            self._settle(question_id, agents)

    def _run_lane(
        self,
        lane: LaneTurn,
        routes: list[Route],
        question_id: int,
        agents: list[LaneAgent | None],
    ) -> None:
        try:
            with self.app.app_context():
                agent = agents[lane.lane] = LaneAgent(lane, routes, question_id)
                agent.run()
        except Exception:
            log.exception("lane %s of turn %s crashed", lane.lane, self.turn.id)
            lane.emit(
                "error",
                {
                    "code": "internal_error",
                    "message": "This lane failed on the server. The log has the details.",
                },
            )

    def _settle(self, question_id: int, agents: list[LaneAgent | None]) -> None:
        """Exactly one version shows: lane 0's, or (when it saved nothing, stopped before
        its first word) the first lane that saved an answer."""
        firsts = [agent.context.own[0] for agent in agents if agent and agent.context.own]
        if not firsts:
            return
        try:
            shown = db.session.execute(
                select(Message.id).where(
                    Message.chat_id == self.request.chat_id,
                    Message.parent_id == question_id,
                    Message.id.in_(firsts),
                    Message.selected.is_(True),
                )
            ).first()
            if shown is None:
                versions.select_version(self.request.chat_id, firsts[0], question_id)
            db.session.commit()
        except Exception:
            db.session.rollback()
            log.exception("settling the versions of compare turn %s failed", self.turn.id)
        finally:
            self.context.release()


class LaneContext(ChatContextService):
    """A lane's reads and saves: its rows are versions beside the other lanes'.

    Its first row's parent is the question; lane 0's rows are the transcript (selected
    and active), the other lanes' first rows are saved unselected and their later rows
    below them. Its history is the transcript up to the question plus its own rows."""

    question_id: int = 0
    shown: bool = False

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.own: list[int] = []

    def save(self, **fields: Any) -> Message:
        first = not self.own
        message = super().save(
            **fields,
            parent_id=self.own[-1] if self.own else self.question_id,
            selected=self.shown or not first,
            active=self.shown,
        )
        self.own.append(message.id)
        return message

    def history_rows(self):
        own = Message.id.in_(self.own) if self.own else false()
        return or_(and_(Message.shown(), Message.id <= self.question_id), own)


class LaneAgent(Agent):
    """One lane: the turn loop on its own routes, context and `LaneTurn`."""

    context_class = LaneContext
    context: LaneContext  # made from context_class by Agent.__init__

    def __init__(self, turn: LaneTurn, routes: list[Route], question_id: int):
        super().__init__(turn)
        self.routes = routes
        self.context.question_id = question_id
        self.context.shown = turn.lane == 0
        self.saves.tip_id = question_id
        # Lanes run at once: one compacting the chat while another reads it would race.
        # A compare turn trims (and recovers from an overflow by trimming) instead.
        self.window.compacted = True

    def _run(self) -> None:
        meta = self.context.meta()
        self._loop(meta, self.routes)

    def _routes(self, meta: ChatMeta) -> list[Route]:
        return self.routes

    def _meta(self, route: Route, result: StepResult, step: int) -> dict[str, Any]:
        meta = super()._meta(route, result, step)
        meta["lane"] = self.turn.lane  # which lane of a compare turn saved it
        return meta
