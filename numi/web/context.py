"""Context routes: what the next request would send, and compaction.

GET  /api/session/<id>/context_info   budget data: window, estimated tokens, counts, checkpoint
GET  /api/session/<id>/context        the exact messages the next request would send
POST /api/session/<id>/compact        summarise older messages into a checkpoint
GET  /c/<id>/context_gauge            the chat header's gauge (HTML partial)
POST /c/<id>/compact                  the gauge's Compact button (HTMX or plain form)
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, g, jsonify, redirect, render_template, request, url_for

from .. import endpoints as endpoint_store
from ..chat import chats
from ..chat.attachments import attachments_by_id, is_image, message_attachment_ids
from ..chat.compaction import checkpoint_dict, compact
from ..chat.context import ChatContextService, estimate_tokens
from ..errors import NumiError, no_model, turn_running
from ..extensions import db, turn_manager
from .request_kind import is_htmx

bp = Blueprint("context", __name__)


def _service(chat) -> ChatContextService:
    config = current_app.config
    return ChatContextService(
        chat.id,
        g.user.id,
        max_messages=config["PROMPT_MAX_HISTORY_MESSAGES"],
        max_chars=config["PROMPT_MAX_HISTORY_CHARS"],
    )


def _endpoint(chat):
    if chat.endpoint_id is None or not chat.model:
        return None
    try:
        return endpoint_store.get_endpoint(g.user.id, chat.endpoint_id)
    except NumiError:
        return None


def _system_prompt(chat) -> str:
    from ..agent.system_context import system_parts, system_text
    from ..agent.tools.clock import user_now

    now = user_now(request.headers.get("X-Timezone"), _offset())
    return system_text(
        system_parts(user_id=chat.user_id, chat_id=chat.id, settings=chat.settings, now=now)
    )


def _offset() -> int | None:
    raw = request.headers.get("X-Tz-Offset")
    try:
        value = int(raw) if raw else None
    except ValueError:
        return None
    return value if value is not None and -960 <= value <= 960 else None


def context_info(chat) -> dict[str, Any]:
    """Budget data for the chat's next request (no provider is contacted)."""
    config = current_app.config
    endpoint = _endpoint(chat)
    caps = endpoint_store.model_capabilities(endpoint, chat.model) if endpoint is not None else None
    window = (caps.context_window if caps else None) or config["NUMI_DEFAULT_CONTEXT_WINDOW"]
    service = _service(chat)
    checkpoint = service.latest_checkpoint()
    info: dict[str, Any] = {
        "model": chat.model,
        "context_window": window,
        "window_assumed": not (caps and caps.context_window),
        "auto_compact_at": int(window * config["NUMI_AUTO_COMPACT_FRACTION"]),
        "auto_compact": chat.settings.get("auto_compact", config["NUMI_AUTO_COMPACT"]),
        "checkpoint": checkpoint_dict(checkpoint) if checkpoint else None,
        "error": None,
    }
    try:
        history = service.history()
    except NumiError as exc:
        info.update(
            estimated_tokens=None, messages_included=0, messages_omitted=None, error=exc.to_dict()
        )
        return info
    original = [m for m in history.messages if not (m.get("_checkpoint") or m.get("_notice"))]
    tokens = estimate_tokens(history.messages, _system_prompt(chat))
    info.update(
        estimated_tokens=tokens,
        messages_included=len(original),
        messages_omitted=history.omitted,
        fraction=round(tokens / window, 4),
    )
    return info


@bp.get("/api/session/<chat_id>/context_info")
def context_info_route(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    return jsonify(context_info(chat))


@bp.get("/api/session/<chat_id>/context")
def context_messages(chat_id: str):
    """The messages the next request would send, as the provider-neutral internal shape
    with internal fields removed; images appear as {type: image, mime, name} (no bytes)."""
    from ..agent.prepare import prepare_messages

    chat = chats.get_chat(g.user.id, chat_id)
    endpoint = _endpoint(chat)
    history = _service(chat).history()
    ids = [i for m in history.messages for i in message_attachment_ids(m.get("_content_parts"))]
    rows = {i: a for i, a in attachments_by_id(ids).items() if a.user_id == g.user.id}
    messages = []
    for message in history.messages:
        own = message_attachment_ids(message.get("_content_parts"))
        if own:
            message = dict(message)
            parts = [{"type": "text", "text": message.get("content") or ""}]
            for i in own:
                row = rows.get(i)
                if row is None:
                    parts.append(
                        {"type": "text", "text": "[an attached file is no longer available]"}
                    )
                elif is_image(row):
                    parts.append({"type": "image", "mime": row.mime, "name": row.filename})
                else:
                    parts.append(
                        {"type": "document", "name": row.filename, "text": row.extracted_text or ""}
                    )
            message["content"] = parts
        messages.append(message)
    kind = endpoint.kind if endpoint is not None else "openai_chat"
    prepared = prepare_messages(messages, kind=kind, model=chat.model)
    return jsonify(
        system=_system_prompt(chat),
        messages=prepared,
        model=chat.model,
        omitted=history.omitted,
        checkpoint_id=history.checkpoint_id,
    )


def run_compaction(chat):
    """Compact `chat` now with its model (or NUMI_COMPACT_MODEL); refuses while a turn runs."""
    config = current_app.config
    if turn_manager().is_running(chat.id):
        raise turn_running()
    endpoint = _endpoint(chat)
    if endpoint is None:
        raise no_model()
    endpoint_store.check_address(endpoint)
    adapter = endpoint_store.cached_adapter(
        current_app._get_current_object(),
        endpoint.kind,
        endpoint.base_url,
        endpoint.api_key,
        endpoint_store.guarded(endpoint),
    )
    model = config["NUMI_COMPACT_MODEL"] or chat.model
    service = _service(chat)
    db.session.expunge(chat)  # the service commits and releases the session while the model writes
    return compact(service, adapter, model, config)


@bp.post("/api/session/<chat_id>/compact")
def compact_route(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    checkpoint = run_compaction(chat)
    return jsonify(checkpoint_dict(checkpoint)), 201


@bp.get("/c/<chat_id>/context_gauge")
def gauge(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    return render_template("partials/_context_gauge.html", chat=chat, gauge=context_info(chat))


@bp.post("/c/<chat_id>/compact")
def compact_page(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    run_compaction(chat)
    if is_htmx():
        # The transcript gains a divider and the gauge changes: reload the chat view.
        return "", 204, {"HX-Refresh": "true"}
    return redirect(url_for("pages.chat_view", chat_id=chat_id))


@bp.post("/c/<chat_id>/auto_compact")
def auto_compact_page(chat_id: str):
    """The gauge's "Auto" checkbox: the chat's own auto_compact setting."""
    from .inputs import request_data

    data = request_data()
    value = data.get("auto_compact") in ("1", "on", "true", True)
    chat = chats.update_chat(
        g.user.id, chat_id, {"settings": {"auto_compact": value}}, current_app.config
    )
    if is_htmx():
        return render_template("partials/_context_gauge.html", chat=chat, gauge=context_info(chat))
    return redirect(url_for("pages.chat_view", chat_id=chat_id))
