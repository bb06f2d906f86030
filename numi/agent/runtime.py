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

The loop is here; its parts are modules of their own: `routes` (which endpoint and model a
step calls, and the fallbacks), `context_window` (what each request carries: compaction,
trimming, attachments, overflow recovery) and `tool_runner` (a step's tool calls). The
TurnManager gets `run_turn` as its producer from the app factory; this module imports the
turn layer, never the other way round.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
from flask import current_app
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from ..chat.context import ChatContextService, ChatDeleted, ChatMeta
from ..chat.request_meta import question_parts
from ..chat.titles import generate_title
from ..errors import NumiError, is_storage_failure, storage_unavailable
from ..extensions import db
from ..services import services
from ..models import Message
from ..providers import ChatRequest, ToolSpec
from ..providers.events import (
    Finish,
    ReasoningDelta,
    StreamError,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    Usage,
)
from ..turns.turn import LeaseLost, StartGate, Turn
from . import calibration as calibrations
from .approvals import new_call_id
from .budget_hold import BudgetHold
from .context_window import ContextWindow
from .durable import DurableSaves
from .prepare import prepare_messages
from .routes import FallbackNotice, Route, adapter_for_route, chat_routes
from .step import StepResult
from .spent import cache_saving, cut_short_usage, usage_cached, usage_dict
from .tool_offer import omission, refused_tools
from .tool_runner import ToolCall, ToolRunner
from .tools import Tool, ToolRegistry

log = logging.getLogger(__name__)

# A turn still running when the server's shutdown grace ran out: what it had is saved with
# this error, and the page offers Retry.
INTERRUPTED_BY_SHUTDOWN = {
    "code": "interrupted",
    "message": "The server restarted before this answer finished. Retry to answer again.",
}


def tool_registry(app) -> ToolRegistry:
    """The app's tool registry (plugins and tests register their own tools on it)."""
    return services(app).tools


class Agent:
    """One turn of one chat, run to its end by `run()`."""

    context_class = ChatContextService  # a compare lane reads and saves its own branch

    def __init__(self, turn: Turn):
        self.turn = turn
        self.request = turn.request
        # current_app is typed as the app it stands for; the real object is the proxy's.
        self.app = current_app._get_current_object()  # type: ignore[attr-defined]
        config = self.app.config
        self.context = self.context_class(
            self.request.chat_id,
            self.request.user_id,
            max_messages=config["PROMPT_MAX_HISTORY_MESSAGES"],
            max_chars=config["PROMPT_MAX_HISTORY_CHARS"],
            before_save=turn.confirm_lease,
        )
        self.registry = tool_registry(self.app)
        self.max_steps = config["NUMI_MAX_STEPS"]
        self.budget = BudgetHold(turn, config["NUMI_BUDGET_OUTPUT_TOKENS"])
        self.answered = False
        # The chat's newest message id when the turn started (None: the chat was empty).
        self.boundary: int | None = None
        self.window = ContextWindow(self.app, turn, self.context, before_model_call=self._started)
        self.tools = ToolRunner(self.app, turn, self.context)
        self.saves = DurableSaves(self.app, turn, self.context)
        self.tools.save = self.saves.save
        # The start gate while this turn holds it (see run).
        self._starting: StartGate | None = None
        self.fallback: FallbackNotice | None = None  # set when a fallback answered
        self._tools_notice: dict[str, Any] | None = None  # said once per turn

    # --- the turn -----------------------------------------------------------------------------

    def run(self) -> None:
        gate = self.turn.start_gate
        if gate is not None and gate.enter():
            self._starting = gate
        try:
            self._run()
        except LeaseLost:
            # Another process holds the chat now (this one stalled past its lease): it has
            # closed this turn; whatever this process still had is dropped, unsaved.
            log.warning("turn %s stopped: it lost its chat's lease", self.turn.id)
        except ChatDeleted as exc:
            self.turn.emit("error", exc.to_dict())
        except NumiError as exc:
            self.turn.emit("error", exc.to_dict())
        except Exception as exc:
            if not is_storage_failure(exc):
                raise
            # The database failed before anything was streamed (loading the chat, saving
            # the question): nothing to keep, the client still has its text.
            self.context.release()
            log.error("turn of chat %s: the database is unavailable", self.request.chat_id)
            self.turn.emit("error", storage_unavailable().to_dict())
        finally:
            self._started()
            self.budget.settle()
            self.context.release()

    def _run(self) -> None:
        turn, req = self.turn, self.request
        meta, self.boundary = self.context.start()
        turn.emit("turn_start", {"history_boundary": self.boundary})

        seen = req.request_id if req.request_id is not None and not req.question_new else None
        user_message = self.context.find_request(seen) if seen is not None else None
        if user_message is not None:
            # A retried send: the question is saved already. If it was answered, the turn
            # is over; if not (the earlier turn failed before answering), answer it now.
            turn.emit("accepted", {"message_id": user_message.id, "request_id": req.request_id})
            answer_id = self._answer_after(user_message)
            if answer_id is not None:
                turn.emit("done", {"message_id": answer_id})
                return
            # Unanswered (its turn was cut short), perhaps with later turns after it: the
            # answer continues the question's own branch, not the newest one.
            self.context.continue_turn(user_message.id)
            self.saves.tip_id = self.context.branch_tip()
        else:
            # Before saving: no model means nothing to answer with, no budget nothing to spend.
            routes = self.budget.reserve(self._routes(meta), meta.project_id)
            self.window.check_attachments(routes[0])  # before saving: missing file, blind model
            try:
                user_message = self.context.save(
                    role="user",
                    content=req.message,
                    request_id=req.request_id,
                    content_parts=question_parts(req.attachments, req.metadata),
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
            self.saves.tip_id = user_message.id
            turn.emit("message_saved", {"message_id": user_message.id, "role": "user"})
            turn.emit("accepted", {"message_id": user_message.id, "request_id": req.request_id})
            self._loop(meta, routes)
            return
        self._loop(meta, self.budget.reserve(self._routes(meta), meta.project_id))

    def _routes(self, meta: ChatMeta) -> list[Route]:
        """The routes this turn answers on (a compare turn: its lanes')."""
        return chat_routes(meta, self.request.user_id, self.context, self.turn)

    def _started(self) -> None:
        """Leave the start gate (once): the turn is past its preparation."""
        starts = self._starting
        if starts is not None:
            self._starting = None
            starts.leave()

    def _answer_after(self, question: Any) -> int | None:
        """The id of a complete answer of this question's own turn, if any. Partial
        answers, error placeholders and steps that only called tools do not count: the turn
        stopped before its final answer, so a retry goes on from what was saved. Answers
        to later questions are not its own; for a question on the transcript only its shown
        answer counts (a regenerate has just hidden the others to answer again)."""
        ids = self.context.turn_row_ids(question.id)
        if not ids:
            return None
        shown = [Message.active.is_(True)] if question.active else []
        rows = db.session.execute(
            select(Message)
            .where(
                Message.chat_id == self.request.chat_id,
                Message.id.in_(ids),
                Message.role == "assistant",
                *shown,
            )
            .order_by(Message.id.desc())
        ).scalars()
        return next(
            (row.id for row in rows if not row.meta.get("partial") and not row.tool_calls), None
        )

    def _loop(self, meta: ChatMeta, routes: list[Route]) -> None:
        turn = self.turn
        settings = meta.settings
        tools = self.registry.active(
            settings.get("tools"),
            is_admin=self.request.is_admin,
            user_id=self.request.user_id,
            temporary=meta.temporary,
        )  # + the user's MCP tools
        route_index = 0
        for step in range(1, self.max_steps + 1):
            route = routes[route_index]
            self._count_tools(route, tools)
            messages = self.window.messages(meta, route)
            self.context.release()
            self._started()
            # Let streams already running relay what they have before this turn spends
            # more CPU on its request: when many turns start at once, their tokens would
            # otherwise wait behind every start.
            gevent.sleep(0)
            result = self._call_model(route, messages, settings, tools, step)
            result = self._recover_overflow(meta, route, result, tools, step)
            if tools and refused_tools(result.error) and not turn.cancelled:
                # The server will not take tools for this model: answer without them.
                self._say_tools_omitted(
                    omission(route.model, "refused", len(tools), result.error.message)
                )
                tools = []
                result = self._call_model(route, messages, settings, tools, step)
            # Fallback: only while nothing has been shown, move to the next route. Once
            # output has begun the chain never switches (DESIGN §6).
            while (
                result.error is not None
                and not result.output_started
                and not turn.cancelled
                and route_index + 1 < len(routes)
                and result.error.code != "context_budget"
            ):
                failed = route
                route_index += 1
                route = routes[route_index]
                self.fallback = FallbackNotice.after(self.fallback, failed, result.error, route)
                turn.emit(
                    "model_route",
                    {
                        "endpoint_id": route.endpoint_id,
                        "model": route.model,
                        "reason": result.error.code,
                        "notice": self.fallback.trying(),
                    },
                )
                self._count_tools(route, tools)
                messages = self.window.messages(meta, route, allow_compact=False)
                self.context.release()
                result = self._call_model(route, messages, settings, tools, step)

            if turn.cancelled and turn.cancel_reason == "shutdown":
                self._save_partial(route, result, step, INTERRUPTED_BY_SHUTDOWN, keep_empty=False)
                turn.emit("error", INTERRUPTED_BY_SHUTDOWN)
                return
            if turn.cancelled:
                self._save_partial(
                    route,
                    result,
                    step,
                    {"code": "cancelled", "message": "Stopped by the user."},
                    keep_empty=False,
                )
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
            self.tools.run(result.tool_calls, tools, meta, step)
            if turn.cancelled:
                if turn.cancel_reason == "shutdown":
                    turn.emit("error", INTERRUPTED_BY_SHUTDOWN)
                else:
                    turn.emit("error", {"code": "cancelled", "message": "Stopped."})
                return
        turn.emit(
            "error",
            {
                "code": "step_limit",
                "message": f"Stopped after {self.max_steps} model steps without a final answer.",
            },
        )

    # --- one model call -----------------------------------------------------------------------

    def _call_model(
        self,
        route: Route,
        messages: list[dict],
        settings: dict[str, Any],
        tools: list[Tool],
        step: int,
    ) -> StepResult:
        caps = route.capabilities()
        offered = caps.tools and not self.window.tools_left_out  # the model, then its window
        if tools and not offered:
            self._say_tools_omitted(
                omission(route.model, self.window.tools_source(caps), len(tools))
            )
        request = ChatRequest(
            model=route.model,
            messages=prepare_messages(
                messages,
                kind=route.kind,
                reasoning_policy=route.reasoning_policy,
                model=route.model,
            ),
            tools=[ToolSpec(t.name, t.description, t.parameters) for t in tools] if offered else [],
            system=self.window.system(settings),  # as `messages` read it for this step
            temperature=settings.get("temperature"),
            max_tokens=settings.get("max_tokens"),
            reasoning_effort=settings.get("reasoning_effort"),
            reasoning=caps.reasoning,
            cache=route.prompt_caching,
        )
        self.tools.cite_passages(self.window.passages)  # [1]..[n], the tools' sources after
        result = StepResult(started=time.monotonic())
        adapter = self.window.privacy.adapter(adapter_for_route(self.app, route), route.redaction)
        # The system context reads the database (the project's instructions, memories):
        # end that transaction before the provider streams, which may take minutes.
        self.context.release()
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
                    if event.text:  # a signature alone is kept by Finish.reasoning_details
                        reasoning.append(event.text)
                        turn.emit_delta("reasoning", event.text, step)
                elif isinstance(event, ToolCallDelta):
                    self._mark_output(result)
                    call_id = call_ids.get(event.index) or call_ids.setdefault(
                        event.index, new_call_id()
                    )
                    if event.name:
                        turn.emit(
                            "tool_preparing", {"call_id": call_id, "name": event.name, "step": step}
                        )
                elif isinstance(event, ToolCallComplete):
                    self._mark_output(result)
                    result.tool_calls.append(
                        ToolCall(
                            call_ids.setdefault(event.index, new_call_id()),
                            event.id,
                            event.name,
                            event.arguments,
                            event.arguments_json,
                            event.arguments_error,
                        )
                    )
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
            result.error = StreamError(
                "stream_interrupted",
                f"The provider stream failed: {type(exc).__name__}.",
                after_output=result.output_started,
            )
        finally:
            result.content, result.reasoning = "".join(content), "".join(reasoning)
            unregister()
            stream.close()
            turn.flush()
        result.ended = time.monotonic()
        return result

    def _say_tools_omitted(self, notice: dict[str, Any]) -> None:
        """Tell the turn (once) that its tools were left out, and why; the answer's
        metrics keep the reason."""
        if self._tools_notice is None:
            self._tools_notice = notice
            self.turn.emit("tools_omitted", notice)

    @staticmethod
    def _mark_output(result: StepResult) -> None:
        if not result.output_started:
            result.output_started = True
            result.first_output_at = time.monotonic()
            result.ttft_ms = round((result.first_output_at - result.started) * 1000, 1)

    def _recover_overflow(
        self, meta: ChatMeta, route: Route, result: StepResult, tools: list[Tool], step: int
    ) -> StepResult:
        """A context_overflow before any output: compact (or trim) once and call again.
        Only once per turn (the context window keeps count), so a model that keeps
        refusing cannot make this loop."""
        if (
            result.error is None
            or result.error.code != "context_overflow"
            or result.output_started
            or self.turn.cancelled
        ):
            return result
        retry = self.window.after_overflow(meta, route, result.error.overflow)
        if retry is None:
            return result
        messages, compacted = retry
        self.context.release()
        self.turn.emit("context_retry", {"reason": "context_overflow", "compacted": compacted})
        return self._call_model(route, messages, meta.settings, tools, step)

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
            "cached_tokens": usage_cached(usage),
            "cache_saved": cache_saving(self.request.user_id, route.model, usage_cached(usage)),
            "tokens_per_s": round(output_tokens / streaming_s, 1)
            if output_tokens and streaming_s > 0
            else None,
            **self.window.metrics,
            **self.window.privacy.meta(),  # how many items went out replaced, by label
            **(
                {"tools_omitted": self._tools_notice["source"]}
                if self._tools_notice is not None
                else {}
            ),
        }

    def _count_tools(self, route: Route, tools: list[Tool]) -> None:
        """The tools block counts in the request's estimate when the route sends it."""
        sent = tools if route.capabilities().tools else []
        self.window.tools_tokens = calibrations.tools_estimate(sent)

    def _meta(self, route: Route, result: StepResult, step: int) -> dict[str, Any]:
        meta = {
            "model": route.model,
            "endpoint_id": route.endpoint_id,
            "step": step,
            "turn_id": self.turn.id,
            "finish_reason": result.finish_reason,
            "metrics": self._metrics(route, result),
            "usage": usage_dict(result.usage),
            # Numi's raw estimate of this request: with the usage above it calibrates the
            # next estimate for this model (agent/calibration.py).
            "prompt_estimate": self.window.sent_estimate,
        }
        if self.window.overflow:
            meta["overflow"] = self.window.overflow
        if self.fallback is not None:
            meta["fallback"] = self.fallback.to_dict(answered=result.error is None)
        calibrations.learn(route.endpoint_id, route.model, meta)
        return meta

    def _save_step(self, route: Route, result: StepResult, step: int):
        tool_calls = [
            {
                "id": c.id,
                "provider_id": c.provider_id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json or "{}"},
            }
            for c in result.tool_calls
        ]
        message = self.saves.save(
            role="assistant",
            content=result.content,
            reasoning_content=result.reasoning or None,
            reasoning_details=result.reasoning_details,
            tool_calls=tool_calls or None,
            meta=self._meta(route, result, step),
            # The final answer carries the sources the turn's passages and tools gave it.
            citation_sources=list(self.tools.sources)
            if self.tools.sources and not tool_calls
            else None,
        )
        self.turn.emit(
            "message_saved",
            {
                "message_id": message.id,
                "role": "assistant",
                "tool_calls": [c["id"] for c in tool_calls],
            },
        )
        self.turn.emit("metrics", {"message_id": message.id, **self._metrics(route, result)})
        return message

    def _save_partial(
        self,
        route: Route,
        result: StepResult,
        step: int,
        error: dict[str, Any],
        *,
        keep_empty: bool = True,
    ) -> None:
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
        if result.output_started:  # the provider read the prompt and billed what it sent
            meta["usage"] = cut_short_usage(meta["usage"], self.window.prompt_tokens(route), result)
        message = self.saves.save(
            role="assistant",
            content=result.content,
            reasoning_content=result.reasoning or None,
            meta=meta,
        )
        self.turn.emit(
            "message_saved", {"message_id": message.id, "role": "assistant", "tool_calls": []}
        )

    # --- title --------------------------------------------------------------------------------

    def _schedule_title(self, meta: ChatMeta, route: Route) -> None:
        if meta.title != "New chat":
            return
        self.turn.after_end = lambda: generate_title(
            self.app,
            self.turn.channel,
            self.turn.id,
            self.request.user_id,
            self.request.chat_id,
            self.window.privacy.adapter(adapter_for_route(self.app, route), route.redaction),
            self.app.config["NUMI_TITLE_MODEL"] or route.model,
            # A chat empty before this turn: its first question is this one.
            first_question=self.request.message if self.boundary is None else None,
        )
