"""The settings pages: one URL per section (/settings/<section>), and the endpoint and
web-search forms.

/settings is the list of sections (on a phone) beside the first one (at desktop size). Forms
that answer with a whole page render their own section (`settings_page`).
"""

from __future__ import annotations

from flask import current_app, g, redirect, render_template, request, url_for

from ... import endpoints as endpoint_store
from ... import prompts as prompt_store
from ...agent.tools import mcp, web
from ...knowledge import index as tool_documents
from ...chat import live_mirror
from ...chat.memories import list_memories
from ...chat.shares import list_shares
from ...endpoint_settings import capabilities_from_form
from ...errors import NumiError
from ...gateway import keys as key_store
from ...gateway import aliases as alias_store
from ...models import utcnow
from ...providers.kinds import all_kinds
from ...redaction.rules import rules_from_form
from ..inputs import request_data
from ..request_kind import is_htmx
from ..api_keys import keys_context
from ..mirror import mirror_context
from ..voice import voice_context
from .base import bp
from ...knowledge import embedding, rerank


# Each section's template is templates/settings/_<slug>.html; the order is the navigation's.
SECTIONS = {
    "appearance": "Appearance",
    "endpoints": "Endpoints",
    "prompts": "Prompts",
    "memory": "Memory",
    "voice": "Voice",
    "documents": "Documents",
    "mcp": "MCP servers",
    "web-search": "Web search",
    "api-keys": "API keys",
    "account": "Account",
    "import": "Import",
    "markdown-mirror": "Markdown mirror",
    "shared-links": "Shared links",
}


@bp.get("/settings", defaults={"section": None})
@bp.get("/settings/<any({}):section>".format(", ".join(f"'{slug}'" for slug in SECTIONS)))
def settings(section: str | None):
    return settings_page(section)


def settings_page(section: str | None, status: int = 200, **extra):
    """The Settings page at `section` (None: the list, beside the first section), with
    `extra` for its templates (a form's error)."""
    page = render_template(
        "settings.html",
        section=section or next(iter(SECTIONS)),
        index=section is None,
        sections=SECTIONS,
        **settings_context(),
        **extra,
    )
    return page, status


@bp.app_template_global("endpoint_kinds")
def endpoint_kinds() -> list:
    """The endpoint kinds the forms offer (numi.providers.kinds: built-ins and plugins')."""
    return all_kinds()


def integrations_context() -> dict:
    """What Settings → Documents and → MCP servers show: the signed-in user's documents
    with their indexing state, and MCP servers."""

    return {
        "documents": tool_documents.document_rows(g.user.id),
        "documents_search": embedding.status_text(g.user),
        "embedding_choice": embedding.choice(g.user),
        "rerank_choice": rerank.choice(g.user),
        "embedding_local": embedding.local_installed(),
        "embedding_endpoints": [
            e
            for e in endpoint_store.list_endpoints(g.user.id)
            if e.kind in embedding.EMBEDDING_KINDS
        ],
        "mcp_servers": mcp.list_servers(g.user.id),
    }


def settings_context() -> dict:
    """What the settings page shows (also rendered by forms that answer with the whole page)."""
    return {
        "endpoints": endpoint_store.list_endpoints(g.user.id),
        "kinds": all_kinds(),
        "web_settings": web.load_settings(g.user.id),
        "prompts": prompt_store.list_prompts(g.user.id),
        "memories": list_memories(g.user.id),
        "memory_on": g.user.memory_enabled,
        "shares": list_shares(g.user.id),
        "now": utcnow(),
        **integrations_context(),
        **voice_context(),
        **keys_context(),
        **mirror_context(),
    }


@bp.post("/settings/markdown-mirror")
def markdown_mirror_settings():
    """Turn the Markdown mirror on (or move it) or off; a refused folder changes nothing and
    is said on the section."""
    data = request_data()
    if data.get("action") == "off":
        live_mirror.turn_off(g.user)
    else:
        folder = data.get("folder")
        try:
            live_mirror.turn_on(current_app, g.user, folder if isinstance(folder, str) else None)
        except NumiError as exc:
            return settings_page(
                "markdown-mirror", exc.status, mirror_error=exc, mirror_typed=folder
            )
    return redirect(url_for("pages.settings", section="markdown-mirror"))


@bp.post("/settings/web-search")
def web_search_settings():
    """Save the user's web search backend and fetch address rules."""
    data = request_data()
    saved = web.save_settings(g.user.id, data, is_admin=g.user.is_admin)
    if is_htmx():
        return render_template("partials/_web_settings.html", web_settings=saved, saved=True)
    return redirect(url_for("pages.settings", section="web-search"))


@bp.post("/settings/endpoints")
def add_endpoint():
    endpoint_store.add_endpoint(
        g.user.id,
        g.user.is_admin,
        request_data(),
        max_name=current_app.config["NUMI_MAX_NAME_CHARS"],
    )
    if is_htmx():
        # The list, and an empty Add form in place of the filled one (its key must not stay).
        return render_template(
            "partials/_endpoint_list.html", endpoints=endpoint_store.list_endpoints(g.user.id)
        ) + render_template("partials/_endpoint_add_form.html", oob=True)
    return _settings_list_or_redirect()


@bp.get("/settings/endpoints/<int:endpoint_id>")
def endpoint_card(endpoint_id: int):
    endpoint = endpoint_store.get_endpoint(g.user.id, endpoint_id)
    return render_template("partials/_endpoint.html", endpoint=endpoint, status=None)


@bp.get("/settings/endpoints/<int:endpoint_id>/edit")
def edit_endpoint_form(endpoint_id: int):
    endpoint = endpoint_store.get_managed_endpoint(g.user.id, g.user.is_admin, endpoint_id)
    if is_htmx():
        return render_template("partials/_endpoint_edit.html", endpoint=endpoint)
    return settings_page("endpoints", editing=endpoint.id)


@bp.post("/settings/endpoints/<int:endpoint_id>")
def edit_endpoint(endpoint_id: int):
    """Save the Edit form: name, kind, URL, key (empty keeps it), default model, reasoning
    policy, enabled, and the models hidden from the pickers."""
    endpoint = endpoint_store.get_managed_endpoint(g.user.id, g.user.is_admin, endpoint_id)
    data = request_data()
    data.pop("hidden_models_sent", None)
    for name in (
        "model_capabilities_sent",
        "capability_model",
        "capability_tools",
        "redaction_sent",
        "redaction_enabled",
        "redaction_rules",
        "redaction_words",
        "redaction_patterns",
    ):
        data.pop(name, None)
    data.pop("capability_context", None)
    if request.mimetype != "application/json":
        data["enabled"] = "1" in request.form.getlist(
            "enabled"
        )  # the checkbox after its hidden "0"
        if "retries" in request.form:
            data["retries"] = "1" in request.form.getlist("retries")
        if request.form.get("model_capabilities_sent"):
            data["model_capabilities"] = capabilities_from_form(
                request.form.getlist("capability_model"),
                request.form.getlist("capability_tools"),
                request.form.getlist("capability_context"),
            )
        if request.form.get("redaction_sent"):
            data["redaction"] = rules_from_form(
                request.form.get("redaction_enabled", ""),
                request.form.getlist("redaction_rules"),
                request.form.get("redaction_words", ""),
                request.form.get("redaction_patterns", ""),
            )
        if "prompt_caching" in request.form:
            data["prompt_caching"] = "1" in request.form.getlist("prompt_caching")
        if request.form.get("hidden_models_sent"):
            data["hidden_models"] = request.form.getlist("hidden_models")
        else:
            data.pop("hidden_models", None)
    endpoint_store.update_endpoint(
        endpoint, data, max_name=current_app.config["NUMI_MAX_NAME_CHARS"]
    )
    status = ("ok", "Saved.")
    if endpoint.models_fetched_at is None:  # pointed elsewhere, or never listed
        problem = endpoint_store.fetch_models(endpoint)
        if problem:
            status = ("error", f"Saved. The model list could not be fetched: {problem}")
    if is_htmx():
        return render_template("partials/_endpoint.html", endpoint=endpoint, status=status)
    return redirect(url_for("pages.settings", section="endpoints"))


@bp.post("/settings/endpoints/<int:endpoint_id>/delete")
def remove_endpoint(endpoint_id: int):
    endpoint = endpoint_store.get_managed_endpoint(g.user.id, g.user.is_admin, endpoint_id)
    endpoint_store.remove_endpoint(endpoint)
    return _settings_list_or_redirect()


@bp.post("/settings/endpoints/<int:endpoint_id>/models")
def refresh_models(endpoint_id: int):
    endpoint = endpoint_store.get_endpoint(g.user.id, endpoint_id)
    try:
        endpoint_store.models(
            endpoint, max_age_seconds=current_app.config["NUMI_MODELS_CACHE_SECONDS"], refresh=True
        )
        problem = endpoint_store.missing_default_model(endpoint)
        status = (
            ("error", problem)
            if problem
            else ("ok", f"Connected: {len(endpoint.models)} models available.")
        )
    except NumiError as exc:
        status = ("error", exc.message)
    return render_template("partials/_endpoint.html", endpoint=endpoint, status=status)


def _settings_list_or_redirect():
    if is_htmx():
        return render_template(
            "partials/_endpoint_list.html", endpoints=endpoint_store.list_endpoints(g.user.id)
        )
    return redirect(url_for("pages.settings", section="endpoints"))


# --- API keys (the JSON routes are web/api_keys.py) ---------------------------------------


def _key_scope_ids(name: str) -> list[int] | None:
    """Ticked ids of a form's checkboxes; none ticked means all (None)."""
    values = request.form.getlist(name)
    try:
        ids = [int(v) for v in values]
    except ValueError:
        raise NumiError("invalid_key_scope", f"{name} must be ids.", 400) from None
    return ids or None


def _keys_section(status: int = 200, **extra):
    return render_template("partials/_api_keys_section.html", **keys_context(**extra)), status


@bp.post("/settings/api-keys")
def create_api_key():
    try:
        key, secret = key_store.create_key(
            g.user.id,
            request.form.get("name", ""),
            endpoints=_key_scope_ids("endpoints"),
            projects=_key_scope_ids("projects"),
            keep=request.form.get("keep") == "1",
            # The form's uses fieldset says it was shown: none ticked is then a refusal.
            uses=request.form.getlist("uses") if request.form.get("uses_shown") else None,
        )
    except NumiError as exc:
        error = {"code": exc.code, "message": exc.message, "name": request.form.get("name", "")}
        if is_htmx():
            return _keys_section(exc.status, key_error=error)
        return settings_page("api-keys", exc.status, key_error=error)
    # The secret is shown in this answer only: it is not stored anywhere it could be read again.
    if is_htmx():
        return _keys_section(new_key=key, new_secret=secret)
    page, _status = settings_page("api-keys", 201, new_key=key, new_secret=secret)
    return page, 201, {"Cache-Control": "no-store"}


@bp.post("/settings/api-keys/<int:key_id>/revoke")
def revoke_api_key(key_id: int):
    key_store.revoke_key(g.user.id, key_id)
    if is_htmx():
        return _keys_section()
    return redirect(url_for("pages.settings", section="api-keys"), code=303)


@bp.post("/settings/api-keys/aliases")
def create_model_alias():
    names = [line for line in request.form.get("models", "").splitlines() if line.strip()]
    try:
        alias_store.create_alias(g.user.id, request.form.get("name", ""), models=names)
    except NumiError as exc:
        error = {
            "code": exc.code,
            "message": exc.message,
            "name": request.form.get("name", ""),
            "models": request.form.get("models", ""),
        }
        if is_htmx():
            return _keys_section(exc.status, alias_error=error)
        return settings_page("api-keys", exc.status, alias_error=error)
    if is_htmx():
        return _keys_section(201)
    return redirect(url_for("pages.settings", section="api-keys"), code=303)


@bp.post("/settings/api-keys/aliases/<int:alias_id>/delete")
def delete_model_alias(alias_id: int):
    alias_store.delete_alias(g.user.id, alias_id)
    if is_htmx():
        return _keys_section()
    return redirect(url_for("pages.settings", section="api-keys"), code=303)
