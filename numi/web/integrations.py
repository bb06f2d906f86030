"""Settings for document search and MCP servers: HTML partials for the settings page and a
small JSON API (GET/POST /api/mcp_servers, DELETE /api/mcp_servers/<id>, POST
/api/mcp_servers/<id>/test, GET /api/documents, POST /api/documents/index, GET
/api/documents/search, GET/PUT /api/documents/settings: the embedding model and the
optional reranker).

Everything is scoped to the signed-in user: a foreign id is a 404.
"""

from __future__ import annotations

from flask import (
    Blueprint,
    current_app,
    g,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)

from ..agent.tools import mcp
from ..chat.projects import chosen_project, project_file_ids
from ..errors import invalid
from ..knowledge import embedding, rerank
from ..knowledge import index as documents
from ..knowledge.retrieval import MAX_LIMIT, retrieve
from .inputs import request_data
from .pages.settings import integrations_context, settings_page
from .request_kind import is_htmx

bp = Blueprint("integrations", __name__)


# --- documents -----------------------------------------------------------------------------


@bp.get("/settings/documents")
def documents_section():
    """Settings → Documents; for HTMX (its poll while indexing), the list alone."""
    if not is_htmx():
        return settings_page("documents")
    return render_template("partials/_documents_section.html", **integrations_context())


@bp.post("/settings/documents/index")
def index_documents():
    documents.ensure_indexed(current_app._get_current_object(), g.user.id, retry=True)
    if is_htmx():
        return render_template("partials/_documents_section.html", **integrations_context())
    return redirect(url_for("pages.settings", section="documents"))


@bp.post("/settings/documents/embedding")
def documents_embedding_form():
    """Settings → Documents' model picker; the documents are indexed again with it in the
    background (search keeps working on full text meanwhile)."""
    data = request_data()
    chosen = embedding.validate_choice(g.user.id, data.get("embedding"), data.get("model"))
    embedding.save_choice(g.user, chosen)
    documents.ensure_indexed(current_app._get_current_object(), g.user.id, retry=True)
    return redirect(url_for("pages.settings", section="documents"))


@bp.post("/settings/documents/rerank")
def documents_rerank_form():
    """Settings → Documents' reranker: none, or an endpoint's /v1/rerank with a model."""
    data = request_data()
    rerank.save(g.user, rerank.validate(g.user.id, data.get("rerank"), data.get("model")))
    return redirect(url_for("pages.settings", section="documents"))


@bp.get("/api/documents/settings")
def api_documents_settings():
    return jsonify(_documents_settings())


@bp.put("/api/documents/settings")
def api_save_documents_settings():
    data = request_data()
    if not data or set(data) - {"embedding", "rerank"}:
        raise invalid('Send {"embedding": …, "rerank": …} only.', "invalid_documents_settings")
    chosen = (
        embedding.validate_choice(g.user.id, data["embedding"]) if "embedding" in data else None
    )
    reranker = rerank.validate(g.user.id, data["rerank"]) if "rerank" in data else None
    if "embedding" in data:  # both checked before either is saved
        embedding.save_choice(g.user, chosen)
    if "rerank" in data:
        rerank.save(g.user, reranker)
    busy = documents.ensure_indexed(current_app._get_current_object(), g.user.id, retry=True)
    return jsonify({**_documents_settings(), "indexing": busy})


def _documents_settings() -> dict:
    return {
        "embedding": embedding.choice(g.user),
        "rerank": rerank.choice(g.user),
        "search": embedding.status_text(g.user),
        "local_installed": embedding.local_installed(),
    }


@bp.get("/api/documents/search")
def api_search_documents():
    """The ranked passages of the user's documents (or of one project's files) for `q`."""
    query = (request.args.get("q") or "").strip()
    if not query or len(query) > 1000:
        raise invalid("q must be 1 to 1000 characters.", "invalid_documents_query")
    raw_limit = request.args.get("limit", "5")
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= MAX_LIMIT:
        raise invalid(
            f"limit must be a whole number from 1 to {MAX_LIMIT}.", "invalid_documents_query"
        )
    scope, project = None, None
    project_id = request.args.get("project_id")
    if project_id not in (None, ""):
        if not project_id.isdigit():
            raise invalid("project_id must be a number.", "invalid_documents_query")
        project = chosen_project(g.user.id, int(project_id))  # another user's, or none: 404
        scope = project_file_ids(g.user.id, project.id)
    app = current_app._get_current_object()
    busy = documents.ensure_indexed(app, g.user.id, scope)
    found = retrieve(g.user.id, query, limit=int(raw_limit), attachment_ids=scope, project=project)
    return jsonify(
        {
            "query": query,
            "mode": found.mode,
            "note": found.note,
            "reranked": found.reranked,
            "ranked_by": found.ranked_by,
            "indexing": busy,
            "passages": [passage.to_dict() for passage in found.passages],
        }
    )


@bp.get("/api/documents")
def api_documents():
    return jsonify({"documents": documents.document_rows(g.user.id)})


@bp.post("/api/documents/index")
def api_index_documents():
    busy = documents.ensure_indexed(current_app._get_current_object(), g.user.id, retry=True)
    return jsonify({"indexing": busy, "documents": documents.document_rows(g.user.id)})


# --- MCP servers ---------------------------------------------------------------------------


def _mcp_section(status: dict | None = None):
    if is_htmx():
        return render_template(
            "partials/_mcp_section.html", mcp_status=status or {}, **integrations_context()
        )
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
    app.jinja_env.globals["mcp_sdk_available"] = mcp.sdk_available
    app.jinja_env.globals["mcp_server_state"] = mcp.server_state
    app.jinja_env.globals["mcp_install_hint"] = mcp.INSTALL_HINT
