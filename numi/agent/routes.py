"""Routes: which endpoint and model each step of a turn calls.

A chat's route is its endpoint and model, then its fallbacks (`settings.fallbacks`). The
turn loop moves to the next route only while nothing has been shown (DESIGN §6).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import endpoints as endpoint_store
from ..chat.context import ChatContextService, ChatMeta
from ..errors import NumiError, no_model
from ..models import Endpoint
from ..providers.capabilities import Capabilities, listed_capabilities
from ..turns.turn import Turn


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
    overrides: dict = field(default_factory=dict)  # the user's settings for this model
    retries: bool = True  # False: one attempt (the endpoint is behind a retrying gateway)

    @classmethod
    def of(cls, endpoint: Endpoint, model: str) -> Route:
        return cls(
            endpoint.id,
            endpoint.kind,
            endpoint.base_url,
            endpoint.api_key,
            model,
            endpoint.reasoning_policy,
            endpoint.models,
            endpoint_store.guarded(endpoint),
            endpoint.model_capabilities.get(model) or {},
            endpoint.retries,
        )

    def capabilities(self) -> Capabilities:
        """What the route's model can do: as the user set it on the endpoint, else as its
        model list reports it, else assumed."""
        return listed_capabilities(self.model, self.models, self.overrides)


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
    endpoint_store.check_address(
        endpoint
    )  # a clear refusal; the transport checks every request too
    # A list never fetched (an endpoint added before lists were fetched on add) or gone
    # stale is fetched in the background: this turn uses what is known, the next the news.
    endpoint_store.refresh_when_stale(endpoint)
    routes.append(Route.of(endpoint, model))
    for fallback in meta.settings.get("fallbacks") or ():
        try:
            fb_endpoint = endpoint_store.get_endpoint(
                user_id, int(fallback.get("endpoint_id") or endpoint.id)
            )
            endpoint_store.check_address(fb_endpoint)
        except (NumiError, TypeError, ValueError):
            continue
        if fb_endpoint.enabled:
            routes.append(Route.of(fb_endpoint, fallback["model"]))
    return routes
