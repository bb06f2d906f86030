"""A tool call's card (partials/_tool_card.html), one shape whichever way it is drawn: live
from the turn's events (numi.web.live.fragments), from a snapshot, or from the saved step and
its result after a reload. Drawing all three from the same fields is what keeps a finished
card looking the same live and reloaded: its arguments, its result, how long it took.

A call that did not run because the user said no reads "Denied" (or "Not run" after a
Stop, or when no answer came in time), not "failed": nothing went wrong, the user chose.
"""

from __future__ import annotations

import json
import re
from typing import Any

from markupsafe import Markup
from sqlalchemy import select

from ...extensions import db
from ...models import Message
from ...render import render_markdown
from ...render.sanitize import sanitize
from . import tool_steps, tool_words

# error_code of a result (agent/tool_runner.py) -> the card's status, when not "failed".
_NOT_RUN = {
    "denied": "denied",
    "stopped": "stopped",
    "approval_timeout": "expired",
    # run_python stopped mid-run: it ran, its output so far is on the card.
    "interrupted": "halted",
}

# What the status line says for each status.
STATUS_TEXT = {
    "preparing": "preparing…",
    "approval": "needs your approval",
    "running": "running…",
    "done": "done",
    "failed": "failed",
    "denied": "Denied",
    "stopped": "Not run: stopped",
    "expired": "Not run: no answer in time",
    "pending": "queued",
    "interrupted": "interrupted: it never ran or its result was lost",
    "halted": "stopped by you (output so far kept)",
}


def finished_status(ok: Any, code: Any) -> str:
    """The status of a call that has ended: done, failed, or not run by the user's choice."""
    if ok is None or ok:
        return "done"
    return _NOT_RUN.get(code, "failed")


def saved_card(call: dict[str, Any], result: Any, *, stale: bool = False) -> dict[str, Any]:
    """The card of a saved call (`call`: one entry of an assistant step's tool_calls) and
    its saved result message (None: no result yet; `stale`: none will come)."""
    function = call.get("function") or {}
    card = {
        "call_id": call.get("id"),
        "name": function.get("name") or call.get("name"),
        "arguments": _parsed(function.get("arguments") if function else call.get("arguments")),
        "status": "interrupted" if stale else "pending",
        "result": None,
        "duration_ms": None,
    }
    if result is not None:
        meta = result.meta
        card.update(
            status=finished_status(meta.get("ok", True), meta.get("error_code")),
            result=result.content,
            duration_ms=meta.get("duration_ms"),
            display=_display(meta),
        )
    return card


def saved_cards(step: Any, results: dict[str, Any], *, stale: bool = False) -> list[dict[str, Any]]:
    """The cards of a saved step's calls, in call order (`results`: its saved results by
    call id), as both the page and the live view draw them (partials/_tool_steps.html)."""
    return [saved_card(call, results.get(call.get("id")), stale=stale) for call in step.tool_calls]


# How many answers back the step of a result may be (finished_step).
_STEP_LOOKBACK = 8


def step_results(chat_id: str, step: Message) -> dict[str, Message]:
    """The saved results of a step's tool calls, by call id, detached from the session so
    they keep their values past the caller's commit (no reload per card)."""
    ids = [call.get("id") for call in step.tool_calls if call.get("id")]
    rows = db.session.execute(
        select(Message).where(
            Message.chat_id == chat_id,
            Message.role == "tool",
            Message.tool_call_id.in_(ids),
            Message.deleted_at.is_(None),
        )
    ).scalars()
    results = {row.tool_call_id: row for row in rows}
    for row in results.values():
        db.session.expunge(row)
    return results


def finished_step(chat_id: str, result: Message) -> tuple[Message, dict[str, Message]] | None:
    """The step whose last call `result` answers, and its results (detached), or None when
    `result` is not its step's last. A step's results are saved in call order once every
    call has ended (agent/tool_runner.py), so its last result means the step is done."""
    # The step is among the last few answers before its results: a compare turn's lanes
    # save theirs side by side.
    steps = db.session.execute(
        select(Message)
        .where(
            Message.chat_id == chat_id,
            Message.role == "assistant",
            Message.id < result.id,
            Message.deleted_at.is_(None),
        )
        .order_by(Message.id.desc())
        .limit(_STEP_LOOKBACK)
    ).scalars()
    owner = (
        s for s in steps if any(c.get("id") == result.tool_call_id for c in s.tool_calls or [])
    )
    step = next(owner, None)
    if step is None or step.tool_calls[-1].get("id") != result.tool_call_id:
        return None
    results = step_results(chat_id, step)
    db.session.expunge(step)
    return step, results


def result_card(result: Any) -> dict[str, Any]:
    """The card of a saved result whose call is not on the page (an older page has it)."""
    meta = result.meta
    return {
        "call_id": f"{result.tool_call_id}-result",
        "name": meta.get("tool"),
        "status": finished_status(meta.get("ok", True), meta.get("error_code")),
        "result": result.content,
        "duration_ms": meta.get("duration_ms"),
        "display": _display(meta),
    }


def snapshot_cards(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The cards a turn's snapshot (or a lane's) draws: every call that waits for approval,
    runs or has ended. A call still "preparing" has no card yet: its next event draws it."""
    # A pending approval keeps its arguments (the exact command) and their digest, so a
    # reloaded page shows what it is asked to approve and its Approve names that digest.
    pending = {a["call_id"]: a for a in data.get("pending_approvals", []) if a.get("call_id")}
    cards = []
    for tool in data.get("tools", []):
        if tool.get("status") not in ("approval", "running", "done", "failed"):
            continue
        card = dict(tool)
        if card["status"] == "approval" and card.get("call_id") in pending:
            card["arguments"] = pending[card["call_id"]].get("arguments")
            card["digest"] = pending[card["call_id"]].get("digest")
        elif card["status"] in ("done", "failed"):  # "Denied" is no failure
            card["status"] = finished_status(card["status"] == "done", card.get("error_code"))
        cards.append(card)
    return cards


def _display(meta: dict[str, Any]) -> dict[str, Any] | None:
    """What a saved result's card shows besides its text (run_python's outputs), or None.
    Only its shape is trusted here: the template escapes and sanitises every value."""
    display = meta.get("display")
    return display if isinstance(display, dict) else None


def _parsed(value: Any) -> Any:
    """Saved arguments (the model's JSON text) as the object the live events carry."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def arguments_text(value: Any) -> str:
    """A call's arguments as the card shows them: JSON, indented, however they arrived (a
    saved call keeps the model's JSON text, an event carries the parsed object). Text that
    is not JSON is shown as it is."""
    value = _parsed(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def approval_arguments(card: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments an approval card lists besides what it shows on its own (the command
    to run, the memory to keep): each is shown once. None: list them all."""
    args = card.get("arguments")
    if card.get("status") != "approval" or not isinstance(args, dict):
        return None
    if card.get("name") == "remember":
        return {k: v for k, v in args.items() if k not in ("text", "scope")}
    if isinstance(args.get("command"), str):
        if card.get("name") == "bash":
            # What bash ignores is listed apart, as ignored: only what it uses stays here.
            return {k: v for k, v in args.items() if k == "timeout"}
        return {k: v for k, v in args.items() if k != "command"}
    return None


def python_code(code: Any) -> Markup:
    """Code as the card shows it: highlighted by the one markdown renderer, in a fence
    longer than any run of backticks in it, so no code can end the block early."""
    text = str(code)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return render_markdown(f"{fence}python\n{text}\n{fence}")


def init_app(app) -> None:
    app.jinja_env.globals["saved_tool_cards"] = saved_cards
    app.jinja_env.globals["tool_step_groups"] = tool_steps.groups
    app.jinja_env.globals["result_tool_card"] = result_card
    app.jinja_env.globals["tool_approval_arguments"] = approval_arguments
    app.jinja_env.globals["tool_status_text"] = STATUS_TEXT
    app.jinja_env.globals["tool_sentence"] = tool_words.sentence
    app.jinja_env.globals["tool_risks"] = lambda name, arguments: tool_words.risks(
        name, arguments, python_network=bool(app.config.get("NUMI_CODE_NETWORK"))
    )
    app.jinja_env.filters["tool_arguments"] = arguments_text
    app.jinja_env.filters["python_code"] = python_code
    # HTML a kernel sent (a DataFrame): sanitised when saved and again when drawn, since a
    # saved result may come from an import.
    app.jinja_env.filters["sanitized_html"] = lambda html: Markup(sanitize(str(html or "")))
