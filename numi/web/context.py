"""Context routes: what the next request would send, and compaction.

GET   /api/session/<id>/context_info   budget data: window, estimated tokens, counts, checkpoint
GET   /api/session/<id>/context        the exact messages the next request would send, and
                                       its parts with tokens (`?kinds=history,tools` filters)
PATCH /api/session/<id>/messages/<mid> {"in_context": false|true}: leave a message out
POST  /api/session/<id>/compact        summarise older messages into a checkpoint
GET   /c/<id>/context_gauge            the composer's gauge (HTML partial)
GET   /c/<id>/context_panel            the context panel: the next request part by part
POST  /c/<id>/messages/<mid>/context   leave out / bring back, from a message's menu or the panel
POST  /c/<id>/passages/context         leave a document passage out of the next requests, or
                                       bring it back (the chat's `left_out_passages`)
POST  /c/<id>/compact                  the gauge's Compact button (HTMX or plain form)
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, g, jsonify, redirect, render_template, request, url_for

from .. import endpoints as endpoint_store
from ..agent import calibration as calibrations
from ..agent.context_window import summary_budget
from ..agent.prepare import prepare_messages
from ..agent.system_context import system_parts, system_text
from ..agent.tools.clock import user_now
from ..chat import budgets, chats
from ..chat.attachments import attachments_by_id, is_image, message_attachment_ids
from ..chat.compaction import checkpoint_dict, compact
from ..chat.context import ChatContextService
from ..chat.redactions import ChatGateway
from ..redaction.rules import rules_for
from ..setting_values import parse_bool
from ..errors import NumiError, no_model, turn_running
from ..extensions import db, turn_manager
from ..knowledge.passages import left_out_passages, with_left_out
from .inputs import request_data
from .pages.chat import transcript_context
from .request_kind import is_htmx
from .transcript import refreshed_transcript

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


def budget_lines(chat) -> list[str]:
    """The chat's budgets past their soft cap, as the composer and the context panel say it."""
    return budgets.warnings(g.user.id, chat.project_id, chat.endpoint_id)


def _system_prompt(chat) -> str:
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


def _now():
    return user_now(request.headers.get("X-Timezone"), _offset())


def describe_next(chat, *, detail: bool = True) -> dict[str, Any]:
    """The chat's next request part by part (agent.next_request), for the signed-in user."""
    from ..agent.next_request import describe  # lazy: start-up time

    return describe(
        current_app._get_current_object(),
        chat=chat,
        endpoint=_endpoint(chat),
        is_admin=g.user.is_admin,
        now=_now(),
        detail=detail,
    )


def context_info(chat) -> dict[str, Any]:
    """Budget data for the chat's next request (no provider is contacted)."""
    info = describe_next(chat, detail=False)
    service = _service(chat)
    checkpoint = service.latest_checkpoint()
    info["checkpoint"] = checkpoint_dict(checkpoint) if checkpoint else None
    info.pop("checkpoint_id", None)
    info.pop("parts", None)
    return info


@bp.get("/api/session/<chat_id>/context_info")
def context_info_route(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    return jsonify(context_info(chat))


@bp.get("/api/session/<chat_id>/context")
def context_messages(chat_id: str):
    """The messages the next request would send, as the provider-neutral internal shape
    with internal fields removed; images appear as {type: image, mime, name} (no bytes)."""
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
    described = describe_next(chat)
    parts = described.get("parts") or []
    kinds = [k for k in (request.args.get("kinds") or "").split(",") if k]
    if kinds:
        from ..agent.next_request import PART_KINDS  # lazy: start-up time

        unknown = [k for k in kinds if k not in PART_KINDS]
        if unknown:
            raise NumiError(
                "unknown_part_kind",
                f"Unknown part kind {unknown[0][:40]!r}; the kinds are {', '.join(PART_KINDS)}.",
                400,
            )
        parts = [p for p in parts if p["kind"] in kinds]
    return jsonify(
        system=_system_prompt(chat),
        messages=prepared,
        model=chat.model,
        omitted=history.omitted,
        left_out=described.get("messages_left_out"),
        checkpoint_id=history.checkpoint_id,
        parts=parts,
        estimated_tokens=described.get("estimated_tokens"),
        context_window=described["context_window"],
        estimated_cost=described.get("estimated_cost"),
        estimate=described["estimate"],
    )


@bp.patch("/api/session/<chat_id>/messages/<int:message_id>")
def message_in_context(chat_id: str, message_id: int):
    """Leave a message out of the context (`in_context: false`) or bring it back; a tool
    step moves with its results. Answers the ids changed."""
    chat = chats.get_chat(g.user.id, chat_id)
    data = request_data()
    if set(data) != {"in_context"}:
        raise NumiError("invalid_in_context", 'The body is {"in_context": true|false}.', 400)
    changed = _set_in_context(chat, message_id, data["in_context"])
    return jsonify(message_id=message_id, in_context=data["in_context"], changed=changed)


def _set_in_context(chat, message_id: int, value) -> list[int]:
    from ..chat.leave_out import set_in_context  # lazy: start-up time

    if turn_manager().is_running(chat.id):
        raise turn_running()  # the running turn's next step must not change under it
    return set_in_context(chat, message_id, value)


def panel_html(chat) -> str:
    """The context panel of the chat's next request."""
    return render_template(
        "partials/_context_panel.html",
        chat=chat,
        info=describe_next(chat),
        budget_warnings=budget_lines(chat),
        left_out_passages=left_out_passages(g.user.id, chat.settings),
    )


@bp.get("/c/<chat_id>/context_panel")
def panel(chat_id: str):
    return panel_html(chats.get_chat(g.user.id, chat_id))


@bp.post("/c/<chat_id>/passages/context")
def passage_in_context_page(chat_id: str):
    """The panel's Leave out / Bring back of a document passage (form fields `passage`,
    "document:chunk", and in_context "0" or "1"): answers with the panel (HTMX), else
    goes back to the chat."""
    chat = chats.get_chat(g.user.id, chat_id)
    data = request_data()
    value = {"0": True, "1": False}.get(str(data.get("in_context")))  # True: left out
    if value is None:
        raise NumiError("invalid_in_context", 'in_context must be "0" or "1".', 400)
    listed = with_left_out(chat.settings, str(data.get("passage") or "")[:40], value)
    chat = chats.update_chat(
        g.user.id, chat_id, {"settings": {"left_out_passages": listed}}, current_app.config
    )
    if not is_htmx():
        return redirect(url_for("pages.chat_view", chat_id=chat_id))
    return panel_html(chat), 200, {"HX-Trigger": "numi:context-changed"}


@bp.post("/c/<chat_id>/messages/<int:message_id>/context")
def message_in_context_page(chat_id: str, message_id: int):
    """The message menu's and the panel's Leave out / Bring back (form field in_context
    "0" or "1"; `view=panel` answers with the panel, else with the transcript)."""
    chat = chats.get_chat(g.user.id, chat_id)
    data = request_data()
    value = {"0": False, "1": True}.get(str(data.get("in_context")))
    if value is None:
        raise NumiError("invalid_in_context", 'in_context must be "0" or "1".', 400)
    _set_in_context(chat, message_id, value)
    if not is_htmx():
        return redirect(url_for("pages.chat_view", chat_id=chat_id))
    if data.get("view") == "panel":
        page = chats.list_messages(chat, limit=current_app.config["NUMI_PAGE_SIZE_MESSAGES"])
        html = panel_html(chat) + render_template(
            "partials/_transcript_oob.html", chat=chat, **transcript_context(page, newest=True)
        )
        return html, 200, {"HX-Trigger": "numi:context-changed"}

    response = refreshed_transcript(chat_id)
    response.headers["HX-Trigger"] = "numi:context-changed"
    return response


def run_compaction(chat):
    """Compact `chat` now with its model (or NUMI_COMPACT_MODEL); refuses while a turn runs."""
    config = current_app.config
    if turn_manager().is_running(chat.id):
        raise turn_running()
    endpoint = _endpoint(chat)
    if endpoint is None:
        raise no_model()
    adapter = endpoint_store.endpoint_adapter(current_app._get_current_object(), endpoint)
    # The summary request carries the chat's history: it leaves through the chat's gateway.
    rules = rules_for(endpoint.settings.get("redaction"), endpoint.base_url)
    adapter = ChatGateway(chat.id).adapter(adapter, rules)
    model = config["NUMI_COMPACT_MODEL"] or chat.model
    # No summary request larger than the model's known window (in pieces if need be).
    budget = summary_budget(
        config,
        endpoint_store.model_capabilities(endpoint, model),
        calibrations.calibration(chat.id, endpoint.id, model),
    )
    service = _service(chat)
    db.session.expunge(chat)  # the service commits and releases the session while the model writes
    return compact(service, adapter, model, config, budget=budget)


@bp.post("/api/session/<chat_id>/compact")
def compact_route(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    checkpoint = run_compaction(chat)
    return jsonify(checkpoint_dict(checkpoint)), 201


@bp.get("/c/<chat_id>/context_gauge")
def gauge(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    return render_template(
        "partials/_context_gauge.html",
        chat=chat,
        gauge=context_info(chat),
        budget_warnings=budget_lines(chat),
    )


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
    """The context panel's Auto-compact switch: the chat's own auto_compact setting. The
    answer is the panel again; the ring reloads on numi:context-changed."""
    data = request_data()
    value = parse_bool(data.get("auto_compact"), "auto_compact")
    chat = chats.update_chat(
        g.user.id, chat_id, {"settings": {"auto_compact": value}}, current_app.config
    )
    if is_htmx():
        html = render_template(
            "partials/_context_panel.html",
            chat=chat,
            info=describe_next(chat),
            budget_warnings=budget_lines(chat),
        )
        return html, 200, {"HX-Trigger": "numi:context-changed"}
    return redirect(url_for("pages.chat_view", chat_id=chat_id))
