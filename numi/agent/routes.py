"""Routes: which endpoint and model each step of a turn calls.

A chat's route is its endpoint and model, then its fallbacks: the chat's own
(`settings.fallbacks`), else its project's (the project's defaults), else the user's
defaults from Settings. The turn loop moves to the
next route only while nothing has been shown (DESIGN §6), and says so in words
(`FallbackNotice`): the answer's meta, the transcript and the exports carry the notice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, select

from .. import endpoints as endpoint_store
from ..chat.context import ChatContextService, ChatMeta
from ..errors import NumiError, no_model
from ..models import Endpoint, Project, User
from ..extensions import db
from ..providers.capabilities import Capabilities, listed_capabilities
from ..models.columns import loads
from ..redaction import RedactionRules
from ..redaction.rules import rules_for
from ..turns.turn import Turn

_users = User.__table__.c
_ROUTE_USER = select(_users.is_admin, _users.fallbacks_json).where(
    _users.id == bindparam("user_id")
)


@dataclass
class Route:
    """Which endpoint and model a step calls."""

    endpoint_id: int
    kind: str
    base_url: str
    api_key: str | None
    model: str
    reasoning_policy: str = "auto"
    models: list[dict] = field(default_factory=list)
    guarded: bool = False  # a non-admin's own endpoint: requests pass the address guard
    endpoint_name: str = ""
    overrides: dict = field(default_factory=dict)  # the user's settings for this model
    retries: bool = True  # False: one attempt (the endpoint is behind a retrying gateway)
    # The endpoint's privacy gateway (None: nothing redacted, as `enabled` False).
    redaction: RedactionRules | None = None
    prompt_caching: bool = True  # Anthropic: ask for cache breakpoints (the endpoint's switch)
    # `capabilities()` once worked out: a turn asks about five times, each a search of the
    # model list and the family table.
    _capabilities: Capabilities | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, endpoint: Endpoint, model: str, guarded: bool | None = None) -> Route:
        """The route to `model` on `endpoint`; `guarded` as `endpoints.guarded` (read
        when not given)."""
        return cls(
            endpoint.id,
            endpoint.kind,
            endpoint.base_url,
            endpoint.api_key,
            model,
            endpoint.reasoning_policy,
            endpoint.models,
            endpoint_store.guarded(endpoint) if guarded is None else guarded,
            endpoint.name,
            endpoint.model_capabilities.get(model) or {},
            endpoint.retries,
            rules_for(endpoint.settings.get("redaction"), endpoint.base_url),
            endpoint.settings.get("prompt_caching", True) is not False,
        )

    def capabilities(self) -> Capabilities:
        """What the route's model can do: as the user set it on the endpoint, else as its
        model list reports it, else assumed."""
        if self._capabilities is None:
            self._capabilities = listed_capabilities(self.model, self.models, self.overrides)
        return self._capabilities


def adapter_for_route(app, route: Route):
    """The (cached) provider adapter that speaks to the route's endpoint."""
    return endpoint_store.cached_adapter(
        app, route.kind, route.base_url, route.api_key, route.guarded, route.retries
    )


def chat_routes(
    meta: ChatMeta, user_id: int, context: ChatContextService, turn: Turn
) -> list[Route]:
    """The chat's model, then its fallbacks. An empty model or a deleted endpoint is
    repaired to a route the user can see, and the repair is stored on the chat (and
    announced on the turn as `model_route` with reason `repaired`)."""
    routes: list[Route] = []
    endpoint = None
    if meta.endpoint_id is not None:
        try:
            endpoint = endpoint_store.get_endpoint(user_id, meta.endpoint_id)
        except NumiError:
            endpoint = None
    model = meta.model if endpoint is not None else None
    if endpoint is None or not endpoint.enabled or not model:
        if endpoint is None or not endpoint.enabled:
            endpoint = endpoint_store.default_route(user_id)
        model = (
            (endpoint.default_model or (endpoint.model_ids[0] if endpoint.models else None))
            if endpoint
            else None
        )
        if endpoint is None or not model:
            raise no_model()
        context.update_route(endpoint.id, model)
        turn.emit("model_route", {"endpoint_id": endpoint.id, "model": model, "reason": "repaired"})
    # The user's row is read once for the whole chain: whether their endpoints pass the
    # address guard, and their default fallbacks.
    user = db.session.execute(_ROUTE_USER, {"user_id": user_id}).first()

    def guarded(endpoint: Endpoint) -> bool:
        if endpoint.user_id is None:
            return False
        if endpoint.user_id == user_id:  # as endpoints.guarded, from the row read above
            return user is None or not user.is_admin
        return endpoint_store.guarded(endpoint)

    is_guarded = guarded(endpoint)
    # A clear refusal; the transport checks every request too.
    endpoint_store.check_address(endpoint, is_guarded=is_guarded)
    # A list never fetched (an endpoint added before lists were fetched on add) or gone
    # stale is fetched in the background: this turn uses what is known, the next the news.
    endpoint_store.refresh_when_stale(endpoint)
    routes.append(Route.of(endpoint, model, is_guarded))
    seen = {(endpoint.id, model)}
    user_fallbacks = loads(user.fallbacks_json, []) if user is not None else []
    for fallback in fallback_chain(user_id, meta.settings, meta.project_id, user_fallbacks):
        try:
            fb_endpoint = endpoint_store.get_endpoint(
                user_id, int(fallback.get("endpoint_id") or endpoint.id)
            )
            fb_guarded = guarded(fb_endpoint)
            endpoint_store.check_address(fb_endpoint, is_guarded=fb_guarded)
        except (NumiError, TypeError, ValueError):
            continue  # an endpoint deleted since: the chain goes on without it
        model = fallback.get("model")
        if not (fb_endpoint.enabled and isinstance(model, str) and model):
            continue
        if (fb_endpoint.id, model) not in seen:
            seen.add((fb_endpoint.id, model))
            routes.append(Route.of(fb_endpoint, model, fb_guarded))
    return routes


def fallback_chain(
    user_id: int,
    settings: dict[str, Any],
    project_id: int | None = None,
    user_fallbacks: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The fallbacks a chat uses: its own list, else its project's (`project_id`, scoped
    to the owner: a stale id reads as none), else the user's defaults (Settings; pass
    them as `user_fallbacks` when the user's row is read already). The first non-empty
    list is the whole chain: lists are not concatenated."""
    own = settings.get("fallbacks")
    if own:
        return list(own)
    if project_id is not None:
        project = db.session.execute(
            select(Project).where(Project.id == project_id, Project.user_id == user_id)
        ).scalar_one_or_none()
        if project is not None and project.settings.get("fallbacks"):
            return list(project.settings["fallbacks"])
    if user_fallbacks is not None:
        return list(user_fallbacks)
    user = db.session.get(User, user_id)
    return list(user.fallbacks) if user is not None else []


# How a failure without an HTTP status reads in the notice ("<model> <reason>").
_FAILURE_WORDS = {
    "provider_unavailable": "could not be reached",
    "provider_timeout": "sent nothing before its deadline",
    "stream_interrupted": "broke off before any output",
    "rate_limited": "was rate limited",
    "provider_auth": "refused the API key",
    "model_not_found": "does not serve that model",
    "context_overflow": "could not fit the conversation",
}


@dataclass
class FallbackNotice:
    """Which routes failed before any output, and which one answered instead."""

    failures: list[dict[str, Any]]
    model: str
    endpoint: str
    endpoint_id: int

    @classmethod
    def after(
        cls, earlier: FallbackNotice | None, failed: Route, error: Any, next_route: Route
    ) -> FallbackNotice:
        """The notice once `failed` ended with `error` and `next_route` is tried."""
        failures = list(earlier.failures) if earlier else []
        failures.append(
            {
                "model": failed.model,
                "endpoint": failed.endpoint_name,
                "endpoint_id": failed.endpoint_id,
                "code": error.code,
                "status": error.status,
            }
        )
        return cls(failures, next_route.model, next_route.endpoint_name, next_route.endpoint_id)

    def reasons(self) -> str:
        return "; ".join(
            f"{f['model']} returned {f['status']}"
            if f.get("status")
            else f"{f['model']} {_FAILURE_WORDS.get(f['code'], 'failed (' + f['code'] + ')')}"
            for f in self.failures
        )

    def trying(self) -> str:
        """The live notice while the fallback is called."""
        return f"Trying {self.model} on {self.endpoint}: {self.reasons()}"

    def text(self, answered: bool = True) -> str:
        """The notice in words, as the transcript and the exports show it."""
        if answered:
            return f"Answered by {self.model} on {self.endpoint}: {self.reasons()}"
        return f"{self.model} on {self.endpoint} failed too, after: {self.reasons()}"

    def to_dict(self, *, answered: bool = True) -> dict[str, Any]:
        return {
            "model": self.model,
            "endpoint": self.endpoint,
            "endpoint_id": self.endpoint_id,
            "answered": answered,
            "failures": self.failures,
            "notice": self.text(answered),
        }
