"""Model names a gateway client can use, and the routes each one stands for.

- `<endpoint name>/<model id>`: that model, then the user's default fallbacks (Settings);
- `project/<name>`: the project's default route and fallback chain, its instructions, the
  memories a chat of that project would get and the passages of its files that answer the
  call's newest question (`add_project_documents`);
- an alias of the user's (numi/gateway/aliases.py): its chain of routes;
- a bare `<model id>` that one of the user's endpoints lists: the first such endpoint.

Only what the key's scopes allow is listed or resolved; an endpoint outside the scope is
left out of a fallback chain as well.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from .. import endpoints as endpoint_store
from ..agent.routes import Route, fallback_chain
from ..chat import memories as memory_store
from ..errors import NumiError
from ..extensions import db
from ..knowledge import retrieval
from ..models import Endpoint, Project, User
from .aliases import find_alias, list_aliases
from .errors import GatewayError
from .keys import Grant, allows_endpoint, allows_project

PROJECT_PREFIX = "project/"


@dataclass
class Resolved:
    """What a model name stands for: the routes to try in order, the project whose
    context applies (or None) and the system text that project adds."""

    name: str
    routes: list[Route]
    project_id: int | None = None
    project_system: str | None = None


def _endpoints(user_id: int, key: Grant) -> list[Endpoint]:
    return [
        e
        for e in endpoint_store.list_endpoints(user_id)
        if e.enabled and allows_endpoint(key, e.id)
    ]


def _projects(user_id: int, key: Grant) -> list[Project]:
    rows = db.session.execute(
        select(Project).where(Project.user_id == user_id).order_by(Project.name)
    ).scalars()
    return [p for p in rows if allows_project(key, p.id)]


def listed_models(user_id: int, key: Grant) -> list[tuple[str, str, str]]:
    """(id, owner, display name) of every name the key may use: each endpoint's models
    as the pickers show them, then each project, then each alias with a route it may use."""
    endpoints = _endpoints(user_id, key)
    names = [
        (f"{e.name}/{model}", e.name, model) for e in endpoints for model in e.picker_model_ids
    ]
    names += [
        (PROJECT_PREFIX + p.name, "project", p.name)
        for p in _projects(user_id, key)
        # A project whose own route the key may not use is not offered.
        if not isinstance(p.settings.get("endpoint_id"), int)
        or allows_endpoint(key, p.settings["endpoint_id"])
    ]
    usable = {e.id for e in endpoints}
    names += [
        (alias.name, "alias", alias.name)
        for alias in list_aliases(user_id)
        if any(route.get("endpoint_id") in usable for route in alias.routes)
    ]
    return names


def unknown_model(name: str) -> GatewayError:
    return GatewayError(
        "unknown_model",
        f"The model {name!r} does not exist or this key may not use it. "
        "GET /v1/models lists the names this key can use: `<endpoint>/<model>` or `project/<name>`.",
        404,
        param="model",
    )


def resolve(user_id: int, key: Grant, name: str) -> Resolved:
    """The routes a model name stands for: `unknown_model` (404) when it names nothing
    of the user's, `api_key_scope` (403) when it does but the key may not use it."""
    try:
        return _resolve(user_id, key, name)
    except GatewayError as exc:
        if exc.code != "unknown_model" or not key.scopes:
            raise
        try:
            _resolve(user_id, Grant(key.id, user_id, key.name, key.keep, {}), name)
        except GatewayError:
            raise exc from None
        raise GatewayError(
            "api_key_scope",
            f"This key may not use {name!r}: its scopes (Settings → API keys) leave it out.",
            403,
            param="model",
        ) from None


def _resolve(user_id: int, key: Grant, name: str) -> Resolved:
    if name.startswith(PROJECT_PREFIX):
        project = next(
            (p for p in _projects(user_id, key) if p.name == name[len(PROJECT_PREFIX) :]), None
        )
        if project is not None:
            return _project_routes(user_id, key, name, project)
    alias = find_alias(user_id, name) if "/" not in name else None
    if alias is not None:
        return _alias_routes(user_id, key, name, alias.routes)
    endpoints = _endpoints(user_id, key)
    # The longest endpoint name that prefixes the name wins: model ids may hold "/" too.
    for endpoint in sorted(endpoints, key=lambda e: -len(e.name)):
        prefix = endpoint.name + "/"
        if name.startswith(prefix) and _serves(endpoint, name[len(prefix) :]):
            return _with_fallbacks(user_id, key, name, endpoint, name[len(prefix) :], [])
    for endpoint in endpoints:
        if name in endpoint.model_ids:
            return _with_fallbacks(user_id, key, name, endpoint, name, [])
    raise unknown_model(name)


def _alias_routes(user_id: int, key: Grant, name: str, chain: list[dict]) -> Resolved:
    """An alias's routes the key may use, in order, skipping those gone or switched off."""
    routes: list[Route] = []
    usable = False
    for route in chain:
        try:
            endpoint = endpoint_store.get_endpoint(user_id, int(route["endpoint_id"]))
            endpoint_store.check_address(endpoint, is_guarded=endpoint_store.guarded(endpoint))
        except (NumiError, TypeError, ValueError, KeyError):
            continue  # deleted since: the chain goes on without it
        if not endpoint.enabled:
            continue
        usable = True
        if allows_endpoint(key, endpoint.id) and all(
            (r.endpoint_id, r.model) != (endpoint.id, route["model"]) for r in routes
        ):
            routes.append(Route.of(endpoint, route["model"]))
    if routes:
        return Resolved(name, routes)
    if usable:
        raise unknown_model(name)  # its routes are outside the key's scopes: resolve says so
    raise GatewayError(
        "no_route",
        f"No route of the alias {name!r} can be used now (its endpoints are gone or off): "
        "change it in Settings → API keys.",
        400,
        param="model",
    )


def _serves(endpoint: Endpoint, model: str) -> bool:
    # An endpoint whose list was never fetched is taken at its word.
    return bool(model) and (not endpoint.model_ids or model in endpoint.model_ids)


def _with_fallbacks(
    user_id: int,
    key: Grant,
    name: str,
    endpoint: Endpoint,
    model: str,
    chain: list[dict] | None,
    project: Project | None = None,
) -> Resolved:
    user = db.session.get(User, user_id)
    endpoint_store.check_address(endpoint, is_guarded=endpoint_store.guarded(endpoint))
    routes = [Route.of(endpoint, model)]
    seen = {(endpoint.id, model)}
    if not chain:
        chain = fallback_chain(user_id, {}, None, user.fallbacks if user else [])
    for fallback in chain:
        try:
            fb_endpoint = endpoint_store.get_endpoint(user_id, int(fallback.get("endpoint_id")))
            endpoint_store.check_address(
                fb_endpoint, is_guarded=endpoint_store.guarded(fb_endpoint)
            )
        except (NumiError, TypeError, ValueError):
            continue  # an endpoint deleted since: the chain goes on without it
        fb_model = fallback.get("model")
        if not (fb_endpoint.enabled and isinstance(fb_model, str) and fb_model):
            continue
        if allows_endpoint(key, fb_endpoint.id) and (fb_endpoint.id, fb_model) not in seen:
            seen.add((fb_endpoint.id, fb_model))
            routes.append(Route.of(fb_endpoint, fb_model))
    resolved = Resolved(name, routes)
    if project is not None:
        resolved.project_id = project.id
        resolved.project_system = _project_system(user, project)
    return resolved


def _project_routes(user_id: int, key: Grant, name: str, project: Project) -> Resolved:
    settings = project.settings
    endpoint = None
    if settings.get("endpoint_id") is not None:
        try:
            endpoint = endpoint_store.get_endpoint(user_id, int(settings["endpoint_id"]))
        except (NumiError, TypeError, ValueError):
            endpoint = None
    if endpoint is None or not endpoint.enabled:
        endpoint = endpoint_store.default_route(user_id)
    model = settings.get("model") if endpoint is not None and settings.get("model") else None
    if endpoint is not None and not model:
        model = endpoint.default_model or endpoint_store.first_model(endpoint)
    if endpoint is None or not model or not allows_endpoint(key, endpoint.id):
        raise GatewayError(
            "no_route",
            f"The project {project.name!r} has no model this key may use: "
            "choose its default model on the project's page.",
            400,
            param="model",
        )
    return _with_fallbacks(
        user_id, key, name, endpoint, model, settings.get("fallbacks") or None, project
    )


def _project_system(user: User | None, project: Project) -> str | None:
    """What a chat of the project would carry before its messages: the project's
    instructions and, when the user keeps memories, the memories it would get."""
    parts = []
    if (project.instructions or "").strip():
        parts.append(
            f"Instructions of the project {project.name!r}, which this chat belongs to:\n\n"
            + project.instructions.strip()
        )
    if user is not None and user.memory_enabled:
        kept = memory_store.memories_for_chat(user.id, project.id)
        if kept:
            parts.append(memory_store.system_text(kept, project.name))
    return "\n\n".join(parts) or None


def add_project_documents(user_id: int, resolved: Resolved, question: str) -> None:
    """A project's call carries the passages of the project's files that answer its
    question, after the project's instructions and memories, as a chat of the project
    gets them in the page (numi/knowledge/retrieval.py: the same search, budget and
    "Use documents")."""
    if resolved.project_id is None:
        return
    project = db.session.get(Project, resolved.project_id)
    found = retrieval.project_passages(user_id, project, question) if project else None
    if found is not None:
        resolved.project_system = "\n\n".join(
            s for s in (resolved.project_system, retrieval.system_text(found)) if s
        )
