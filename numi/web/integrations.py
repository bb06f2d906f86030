"""Settings for document search and MCP servers: HTML partials for the settings page and a
small JSON API (GET/POST /api/mcp_servers, DELETE /api/mcp_servers/<id>, POST
/api/mcp_servers/<id>/test, GET /api/documents, POST /api/documents/index).

Everything is scoped to the signed-in user: a foreign id is a 404.
"""

from __future__ import annotations

from flask import Blueprint, current_app, g, jsonify, redirect, render_template, url_for

from ..agent.tools import documents, mcp
from .inputs import request_data
from .request_kind import is_htmx

bp = Blueprint("integrations", __name__)


# --- documents -----------------------------------------------------------------------------


@bp.get("/settings/documents")
def documents_section():
    """Settings → Documents; for HTMX (its poll while indexing), the list alone."""
    if not is_htmx():
        from .pages.settings import settings_page

        return settings_page("documents")
    return render_template("partials/_documents_section.html")


@bp.post("/settings/documents/index")
def index_documents():
    documents.ensure_indexed(current_app._get_current_object(), g.user.id)
    if is_htmx():
        return render_template("partials/_documents_section.html")
    return redirect(url_for("pages.settings", section="documents"))


@bp.get("/api/documents")
def api_documents():
    return jsonify({"documents": documents.document_rows(g.user.id)})


@bp.post("/api/documents/index")
def api_index_documents():
    busy = documents.ensure_indexed(current_app._get_current_object(), g.user.id)
    return jsonify({"indexing": busy, "documents": documents.document_rows(g.user.id)})


# --- MCP servers ---------------------------------------------------------------------------


def _mcp_section(status: dict | None = None):
    if is_htmx():
        return render_template("partials/_mcp_section.html", mcp_status=status or {})
    return redirect(url_for("pages.settings", section="mcp"))


@bp.post("/settings/mcp")
def add_mcp_server():
    mcp.create_server(g.user.id, g.user.is_admin, request_data())
    return _mcp_section()


@bp.post("/settings/mcp/<int:server_id>/delete")
def remove_mcp_server(server_id: int):
    mcp.remove_server(mcp.get_server(g.user.id, server_id))
    return _mcp_section()


@bp.post("/settings/mcp/<int:server_id>/test")
def test_mcp_server(server_id: int):
    ok, message = mcp.test_server(mcp.get_server(g.user.id, server_id), g.user.is_admin)
    return _mcp_section({server_id: ("ok" if ok else "error", message)})


@bp.get("/api/mcp_servers")
def api_mcp_servers():
    return jsonify(
        {
            "servers": [mcp.server_dict(s) for s in mcp.list_servers(g.user.id)],
            "sdk_installed": mcp.sdk_available(),
        }
    )


@bp.post("/api/mcp_servers")
def api_add_mcp_server():
    server = mcp.create_server(g.user.id, g.user.is_admin, request_data())
    return jsonify(mcp.server_dict(server)), 201


@bp.delete("/api/mcp_servers/<int:server_id>")
def api_remove_mcp_server(server_id: int):
    mcp.remove_server(mcp.get_server(g.user.id, server_id))
    return "", 204


@bp.post("/api/mcp_servers/<int:server_id>/test")
def api_test_mcp_server(server_id: int):
    server = mcp.get_server(g.user.id, server_id)
    ok, message = mcp.test_server(server, g.user.is_admin)
    tools = []
    if ok:
        tools = [
            {
                "name": mcp.tool_name(server.name, t["name"]),
                "description": t["description"],
                "needs_approval": mcp.needs_approval(server, t),
            }
            for t in mcp.server_tools(server, guarded=not g.user.is_admin)
        ]
    return jsonify({"ok": ok, "message": message, "tools": tools})


def init_app(app) -> None:
    """Template helpers for the settings sections."""
    app.jinja_env.globals["user_documents"] = documents.document_rows
    app.jinja_env.globals["user_mcp_servers"] = mcp.list_servers
    app.jinja_env.globals["mcp_sdk_available"] = mcp.sdk_available
    app.jinja_env.globals["mcp_server_state"] = mcp.server_state
    app.jinja_env.globals["mcp_install_hint"] = mcp.INSTALL_HINT
