"""The chat page: the start page, one chat's transcript, older messages.

The same partial renders inside the full page, as an HTMX response and as a WebSocket push.
`HX-Request` decides fragment versus page. Every form also works without JavaScript.
"""

from __future__ import annotations

from flask import current_app, g, render_template

from ... import endpoints as endpoint_store
from ... import prompts as prompt_store
from ...chat import chats, followups, organising
from ...chat.attachments import transcript_attachments, transcript_checkpoints
from ...chat.versions import continued_steps, version_info
from ...extensions import turn_manager
from ..inputs import int_arg
from ..organising import deleted_chat_toast
from ..sidebar import sidebar_context
from ..temporary import no_store_if_temporary
from .chat_forms import chat_tools_context
from .chat_list import open_chat_sidebar
from .base import bp, running_ids


def _picker_endpoints() -> list:
    """The endpoints the page's model pickers offer; lists gone stale are fetched in the
    background for the next view (this one shows what is known)."""
    endpoints = endpoint_store.list_endpoints(g.user.id)
    endpoint_store.refresh_stale(endpoints)
    return endpoints


@bp.get("/")
def index():
    page = chats.list_chats(g.user.id, limit=current_app.config["NUMI_PAGE_SIZE_CHATS"])
    endpoints = _picker_endpoints()
    return render_template(
        "chat.html",
        chat=None,
        sidebar=page,
        running_ids=running_ids(page),
        endpoints=endpoints,
        preselected=endpoint_store.preselected_route(g.user.id, endpoints),
        prompts=prompt_store.list_prompts(g.user.id),  # the suggestions under the greeting
        tags=organising.user_tags(g.user.id),
        page_toast=deleted_chat_toast(),
        **sidebar_context(),
        **chat_tools_context(),
    )


@bp.get("/c/<chat_id>")
def chat_view(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    config = current_app.config
    at = int_arg("at", low=1)  # open on a message (search hit, outline) instead of the end
    has_newer = False
    if at is not None:
        page, has_newer = chats.list_messages_around(
            chat, at, limit=config["NUMI_PAGE_SIZE_MESSAGES"]
        )
    else:
        page = chats.list_messages(chat, limit=config["NUMI_PAGE_SIZE_MESSAGES"])
    running = turn_manager().running_or_unknown(chat.id)
    live_unknown = running is None  # Redis unreachable: say so rather than guess
    queue = [item.to_dict() for item in followups.list_items(g.user.id, chat.id)]
    no_store_if_temporary(chat)
    return render_template(
        "chat.html",
        queue=queue,
        paused=bool(queue) and running is False,
        live_unknown=live_unknown,
        chat=chat,
        # The open chat is in the sidebar even when it is far down the list.
        **open_chat_sidebar(chat),
        endpoints=_picker_endpoints(),
        tags=organising.user_tags(g.user.id),
        page_toast=deleted_chat_toast(),
        **sidebar_context(),
        **chat_tools_context(),
        running=running,
        has_newer=has_newer,
        interrupted=running is False and not has_newer and interrupted_turn(page.items),
        stale_calls=running is False,
        prompts=prompt_store.list_prompts(g.user.id),
        **transcript_context(page, newest=not has_newer),
    )


@bp.get("/c/<chat_id>/messages")
def older_messages(chat_id: str):
    chat = chats.get_chat(g.user.id, chat_id)
    page = chats.list_messages(
        chat,
        limit=current_app.config["NUMI_PAGE_SIZE_MESSAGES"],
        before_id=int_arg("before", low=1),
    )
    running = turn_manager().running_or_unknown(chat.id)
    no_store_if_temporary(chat)
    return render_template(
        "partials/_messages_page.html",
        chat=chat,
        stale_calls=running is False,
        **transcript_context(page),
    )


def interrupted_turn(messages) -> bool:
    """Whether the newest turn stopped without a final answer while no turn is running.

    A turn that fails saves its error on a message (shown with Retry); only a server that
    stopped mid-turn (a crash, a kill, a restart) leaves the transcript ending on the
    question, on a step that called tools, or on a tool result. Nothing is marked at
    start-up: the transcript itself says it, whenever the chat is opened.
    """
    if not messages:
        return False
    last = messages[-1]
    return last.role in ("user", "tool") or (last.role == "assistant" and bool(last.tool_calls))


def transcript_context(page, *, newest: bool = False) -> dict:
    """A page of messages plus what its templates need to pair tool calls with results.
    `newest`: the page ends the transcript, so its last message may offer Retry."""
    tool_results = {m.tool_call_id: m for m in page.items if m.role == "tool" and m.tool_call_id}
    page_call_ids = {
        call.get("id") for m in page.items if m.role == "assistant" for call in m.tool_calls
    }
    chat_id = page.items[0].chat_id if page.items else None
    versions = version_info(chat_id, page.items) if page.items else {}
    return {
        "transcript": page,
        "tool_results": tool_results,
        "page_call_ids": page_call_ids,
        "versions": versions,
        "retry_after": page.items[-1].id if newest and page.items else None,
        # A turn's steps and its final answer read as one answer block.
        "continued_ids": continued_steps(chat_id, page.items) if page.items else set(),
        # Loaded once for the page, not once per message by the templates.
        "attachments": transcript_attachments(chat_id, page.items) if page.items else {},
        "checkpoints": transcript_checkpoints(chat_id) if page.items else {},
    }
