"""API keys for /v1: the JSON routes, and what Settings → API keys shows (its forms,
POST /settings/api-keys and /settings/api-keys/<id>/revoke, are in pages/settings.py).

GET  /api/keys                          {keys: [...]} (no secrets: they are never kept)
POST /api/keys                          {name, endpoints?, projects?, keep?, uses?} -> 201 {key, secret}
DELETE /api/keys/<id>                   revoke -> 204
GET  /api/aliases                       {aliases: [{id, name, routes}]}
POST /api/aliases                       {name, routes: [{endpoint_id, model}] | models: [names]} -> 201
DELETE /api/aliases/<id>                -> 204

Keys are managed with a session or the /api token; they themselves open /v1 only.
"""

from __future__ import annotations

from flask import Blueprint, g, jsonify

from ..chat.projects import list_projects
from ..endpoints import list_endpoints
from ..gateway import aliases, keys
from .inputs import request_data

bp = Blueprint("api_keys", __name__)


def keys_context(**extra) -> dict:
    """What Settings → API keys shows: the user's keys and what a new key may be limited to."""
    return {
        "api_keys": keys.list_keys(g.user.id),
        "key_endpoints": list_endpoints(g.user.id),
        "key_projects": list_projects(g.user.id),
        "key_uses": keys.USES,
        "model_aliases": aliases.list_aliases(g.user.id),
        **extra,
    }


@bp.get("/api/keys")
def list_json():
    return jsonify(keys=[key.to_dict() for key in keys.list_keys(g.user.id)])


@bp.post("/api/keys")
def create_json():
    data = request_data()
    key, secret = keys.create_key(
        g.user.id,
        data.get("name"),
        endpoints=data.get("endpoints"),
        projects=data.get("projects"),
        keep=data.get("keep", True),
        uses=data.get("uses"),
    )
    return jsonify(key=key.to_dict(), secret=secret), 201, {"Cache-Control": "no-store"}


@bp.delete("/api/keys/<int:key_id>")
def revoke_json(key_id: int):
    keys.revoke_key(g.user.id, key_id)
    return "", 204


@bp.get("/api/aliases")
def list_aliases_json():
    return jsonify(aliases=[alias.to_dict() for alias in aliases.list_aliases(g.user.id)])


@bp.post("/api/aliases")
def create_alias_json():
    data = request_data()
    alias = aliases.create_alias(
        g.user.id, data.get("name"), routes=data.get("routes"), models=data.get("models")
    )
    return jsonify(alias.to_dict()), 201


@bp.delete("/api/aliases/<int:alias_id>")
def delete_alias_json(alias_id: int):
    aliases.delete_alias(g.user.id, alias_id)
    return "", 204
