"""The tool runner: one model step's tool calls, run concurrently (DESIGN §4, step 6).

Each call becomes a result the model reads, never an exception that ends the turn: an
unknown tool, arguments that are not JSON, a denial, a timeout and a failure are results
too. A tool whose approval policy is "ask" waits for the user's decision on the card that
shows its arguments (and their digest). `tool_start`/`tool_end` go out as each call runs
and ends; the results are saved in call order once all have ended. Running tools finish
even when the turn is stopped: their effects cannot be undone.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from typing import Any

import gevent

from ..knowledge.passages import answer_sources
from ..chat.context import ChatContextService, ChatMeta
from ..turns.turn import Turn
from .approvals import approval_policy, call_digest
from .tools import Tool, ToolContext, ToolFailure, ToolResult
from ..chat.attachments import TOOL_IMAGE

log = logging.getLogger(__name__)

MAX_TOOL_RESULT_CHARS = 100_000
# Images of one result a model that can see gets (the card shows them all).
MAX_IMAGES_FOR_MODEL = 4

# A call's outcome: ok, the text the model reads, the error code, its duration in ms and
# what its card shows besides the text (`display`, or None).
Outcome = tuple[bool, str, str | None, float | None, dict[str, Any] | None]


@dataclass
class ToolCall:
    """A complete tool call of a step, named by Numi's own id (`id`, unique in the chat);
    `provider_id` is the id the provider gave it, kept for replay (see approvals.py)."""

    id: str
    provider_id: str
    name: str
    arguments: dict[str, Any] | None
    arguments_json: str
    arguments_error: str | None = None


class ToolRunner:
    """Runs a turn's tool calls, step after step; numbers the sources they cite across the
    turn (`sources`, saved on the final answer)."""

    def __init__(self, app, turn: Turn, context: ChatContextService):
        self.app = app
        self.turn = turn
        self.request = turn.request
        self.context = context
        self.sources: list[dict[str, Any]] = []  # cited by tools this turn; numbered [1], [2], ...
        # How results are saved: the turn's durable saves (agent/durable.py) when it has them.
        self.save = context.save

    def run(self, calls: list[ToolCall], tools: list[Tool], meta: ChatMeta, step: int) -> None:
        """Run the step's calls concurrently; report each as it ends; save in call order."""
        available = {tool.name: tool for tool in tools}
        context = ToolContext(
            user_id=self.request.user_id,
            chat_id=self.request.chat_id,
            is_admin=self.request.is_admin,
            timezone=self.request.timezone,
            tz_offset_minutes=self.request.tz_offset_minutes,
            workspace=meta.settings.get("workspace"),
            settings=meta.settings,
        )
        results: dict[str, Outcome] = {}
        greenlets = [
            gevent.spawn(self._run_one, call, available.get(call.name), context, results)
            for call in calls
        ]
        # Running tools finish even when the turn is stopped: their effects cannot be undone.
        gevent.joinall(greenlets)
        for call in calls:
            ok, text, code, duration_ms, display = results.get(
                call.id, (False, "The tool did not report a result.", "no_result", None, None)
            )
            # Its duration too: the card after a reload shows what the live one showed.
            saved_meta: dict[str, Any] = {
                "tool": call.name,
                "ok": ok,
                "step": step,
                "duration_ms": duration_ms,
            }
            if not ok:
                saved_meta["error_code"] = code or "tool_error"
            if display is not None:
                saved_meta["display"] = display
            message = self.save(
                role="tool",
                tool_call_id=call.id,
                content=text,
                meta=saved_meta,
                content_parts=shown_images(display) or None,
            )
            self.turn.emit(
                "message_saved", {"message_id": message.id, "role": "tool", "tool_call_id": call.id}
            )

    def _run_one(
        self,
        call: ToolCall,
        tool: Tool | None,
        context: ToolContext,
        results: dict[str, Outcome],
    ) -> None:
        turn = self.turn
        arguments = call.arguments if call.arguments is not None else {}
        started = time.monotonic()
        code = None
        display = None
        if tool is None:
            ok, text, code = (
                False,
                f"Error: there is no tool named {call.name!r} in this chat.",
                "unknown_tool",
            )
        elif call.arguments_error:
            ok, text, code = (
                False,
                (
                    f"Error: the arguments are not valid JSON ({call.arguments_error}). "
                    "Call the tool again with a JSON object."
                ),
                "invalid_arguments",
            )
        elif turn.cancelled:
            ok, text, code = False, "The call did not run: the user stopped the turn.", "stopped"
        else:
            decision = "approve"
            if approval_policy(tool, context.settings) == "ask":
                # The card shows exactly these arguments; the approval must name their digest.
                digest = call_digest(call.name, arguments)
                turn.emit(
                    "tool_approval",
                    {
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": arguments,
                        "digest": digest,
                    },
                )
                decision = turn.wait_for_approval(
                    call.id, self.app.config["NUMI_APPROVAL_TIMEOUT_SECONDS"], digest=digest
                )
                if decision == "approve" and call_digest(call.name, arguments) != digest:
                    decision = "changed"  # never run what the card did not show
            if decision != "approve":
                code = {"deny": "denied", "stopped": "stopped", "changed": "call_changed"}.get(
                    decision, "approval_timeout"
                )
                ok, text = (
                    False,
                    {
                        "deny": "The user denied this call.",
                        "stopped": "The call did not run: the user stopped the turn.",
                        "changed": "The call changed after it was shown; it was not run.",
                    }.get(decision, "No approval arrived in time; the call was not run."),
                )
            else:
                turn.emit(
                    "tool_start", {"call_id": call.id, "name": call.name, "arguments": arguments}
                )
                ok, text, code, display = self._execute(tool, arguments, self._live(call, context))
        duration_ms = round((time.monotonic() - started) * 1000, 1)
        results[call.id] = (ok, text, code, duration_ms, display)
        end = {
            "call_id": call.id,
            "name": call.name,
            # The finished card keeps the arguments it was called with (as after a reload).
            "arguments": call.arguments_json or "{}" if call.arguments_error else arguments,
            "ok": ok,
            "result": text,
            "duration_ms": duration_ms,
        }
        if not ok:
            end["error_code"] = code or "tool_error"
        if display is not None:
            end["display"] = display
        turn.emit("tool_end", end)

    def _live(self, call: ToolCall, context: ToolContext) -> ToolContext:
        """The call's own context: what it prints goes to its card (`tool_output`), and it
        can see a Stop while it runs."""
        turn = self.turn

        def report(stream: str, text: str) -> None:
            turn.emit("tool_output", {"call_id": call.id, "stream": stream, "text": text})

        return replace(context, report=report, stop_requested=lambda: bool(turn.cancelled))

    def _execute(
        self, tool: Tool, arguments: dict, context: ToolContext
    ) -> tuple[bool, str, str | None, dict[str, Any] | None]:
        """(ok, the text the model reads, an error code when not ok, what the card shows
        besides the text)."""
        timeout = tool.timeout or self.app.config["NUMI_TOOL_TIMEOUT_SECONDS"]
        try:
            with gevent.Timeout(timeout):
                with self.app.app_context():
                    value = tool.run(arguments, context)
        except gevent.Timeout:
            return False, f"Error: the tool timed out after {timeout:g} s.", "timeout", None
        except ToolFailure as failure:
            text = failure.text
            if len(text) > MAX_TOOL_RESULT_CHARS:
                text = (
                    text[:MAX_TOOL_RESULT_CHARS]
                    + f"\n[... cut: {len(text) - MAX_TOOL_RESULT_CHARS} more characters]"
                )
            return False, text, failure.code, failure.display
        except Exception as exc:
            log.info("tool %s failed: %r", tool.name, exc)
            return False, f"Error: {type(exc).__name__}: {str(exc)[:500]}", "tool_error", None
        display = None
        if isinstance(value, ToolResult):
            text = self._cite(value)
            display = value.display
        else:
            text = (
                value
                if isinstance(value, str)
                else json.dumps(value, ensure_ascii=False, default=str)
            )
        if len(text) > MAX_TOOL_RESULT_CHARS:
            text = (
                text[:MAX_TOOL_RESULT_CHARS]
                + f"\n[... cut: {len(text) - MAX_TOOL_RESULT_CHARS} more characters]"
            )
        return True, text, None, display

    def cite_passages(self, passages: tuple[dict[str, Any], ...]) -> None:
        """The system context's passages are [1]..[n] as the model reads them: the answer
        cites them by those numbers, and the tools' sources number on after them."""
        if not self.sources:
            self.sources = answer_sources(passages)

    def _cite(self, result: ToolResult) -> str:
        """Number a tool's sources across the turn (the same URL keeps its number) and
        return the text the model reads: `[n] title (url)` before each passage."""
        parts = [result.text] if result.text else []
        for source in result.sources:
            url = source.get("url") if isinstance(source.get("url"), str) else None
            title = str(source.get("title") or url or "Untitled")[:300]
            number = next((s["n"] for s in self.sources if url and s.get("url") == url), None)
            if number is None:
                number = len(self.sources) + 1
                saved = {"n": number, "title": title, "url": url}
                saved.update(
                    {
                        k: v
                        for k, v in source.items()
                        if k not in ("content", "title", "url", "n")
                        and isinstance(v, str | int | float | bool | None)
                    }
                )
                self.sources.append(saved)
            parts.append(
                f"[{number}] {title}"
                + (f" ({url})" if url else "")
                + f"\n{source.get('content') or ''}".rstrip()
            )
        return "\n\n".join(parts)


def shown_images(display: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The raster images a card shows (its `outputs` of type image kept as attachments, as
    run_python's plots), as the result's content parts: a model that can see gets them
    with the text (agent/context_window.py), any other the text alone."""
    outputs = display.get("outputs") if isinstance(display, dict) else None
    ids = [
        out["attachment_id"]
        for out in outputs or ()
        if isinstance(out, dict)
        and out.get("type") == "image"
        and out.get("mime") in ("image/png", "image/jpeg")
        and isinstance(out.get("attachment_id"), int)
    ]
    return [{"type": TOOL_IMAGE, "id": i} for i in ids[:MAX_IMAGES_FOR_MODEL]]
