"""The turn loop (DESIGN §4): save the question, call the model, run tools, repeat.

Save boundaries, exactly:
- the user message is saved before the model is called (`accepted` carries its id);
- each model step's assistant message is saved when the step ends, and a step with tool
  calls is saved before any of its tools runs;
- tool results stream out as each tool finishes (`tool_end`) and are saved in call order;
- `done` follows only a final answer without tool calls; the TurnManager emits `turn_end`
  after this function returns or raises, always.

No database transaction is open while a provider streams or a tool runs: the session is
released before each model call, and every save is its own short transaction.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import gevent
from flask import current_app
from sqlalchemy.exc import IntegrityError

from .. import endpoints as endpoint_store
from ..chat.context import ChatContextService, ChatDeleted, ChatMeta
from ..errors import NumiError, no_model
from ..models import Endpoint
from ..turns.turn import Turn
from .approvals import approval_policy, call_digest, new_call_id
from .prepare import prepare_messages
from .tools import Tool, ToolContext, ToolFailure, ToolRegistry, ToolResult
from .tools.clock import user_now

log = logging.getLogger(__name__)

MAX_TOOL_RESULT_CHARS = 100_000


@dataclass
class Route:
    """Which endpoint and model a step calls."""

    endpoint_id: int
    kind: str
    base_url: str
    api_key: str | None
    model: str
    reasoning_policy: str = "auto"
    models: list[dict] = field(default_factory=list)
    guarded: bool = False  # a non-admin's own endpoint: requests pass the address guard

    @classmethod
    def of(cls, endpoint: Endpoint, model: str) -> "Route":
        return cls(endpoint.id, endpoint.kind, endpoint.base_url, endpoint.api_key, model,
                   endpoint.reasoning_policy, endpoint.models, endpoint_store.guarded(endpoint))


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


@dataclass
class StepResult:
    content: str = ""
    reasoning: str = ""
    reasoning_details: Any = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Any = None
    finish_reason: str | None = None
    error: Any = None  # StreamError
    output_started: bool = False
    ttft_ms: float | None = None
    started: float = 0.0
    first_output_at: float | None = None
    ended: float = 0.0


def tool_registry(app) -> ToolRegistry:
    """The app's tool registry (plugins and tests register their own tools on it)."""
    return app.extensions["numi.tools"]


def adapter_for_route(app, route: Route):
    return endpoint_store.cached_adapter(app, route.kind, route.base_url, route.api_key, route.guarded)


def run_turn(turn: Turn) -> None:
    """The TurnManager's producer: run one turn to its end."""
    Agent(turn).run()


class Agent:
    def __init__(self, turn: Turn):
        self.turn = turn
        self.request = turn.request
        self.app = current_app._get_current_object()
        config = self.app.config
        self.context = ChatContextService(
            self.request.chat_id,
            self.request.user_id,
            max_messages=config["PROMPT_MAX_HISTORY_MESSAGES"],
            max_chars=config["PROMPT_MAX_HISTORY_CHARS"],
        )
        self.registry = tool_registry(self.app)
        self.max_steps = config["NUMI_MAX_STEPS"]
        self.answered = False
        self.sources: list[dict[str, Any]] = []  # cited by tools this turn; numbered [1], [2], ...
        # Context management (compaction, trimming, overflow recovery): once each per turn.
        self._compacted = False
        self._overflow_retried = False
        self._context_metrics: dict[str, Any] = {}
        self._trims_reported: set[str] = set()
        self._parts_cache: dict[tuple[int, bool], list[dict]] = {}
        self._starting = None  # the start gate while this turn holds it (see run)

    # --- the turn -----------------------------------------------------------------------------

    def run(self) -> None:
        gate = self.turn.start_gate
        if gate is not None and gate.enter():
            self._starting = gate
        try:
            self._run()
        except ChatDeleted as exc:
            self.turn.emit("error", exc.to_dict())
        except NumiError as exc:
            self.turn.emit("error", exc.to_dict())
        finally:
            self._started()
            self.context.release()

    def _run(self) -> None:
        turn, req = self.turn, self.request
        meta = self.context.meta()
        turn.emit("turn_start", {"history_boundary": self.context.last_message_id()})

        user_message = self.context.find_request(req.request_id) if req.request_id else None
        if user_message is not None:
            # A retried send: the question is saved already. If it was answered, the turn
            # is over; if not (the earlier turn failed before answering), answer it now.
            turn.emit("accepted", {"message_id": user_message.id, "request_id": req.request_id})
            answer_id = self._answer_after(user_message.id)
            if answer_id is not None:
                turn.emit("done", {"message_id": answer_id})
                return
        else:
            routes = self._routes(meta)  # before saving: no model means nothing to answer with
            self._check_attachments(routes[0])  # before saving: a missing file or a blind model
            try:
                user_message = self.context.save(
                    role="user",
                    content=req.message,
                    request_id=req.request_id,
                    content_parts=[{"type": "attachment", "id": a} for a in req.attachments] or None,
                )
            except IntegrityError:
                # The same request_id was saved at the same moment by another process (two
                # processes sharing a database without Redis): the saved question is the
                # answer, and that process's turn answers it.
                user_message = self.context.find_request(req.request_id) if req.request_id else None
                if user_message is None:
                    raise
                turn.emit("accepted", {"message_id": user_message.id, "request_id": req.request_id})
                return
            turn.emit("message_saved", {"message_id": user_message.id, "role": "user"})
            turn.emit("accepted", {"message_id": user_message.id, "request_id": req.request_id})
            self._loop(meta, routes)
            return
        self._loop(meta, self._routes(meta))

    def _started(self) -> None:
        """Leave the start gate (once): the turn is past its preparation."""
        if self._starting is not None:
            self._starting, starts = None, self._starting
            starts.leave()

    def _answer_after(self, message_id: int) -> int | None:
        """The id of a complete answer saved after the question, if any. Partial answers,
        error placeholders and steps that only called tools do not count: the turn
        stopped before its final answer, so a retry goes on from what was saved."""
        from sqlalchemy import select

        from ..extensions import db
        from ..models import Message

        rows = db.session.execute(
            select(Message).where(
                Message.chat_id == self.request.chat_id,
                Message.id > message_id,
                Message.role == "assistant",
                Message.shown(),
            ).order_by(Message.id.desc()).limit(20)
        ).scalars()
        return next((row.id for row in rows if not row.meta.get("partial") and not row.tool_calls), None)

    def _loop(self, meta: ChatMeta, routes: list[Route]) -> None:
        turn = self.turn
        settings = meta.settings
        tools = self.registry.active(settings.get("tools"), is_admin=self.request.is_admin,
                                     user_id=self.request.user_id)  # + the user's MCP tools
        route_index = 0
        for step in range(1, self.max_steps + 1):
            route = routes[route_index]
            messages = self._context_messages(meta, route)
            self.context.release()
            self._started()
            # Let streams already running relay what they have before this turn spends
            # more CPU on its request: when many turns start at once, their tokens would
            # otherwise wait behind every start.
            gevent.sleep(0)
            result = self._call_model(route, messages, settings, tools, step)
            result = self._recover_overflow(meta, route, result, tools, step)
            # Fallback: only while nothing has been shown, move to the next route.
            while result.error is not None and not result.output_started and not turn.cancelled \
                    and route_index + 1 < len(routes) and result.error.code != "context_budget":
                route_index += 1
                route = routes[route_index]
                turn.emit("model_route", {"endpoint_id": route.endpoint_id, "model": route.model,
                                          "reason": result.error.code})
                messages = self._context_messages(meta, route, allow_compact=False)
                self.context.release()
                result = self._call_model(route, messages, settings, tools, step)

            if turn.cancelled:
                self._save_partial(route, result, step, {"code": "cancelled", "message": "Stopped by the user."},
                                   keep_empty=False)
                turn.emit("error", {"code": "cancelled", "message": "Stopped."})
                return
            if result.error is not None:
                error = {"code": result.error.code, "message": result.error.message}
                self._save_partial(route, result, step, error)
                turn.emit("error", error)
                return

            gevent.sleep(0)  # as before the call: other turns' tokens first, then this save
            message = self._save_step(route, result, step)
            if not result.tool_calls:
                turn.emit("done", {"message_id": message.id})
                self.answered = True
                self._schedule_title(meta, route)
                return
            self._run_tools(result.tool_calls, tools, meta, step)
            if turn.cancelled:
                turn.emit("error", {"code": "cancelled", "message": "Stopped."})
                return
        turn.emit("error", {"code": "step_limit",
                            "message": f"Stopped after {self.max_steps} model steps without a final answer."})

    # --- routes -------------------------------------------------------------------------------

    def _routes(self, meta: ChatMeta) -> list[Route]:
        """The chat's model, then its fallbacks. An empty model or a deleted endpoint is
        repaired to a route the user can see, and the repair is stored on the chat."""
        user_id = self.request.user_id
        routes: list[Route] = []
        endpoint = None
        if meta.endpoint_id is not None:
            try:
                endpoint = endpoint_store.get_endpoint(user_id, meta.endpoint_id)
            except NumiError:
                endpoint = None
        model = meta.model if endpoint is not None else None
        if endpoint is None or not endpoint.enabled or not model:
            if endpoint is None or not endpoint.enabled:
                endpoint = endpoint_store.default_route(user_id)
            model = (endpoint.default_model or (endpoint.model_ids[0] if endpoint.models else None)) if endpoint else None
            if endpoint is None or not model:
                raise no_model()
            self.context.update_route(endpoint.id, model)
            self.turn.emit("model_route", {"endpoint_id": endpoint.id, "model": model, "reason": "repaired"})
        endpoint_store.check_address(endpoint)  # a clear refusal; the transport checks every request too
        routes.append(Route.of(endpoint, model))
        for fallback in meta.settings.get("fallbacks") or ():
            try:
                fb_endpoint = endpoint_store.get_endpoint(user_id, int(fallback.get("endpoint_id") or endpoint.id))
                endpoint_store.check_address(fb_endpoint)
            except (NumiError, TypeError, ValueError):
                continue
            if fb_endpoint.enabled:
                routes.append(Route.of(fb_endpoint, fallback["model"]))
        return routes

    # --- one model call -----------------------------------------------------------------------

    def _system_prompt(self, settings: dict[str, Any]) -> str:
        now = user_now(self.request.timezone, self.request.tz_offset_minutes)
        context = f"Current date and time for the user: {now.strftime('%A, %Y-%m-%d %H:%M')} ({now.tzinfo})."
        prompt = (settings.get("system_prompt") or "").strip()
        return f"{prompt}\n\n{context}" if prompt else context

    def _call_model(self, route: Route, messages: list[dict], settings: dict[str, Any],
                    tools: list[Tool], step: int) -> StepResult:
        from ..providers import ChatRequest, ToolSpec
        from ..providers.capabilities import capabilities
        from ..providers.events import (Finish, ReasoningDelta, StreamError, TextDelta,
                                        ToolCallComplete, ToolCallDelta, Usage)

        reported = next((m for m in route.models if m.get("id") == route.model), None)
        caps = capabilities(route.model, _model_info(reported) if reported else None)
        request = ChatRequest(
            model=route.model,
            messages=prepare_messages(messages, kind=route.kind, reasoning_policy=route.reasoning_policy,
                                      model=route.model),
            tools=[ToolSpec(t.name, t.description, t.parameters) for t in tools] if caps.tools else [],
            system=self._system_prompt(settings),
            temperature=settings.get("temperature"),
            max_tokens=settings.get("max_tokens"),
            reasoning_effort=settings.get("reasoning_effort"),
            reasoning=caps.reasoning,
        )
        result = StepResult(started=time.monotonic())
        adapter = adapter_for_route(self.app, route)
        stream = adapter.stream(request)
        unregister = self.turn.on_cancel(stream.close)
        turn = self.turn
        # Parts joined once at the end: `result.content += text` on an attribute copies the
        # whole answer per token (quadratic; seconds of CPU for a 30,000-token answer).
        content: list[str] = []
        reasoning: list[str] = []
        call_ids: dict[int, str] = {}  # the step's call index -> Numi's id for that call
        try:
            for count, event in enumerate(stream, 1):
                if count % 16 == 0:
                    # A fast stream arrives faster than it is read: without a pause the
                    # producer would keep the hub until the answer ends, and clients and
                    # other turns would see nothing meanwhile.
                    gevent.sleep(0)
                if isinstance(event, TextDelta):
                    self._mark_output(result)
                    content.append(event.text)
                    turn.emit_delta("content", event.text, step)
                elif isinstance(event, ReasoningDelta):
                    self._mark_output(result)
                    reasoning.append(event.text)
                    turn.emit_delta("reasoning", event.text, step)
                elif isinstance(event, ToolCallDelta):
                    self._mark_output(result)
                    call_id = call_ids.get(event.index) or call_ids.setdefault(event.index, new_call_id())
                    if event.name:
                        turn.emit("tool_preparing", {"call_id": call_id, "name": event.name, "step": step})
                elif isinstance(event, ToolCallComplete):
                    self._mark_output(result)
                    result.tool_calls.append(ToolCall(
                        call_ids.setdefault(event.index, new_call_id()), event.id, event.name, event.arguments,
                        event.arguments_json, event.arguments_error))
                elif isinstance(event, Usage):
                    result.usage = event
                elif isinstance(event, Finish):
                    result.finish_reason = event.reason
                    result.reasoning_details = event.reasoning_details
                elif isinstance(event, StreamError):
                    result.error = event
                    result.output_started = result.output_started or event.after_output
        except Exception as exc:  # an adapter bug must not lose the partial answer
            log.exception("provider stream failed")
            result.error = StreamError("stream_interrupted", f"The provider stream failed: {type(exc).__name__}.",
                                       after_output=result.output_started)
        finally:
            result.content, result.reasoning = "".join(content), "".join(reasoning)
            unregister()
            stream.close()
            turn.flush()
        result.ended = time.monotonic()
        return result

    @staticmethod
    def _mark_output(result: StepResult) -> None:
        if not result.output_started:
            result.output_started = True
            result.first_output_at = time.monotonic()
            result.ttft_ms = round((result.first_output_at - result.started) * 1000, 1)

    # --- saving -------------------------------------------------------------------------------

    def _metrics(self, route: Route, result: StepResult) -> dict[str, Any]:
        usage = result.usage
        output_tokens = getattr(usage, "output_tokens", None)
        streaming_s = result.ended - (result.first_output_at or result.started)
        return {
            "ttft_ms": result.ttft_ms,
            "duration_ms": round((result.ended - result.started) * 1000, 1),
            "input_tokens": getattr(usage, "input_tokens", None),
            "output_tokens": output_tokens,
            "tokens_per_s": round(output_tokens / streaming_s, 1) if output_tokens and streaming_s > 0 else None,
            **self._context_metrics,
        }

    def _meta(self, route: Route, result: StepResult, step: int) -> dict[str, Any]:
        return {
            "model": route.model,
            "endpoint_id": route.endpoint_id,
            "step": step,
            "turn_id": self.turn.id,
            "finish_reason": result.finish_reason,
            "metrics": self._metrics(route, result),
            "usage": _usage_dict(result.usage),
        }

    def _save_step(self, route: Route, result: StepResult, step: int):
        tool_calls = [
            {"id": c.id, "provider_id": c.provider_id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments_json or "{}"}}
            for c in result.tool_calls
        ]
        message = self.context.save(
            role="assistant",
            content=result.content,
            reasoning_content=result.reasoning or None,
            reasoning_details=result.reasoning_details,
            tool_calls=tool_calls or None,
            meta=self._meta(route, result, step),
            # The final answer carries the sources the turn's tools cited.
            citation_sources=list(self.sources) if self.sources and not tool_calls else None,
        )
        self.turn.emit("message_saved", {"message_id": message.id, "role": "assistant",
                                         "tool_calls": [c["id"] for c in tool_calls]})
        self.turn.emit("metrics", {"message_id": message.id, **self._metrics(route, result)})
        return message

    def _save_partial(self, route: Route, result: StepResult, step: int, error: dict[str, Any],
                      *, keep_empty: bool = True) -> None:
        """Keep what was shown before a failure or a stop, with the error on the message.

        A failure before any output is kept too, as an empty answer carrying the error, so
        the transcript still shows it (with Retry) after a reload; history loading leaves
        such placeholders out of model requests.
        """
        if not (result.content or result.reasoning) and not keep_empty:
            return
        meta = self._meta(route, result, step)
        meta["error"] = error
        meta["partial"] = True
        message = self.context.save(role="assistant", content=result.content,
                                    reasoning_content=result.reasoning or None, meta=meta)
        self.turn.emit("message_saved", {"message_id": message.id, "role": "assistant", "tool_calls": []})

    # --- tools --------------------------------------------------------------------------------

    def _run_tools(self, calls: list[ToolCall], tools: list[Tool], meta: ChatMeta, step: int) -> None:
        """Run the step's calls concurrently; report each as it ends; save in call order."""
        available = {tool.name: tool for tool in tools}
        context = ToolContext(
            user_id=self.request.user_id, chat_id=self.request.chat_id, is_admin=self.request.is_admin,
            timezone=self.request.timezone, tz_offset_minutes=self.request.tz_offset_minutes,
            workspace=meta.settings.get("workspace"), settings=meta.settings,
        )
        results: dict[str, tuple[bool, str, str | None]] = {}
        greenlets = [gevent.spawn(self._run_one, call, available.get(call.name), context, results)
                     for call in calls]
        # Running tools finish even when the turn is stopped: their effects cannot be undone.
        gevent.joinall(greenlets)
        for call in calls:
            ok, text, code = results.get(call.id, (False, "The tool did not report a result.", "no_result"))
            meta = {"tool": call.name, "ok": ok, "step": step}
            if not ok:
                meta["error_code"] = code or "tool_error"
            message = self.context.save(role="tool", tool_call_id=call.id, content=text, meta=meta)
            self.turn.emit("message_saved", {"message_id": message.id, "role": "tool", "tool_call_id": call.id})

    def _run_one(self, call: ToolCall, tool: Tool | None, context: ToolContext,
                 results: dict[str, tuple[bool, str, str | None]]) -> None:
        turn = self.turn
        arguments = call.arguments if call.arguments is not None else {}
        started = time.monotonic()
        code = None
        if tool is None:
            ok, text, code = False, f"Error: there is no tool named {call.name!r} in this chat.", "unknown_tool"
        elif call.arguments_error:
            ok, text, code = False, (f"Error: the arguments are not valid JSON ({call.arguments_error}). "
                                     "Call the tool again with a JSON object."), "invalid_arguments"
        elif turn.cancelled:
            ok, text, code = False, "The call did not run: the user stopped the turn.", "stopped"
        else:
            decision = "approve"
            if approval_policy(tool, context.settings) == "ask":
                # The card shows exactly these arguments; the approval must name their digest.
                digest = call_digest(call.name, arguments)
                turn.emit("tool_approval", {"call_id": call.id, "name": call.name, "arguments": arguments,
                                            "digest": digest})
                decision = turn.wait_for_approval(call.id, self.app.config["NUMI_APPROVAL_TIMEOUT_SECONDS"],
                                                  digest=digest)
                if decision == "approve" and call_digest(call.name, arguments) != digest:
                    decision = "changed"  # never run what the card did not show
            if decision != "approve":
                code = {"deny": "denied", "stopped": "stopped", "changed": "call_changed"}.get(
                    decision, "approval_timeout")
                ok, text = False, {
                    "deny": "The user denied this call.",
                    "stopped": "The call did not run: the user stopped the turn.",
                    "changed": "The call changed after it was shown; it was not run.",
                }.get(decision, "No approval arrived in time; the call was not run.")
            else:
                turn.emit("tool_start", {"call_id": call.id, "name": call.name, "arguments": arguments})
                ok, text, code = self._execute(tool, arguments, context)
        duration_ms = round((time.monotonic() - started) * 1000, 1)
        results[call.id] = (ok, text, code)
        end = {"call_id": call.id, "name": call.name, "ok": ok, "result": text, "duration_ms": duration_ms}
        if not ok:
            end["error_code"] = code or "tool_error"
        turn.emit("tool_end", end)

    def _execute(self, tool: Tool, arguments: dict, context: ToolContext) -> tuple[bool, str, str | None]:
        """(ok, the text the model reads, an error code when not ok)."""
        timeout = tool.timeout or self.app.config["NUMI_TOOL_TIMEOUT_SECONDS"]
        try:
            with gevent.Timeout(timeout):
                with self.app.app_context():
                    value = tool.run(arguments, context)
        except gevent.Timeout:
            return False, f"Error: the tool timed out after {timeout:g} s.", "timeout"
        except ToolFailure as failure:
            text = failure.text
            if len(text) > MAX_TOOL_RESULT_CHARS:
                text = text[:MAX_TOOL_RESULT_CHARS] + f"\n[... cut: {len(text) - MAX_TOOL_RESULT_CHARS} more characters]"
            return False, text, failure.code
        except Exception as exc:
            log.info("tool %s failed: %r", tool.name, exc)
            return False, f"Error: {type(exc).__name__}: {str(exc)[:500]}", "tool_error"
        if isinstance(value, ToolResult):
            text = self._cite(value)
        else:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        if len(text) > MAX_TOOL_RESULT_CHARS:
            text = text[:MAX_TOOL_RESULT_CHARS] + f"\n[... cut: {len(text) - MAX_TOOL_RESULT_CHARS} more characters]"
        return True, text, None

    # --- context: attachments, compaction, trimming, overflow recovery (issue 5) --------------

    def _capabilities(self, route: Route):
        from ..providers.capabilities import capabilities

        reported = next((m for m in route.models if m.get("id") == route.model), None)
        return capabilities(route.model, _model_info(reported) if reported else None)

    def _check_attachments(self, route: Route) -> None:
        """Refuse, before the question is saved, attachments that vanished or images for a
        model that cannot see them."""
        from ..chat.attachments import is_image, owned_rows

        if not self.request.attachments:
            return
        rows = owned_rows(self.request.user_id, list(self.request.attachments), self.app.config["NUMI_DATA_DIR"])
        if any(is_image(row) for row in rows) and not self._capabilities(route).vision:
            raise NumiError("model_cannot_see",
                            f"{route.model} cannot see images. Choose a model with vision, or remove the image.", 400)

    def _auto_compact_enabled(self, meta: ChatMeta) -> bool:
        value = meta.settings.get("auto_compact")
        return self.app.config["NUMI_AUTO_COMPACT"] if value is None else bool(value)

    def _context_limit(self, route: Route) -> int:
        config = self.app.config
        window = self._capabilities(route).context_window or config["NUMI_DEFAULT_CONTEXT_WINDOW"]
        return max(1, int(window * config["NUMI_AUTO_COMPACT_FRACTION"]))

    def _context_messages(self, meta: ChatMeta, route: Route, *, limit: int | None = None,
                          allow_compact: bool = True) -> list[dict]:
        """The messages of the next request: the loaded history, compacted first when it
        nears the model's window (auto-compaction), else trimmed, with attachments rebuilt."""
        from ..chat.context import estimate_tokens

        system = self._system_prompt(meta.settings)
        limit = limit or self._context_limit(route)
        history = self.context.history()
        self._report_history_limit(history, system)
        estimate = estimate_tokens(history.messages, system)
        if estimate > limit and allow_compact and not self._compacted and self._auto_compact_enabled(meta):
            if self._compact(route, "auto"):
                history = self.context.history()
                estimate = estimate_tokens(history.messages, system)
        messages = history.messages
        if estimate > limit:
            messages = self._trim(messages, limit, system)
        return self._expand_attachments(messages, self._capabilities(route).vision)

    def _compact(self, route: Route, reason: str) -> bool:
        """Compact now with the turn's model; False when there is nothing older or it failed
        (the caller then trims instead)."""
        from ..chat.compaction import compact

        self._compacted = True
        self._started()  # a summary is a model call: no other start waits for it
        self.turn.emit("context_compacting", {"reason": reason})
        try:
            checkpoint = compact(self.context, adapter_for_route(self.app, route),
                                 self.app.config["NUMI_COMPACT_MODEL"] or route.model, self.app.config,
                                 on_cancel=self.turn.on_cancel)
        except NumiError as exc:
            log.info("compaction (%s) skipped: %s", reason, exc.code)
            self.turn.emit("context_compacted", {"reason": reason, "ok": False, "code": exc.code})
            return False
        data = {"reason": reason, "ok": True, "checkpoint_id": checkpoint.id,
                "messages_before": checkpoint.messages_before, "messages_after": checkpoint.messages_after,
                "tokens_before": checkpoint.tokens_before, "tokens_after": checkpoint.tokens_after}
        self._context_metrics["context_compacted"] = {k: data[k] for k in ("messages_before", "messages_after")}
        self.turn.emit("context_compacted", data)
        return True

    def _trim(self, messages: list[dict], limit: int, system: str) -> list[dict]:
        """Drop the oldest whole turns from this request only (never the newest turn) until
        the estimate fits `limit`; report `context_trimmed` and keep the counts in metrics."""
        from ..chat.context import OMITTED_NOTICE, _group_turns, estimate_tokens

        prefix = [m for m in messages if m.get("_checkpoint") or m.get("_notice")]
        groups = _group_turns([m for m in messages if not (m.get("_checkpoint") or m.get("_notice"))])
        notice = [] if any(m.get("_notice") for m in prefix) else [
            {"role": "user", "content": OMITTED_NOTICE, "_notice": True},
            {"role": "assistant", "content": "Understood.", "_notice": True}]
        dropped = 0
        while len(groups) > 1 and estimate_tokens(prefix + notice + [m for g in groups for m in g], system) > limit:
            dropped += len(groups.pop(0))
        if not dropped:
            return messages
        trimmed = prefix + notice + [m for g in groups for m in g]
        self._emit_trimmed("context_window", _saved_count(messages), _saved_count(trimmed),
                           estimate_tokens(messages, system), estimate_tokens(trimmed, system))
        return trimmed

    def _report_history_limit(self, history, system: str) -> None:
        """Older turns that PROMPT_MAX_HISTORY_* left out of the request are a trim too."""
        from ..chat.context import estimate_tokens

        if not history.omitted or "history_limit" in self._trims_reported:
            return
        saved = [m for m in history.messages if not (m.get("_checkpoint") or m.get("_notice"))]
        tokens_before = estimate_tokens(saved, system) + history.omitted_chars // 4 + 4 * history.omitted
        self._emit_trimmed("history_limit", len(saved) + history.omitted, len(saved),
                           tokens_before, estimate_tokens(history.messages, system))

    def _emit_trimmed(self, reason: str, before: int, after: int, tokens_before: int, tokens_after: int) -> None:
        """`context_trimmed`: saved messages in the request before and after (the omission
        notice is not one of them) and the estimated tokens; the metrics keep the same."""
        self._trims_reported.add(reason)
        data = {"before": before, "after": after, "dropped": before - after,
                "tokens_before": tokens_before, "tokens_after": tokens_after, "reason": reason}
        self._context_metrics["context_trimmed"] = {k: data[k] for k in
                                                    ("before", "after", "tokens_before", "tokens_after")}
        self.turn.emit("context_trimmed", data)

    def _expand_attachments(self, messages: list[dict], vision: bool) -> list[dict]:
        """Rebuild attached files as content parts for this request only (image bytes are
        read from disk now; nothing of this is stored)."""
        from ..chat.attachments import attachments_by_id, message_attachment_ids, model_parts

        wanted = [i for m in messages for i in message_attachment_ids(m.get("_content_parts"))
                  if (i, vision) not in self._parts_cache]
        if wanted:
            rows = {i: a for i, a in attachments_by_id(wanted).items() if a.user_id == self.request.user_id}
            for i in wanted:
                self._parts_cache[(i, vision)] = model_parts(
                    self.app.config["NUMI_DATA_DIR"], [rows[i]] if i in rows else [], vision=vision,
                    max_side=self.app.config["NUMI_IMAGE_MAX_SIDE"]) if i in rows else [
                    {"type": "text", "text": "[an attached file is no longer available]"}]
        out = []
        for message in messages:
            ids = message_attachment_ids(message.get("_content_parts"))
            if ids:
                message = dict(message)
                text = message.get("content") or ""
                parts = [{"type": "text", "text": text}] if text else []
                for i in ids:
                    parts.extend(self._parts_cache[(i, vision)])
                message["content"] = parts
            out.append(message)
        return out

    def _recover_overflow(self, meta: ChatMeta, route: Route, result: StepResult, tools: list[Tool],
                          step: int) -> StepResult:
        """A context_overflow before any output: compact (or trim) once and call again.
        Only once per turn, so a model that keeps refusing cannot make this loop."""
        from ..chat.context import estimate_tokens

        if (result.error is None or result.error.code != "context_overflow" or result.output_started
                or self.turn.cancelled or self._overflow_retried):
            return result
        self._overflow_retried = True
        compacted = (not self._compacted and self._auto_compact_enabled(meta) and self._compact(route, "overflow"))
        history = self.context.history()
        estimate = estimate_tokens(history.messages, self._system_prompt(meta.settings))
        # Our estimate was too low for this model: after compaction aim for the normal
        # limit; without it, halve what was sent.
        limit = min(self._context_limit(route), max(1, estimate // 2)) if not compacted else None
        messages = self._context_messages(meta, route, limit=limit, allow_compact=False)
        self.context.release()
        self.turn.emit("context_retry", {"reason": "context_overflow", "compacted": compacted})
        return self._call_model(route, messages, meta.settings, tools, step)

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
                saved.update({k: v for k, v in source.items() if k not in ("content", "title", "url", "n")
                              and isinstance(v, str | int | float | bool | None)})
                self.sources.append(saved)
            parts.append(f"[{number}] {title}" + (f" ({url})" if url else "") + f"\n{source.get('content') or ''}".rstrip())
        return "\n\n".join(parts)

    # --- title --------------------------------------------------------------------------------

    def _schedule_title(self, meta: ChatMeta, route: Route) -> None:
        if meta.title != "New chat":
            return
        from ..chat.titles import generate_title

        self.turn.after_end = lambda: generate_title(
            self.app, self.turn.channel, self.turn.id, self.request.user_id, self.request.chat_id,
            adapter_for_route(self.app, route),
            self.app.config["NUMI_TITLE_MODEL"] or route.model,
        )


def _saved_count(messages: list[dict]) -> int:
    """Messages of a request that are saved messages (not a summary or the omission notice)."""
    return sum(1 for m in messages if not (m.get("_checkpoint") or m.get("_notice")))


def _model_info(reported: dict):
    from ..providers.events import ModelInfo

    fields = {k: reported.get(k) for k in ("context_window", "supports_vision", "supports_tools", "supports_reasoning")}
    return ModelInfo(id=reported["id"], **fields)


def _usage_dict(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {k: v for k, v in dataclasses.asdict(usage).items() if v is not None}
