"""Model aliases: a user's own names for gateway clients, each standing for a chain.

`fast` may stand for `Groq/llama-3.1-8b` then `OpenAI/gpt-4.1-mini`: a client names the
alias as a model (on /v1, and as the MCP tool ask's `model`), the first route answers and
the others are its fallbacks, as a chat's chain. An alias name has no "/", so it never
shadows `<endpoint>/<model>` or `project/<name>`. `GET /v1/models` lists the aliases a
key may use (numi/gateway/models.py); every query is scoped to the owner.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select

from ..endpoints import visible
from ..errors import NotFound, NumiError, invalid
from ..extensions import db
from ..models import Endpoint, ModelAlias

MAX_ROUTES = 8
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$")


def list_aliases(user_id: int) -> list[ModelAlias]:
    return list(
        db.session.execute(
            select(ModelAlias).where(ModelAlias.user_id == user_id).order_by(ModelAlias.name)
        ).scalars()
    )


def find_alias(user_id: int, name: str) -> ModelAlias | None:
    return db.session.execute(
        select(ModelAlias).where(ModelAlias.user_id == user_id, ModelAlias.name == name)
    ).scalar_one_or_none()


def create_alias(user_id: int, name: Any, routes: Any = None, models: Any = None) -> ModelAlias:
    """A new alias, its fields checked first (nothing is written on a refusal). Its chain is
    `routes` ([{endpoint_id, model}]) or `models`, names as /v1/models lists them
    (`<endpoint>/<model>`)."""
    if models is not None:
        routes = routes_from_names(user_id, models)
    if not isinstance(name, str) or not NAME.match(name.strip()):
        raise invalid(
            "An alias name is 1 to 100 letters, digits, '.', '_', ':' or '-' (no '/'), "
            "starting with a letter or digit.",
            "invalid_alias_name",
        )
    name = name.strip()
    checked = _checked_routes(user_id, routes)
    if find_alias(user_id, name) is not None:
        raise NumiError("alias_exists", f"You already have an alias {name!r}.", 409)
    alias = ModelAlias(user_id=user_id, name=name)
    alias.routes = checked
    db.session.add(alias)
    db.session.commit()
    return alias


def delete_alias(user_id: int, alias_id: Any) -> None:
    alias = db.session.get(ModelAlias, alias_id) if isinstance(alias_id, int) else None
    if alias is None or alias.user_id != user_id:
        raise NotFound("alias")
    db.session.delete(alias)
    db.session.commit()


def routes_from_names(user_id: int, models: Any) -> list[dict[str, Any]]:
    """[{endpoint_id, model}] of `<endpoint name>/<model id>` names (the longest endpoint
    name that prefixes one wins: model ids may hold "/" too)."""
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise invalid("models is a list of names such as OpenAI/gpt-4.1.", "invalid_alias_routes")
    endpoints = sorted(
        db.session.execute(select(Endpoint).where(*visible(user_id))).scalars(),
        key=lambda e: -len(e.name),
    )
    routes = []
    for name in (m.strip() for m in models):
        endpoint = next((e for e in endpoints if name.startswith(e.name + "/")), None)
        if endpoint is None or not name[len(endpoint.name) + 1 :]:
            raise invalid(
                f"{name!r} is not `<endpoint>/<model>` of one of your endpoints.",
                "invalid_alias_routes",
            )
        routes.append({"endpoint_id": endpoint.id, "model": name[len(endpoint.name) + 1 :]})
    return routes


def _checked_routes(user_id: int, routes: Any) -> list[dict[str, Any]]:
    """[{endpoint_id, model}, ...]: 1 to MAX_ROUTES, each on an endpoint the user sees."""
    if not isinstance(routes, list) or not 1 <= len(routes) <= MAX_ROUTES:
        raise invalid(
            f"routes is a list of 1 to {MAX_ROUTES} {{endpoint_id, model}}: the first answers, "
            "the others are its fallbacks.",
            "invalid_alias_routes",
        )
    checked = []
    for route in routes:
        endpoint_id = route.get("endpoint_id") if isinstance(route, dict) else None
        model = route.get("model") if isinstance(route, dict) else None
        if (
            isinstance(endpoint_id, bool)
            or not isinstance(endpoint_id, int)
            or not isinstance(model, str)
            or not model.strip()
            or len(model) > 200
        ):
            raise invalid(
                "Each route is {endpoint_id: a number, model: its model id}.",
                "invalid_alias_routes",
            )
        checked.append({"endpoint_id": endpoint_id, "model": model.strip()})
    ids = {r["endpoint_id"] for r in checked}
    found = set(
        db.session.execute(
            select(Endpoint.id).where(Endpoint.id.in_(ids), *visible(user_id))
        ).scalars()
    )
    if found != ids:
        raise invalid(f"No such endpoint: {sorted(ids - found)}.", "invalid_alias_routes")
    return checked
