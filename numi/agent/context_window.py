"""The context window of one turn (issue 5): what each model request carries.

The request is the chat's loaded history with its attachments rebuilt as content parts,
compacted first when it nears the model's window (auto-compaction), else trimmed of its
oldest whole turns for this request only, and on a `context_overflow` before any output,
compacted or trimmed once more. Estimates count the tools block and are calibrated per
model from what its server reported (`agent.calibration`); an overflow that states the
server's numbers sizes the retry from them. Each of these is reported on the turn
(`context_compacting`/`context_compacted`, `context_trimmed`) and its counts go into the
answer's metrics (`ContextWindow.metrics`). Compaction, trimming and overflow recovery
each happen at most once per turn.

Where the window is known (the server reported it, the user set it, or an overflow
stated it), nothing is sent that Numi's own estimate says will not fit it (issue 44: a
256-token llama-server got 330-token requests, twice a turn): after trimming to the
newest turn, the omission notice goes too, and a question that still does not fit is
refused with `context_budget` before anything is sent. A compaction's summary requests
stay within the same limit (`compaction.Budget`: in pieces when the older part is long).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..chat.attachments import (
    attachments_by_id,
    image_bytes,
    is_image,
    message_attachment_ids,
    model_parts,
    owned_rows,
    tool_image_ids,
)
from ..chat.compaction import Budget, compact
from ..chat.context import (
    OMITTED_NOTICE,
    ChatContextService,
    ChatMeta,
    _group_turns,
    estimate_tokens,
)
from ..chat.token_estimate import text_tokens
from ..errors import NumiError
from ..providers.capabilities import Capabilities
from ..turns.turn import Turn, TurnRequest
from . import calibration as calibrations
from .calibration import Calibration
from ..chat.redactions import ChatGateway
from .routes import Route, adapter_for_route
from .system_context import SystemPart, system_parts, system_text
from .tools.clock import user_now

log = logging.getLogger(__name__)


def request_parts(request: TurnRequest, settings: dict[str, Any]) -> list[SystemPart]:
    """The system context of the turn's requests, part by part."""
    now = user_now(request.timezone, request.tz_offset_minutes)
    return system_parts(
        user_id=request.user_id, chat_id=request.chat_id, settings=settings, now=now
    )


def known_window(config, caps: Capabilities, cal: Calibration) -> tuple[int, bool]:
    """A model's context window in its tokens, and whether it is known (reported by the
    server, set by the user, or stated in an overflow) rather than assumed."""
    window = caps.context_window or config["NUMI_DEFAULT_CONTEXT_WINDOW"]
    known = bool(caps.context_window) and caps.sources.get("context_window") in (
        "reported",
        "override",
    )
    if cal.window:  # the server said how much it takes: believe it over a listing
        window, known = min(window, cal.window), True
    return window, known


def summary_budget(config, caps: Capabilities, cal: Calibration) -> Budget | None:
    """How large a summary request may be with a model: the share of its window a
    request may fill (NUMI_AUTO_COMPACT_FRACTION), less a quarter of the window for the
    summary itself; None when the window is only assumed."""
    window, known = known_window(config, caps, cal)
    if not known:
        return None
    limit = int(window * config["NUMI_AUTO_COMPACT_FRACTION"])
    return Budget(limit - window // 4, lambda text: cal.apply(text_tokens(text)))


class ContextWindow:
    """One turn's view of the model's window: builds each request's messages.

    `before_model_call` runs before a compaction calls the model (the agent leaves the
    start gate there: no other start waits for a summary)."""

    def __init__(
        self,
        app,
        turn: Turn,
        context: ChatContextService,
        *,
        before_model_call: Callable[[], None] = lambda: None,
    ):
        self.app = app
        self.turn = turn
        self.request = turn.request
        self.context = context
        self.before_model_call = before_model_call
        self.metrics: dict[str, Any] = {}  # what the answer's metrics carry of the window's work
        self.compacted = False
        self._overflow_retried = False
        self._trims_reported: set[str] = set()
        self._parts_cache: dict[tuple[int, bool], list[dict]] = {}
        self._tool_images: dict[int, dict | None] = {}  # attachment id -> its image part
        self.tools_tokens = 0  # the raw estimate of the tools block (the agent sets it)
        self.tools_left_out = False  # this step's request fits its window only without them
        self.sent_estimate = 0  # the raw estimate of the last request built
        self.overflow: dict[str, int] | None = None  # the server's numbers of an overflow
        self._calibrations: dict[tuple[int, str], Calibration] = {}
        self._system: tuple[dict[str, Any], str] | None = None  # (settings, prompt) of this step
        self.passages: tuple[dict[str, Any], ...] = ()  # the documents part's, of that prompt
        # The chat's privacy gateway: every request of the turn leaves through it (the turn's
        # steps, a compaction's summary, the title), less what the send let through once.
        self.privacy = ChatGateway(self.request.chat_id, self.request.options.get("exempt", ()))

    def check_attachments(self, route: Route) -> None:
        """Refuse, before the question is saved, attachments that vanished or images for a
        model that cannot see them."""
        if not self.request.attachments:
            return
        rows = owned_rows(
            self.request.user_id, list(self.request.attachments), self.app.config["NUMI_DATA_DIR"]
        )
        if any(is_image(row) for row in rows) and not route.capabilities().vision:
            raise NumiError(
                "model_cannot_see",
                f"{route.model} cannot see images. Choose a model with vision, or remove the image.",
                400,
            )

    def messages(
        self, meta: ChatMeta, route: Route, *, limit: int | None = None, allow_compact: bool = True
    ) -> list[dict]:
        """The messages of the next request: the loaded history, compacted first when it
        nears the model's window (auto-compaction), else trimmed, with attachments rebuilt."""
        self._system = None  # read afresh for each request (a memory may have been added)
        self.tools_left_out = False
        system = self.system(meta.settings)
        limit = limit or self.limit(route)
        history = self.context.history()
        # Estimated once and reused below: a long chat's history is hundreds of messages,
        # and the report, the budget check and the sent estimate each measured it all.
        history_tokens = estimate_tokens(history.messages, system)
        self._report_history_limit(history, system, history_tokens)
        cal = self.calibration(route)
        estimate = cal.apply(history_tokens + self.tools_tokens)
        if (
            estimate > limit
            and allow_compact
            and not self.compacted
            and self._auto_compact_enabled(meta)
        ):
            if self.compact(route, "auto"):
                history = self.context.history()
                history_tokens = estimate_tokens(history.messages, system)
                estimate = cal.apply(history_tokens + self.tools_tokens)
        messages = history.messages
        if estimate > limit:
            messages = self._trim(messages, limit, system, cal)
        fitted = history_tokens if messages is history.messages else None
        messages = self._fit_window(messages, route, system, cal, fitted)
        sent = history_tokens if messages is history.messages else estimate_tokens(messages, system)
        self.sent_estimate = sent + self.tools_tokens
        return self._expand_attachments(messages, route.capabilities().vision)

    def system(self, settings: dict[str, Any]) -> str:
        """The system prompt of the request `messages` built last: its estimate counted it,
        and the model call sends the same text without reading it again."""
        if self._system is None or self._system[0] is not settings:
            parts = request_parts(self.request, settings)
            self._system = (settings, system_text(parts))
            # The passages it carries, numbered as the model reads them: the answer cites them.
            self.passages = next((p.items for p in parts if p.kind == "documents"), ())
        return self._system[1]

    def calibration(self, route: Route) -> Calibration:
        """The route's model calibration (looked up once per turn, or learned from its
        overflow in this turn)."""
        key = (route.endpoint_id, route.model)
        if key not in self._calibrations:
            self._calibrations[key] = calibrations.calibration(
                self.request.chat_id, route.endpoint_id, route.model
            )
        return self._calibrations[key]

    def prompt_tokens(self, route: Route) -> int:
        """The last request's estimate in the route's model's tokens (calibrated)."""
        return self.calibration(route).apply(self.sent_estimate)

    def _estimate(self, messages: list[dict], system: str, cal: Calibration) -> int:
        """The estimated prompt tokens of a request with `messages`, in the model's tokens."""
        return cal.apply(estimate_tokens(messages, system) + self.tools_tokens)

    def learn_overflow(self, route: Route, overflow: tuple[int | None, int | None] | None) -> bool:
        """Take a context overflow's numbers (the prompt's tokens, the server's window) as
        this model's calibration, for this turn's retry and for every later estimate.
        True when they were believed: a count far from Numi's own estimate (a canned
        message) is kept in the answer's meta but calibrates nothing."""
        if not overflow:
            return False
        prompt, window = overflow
        fields = {"prompt_tokens": prompt, "context_window": window, "estimate": self.sent_estimate}
        self.overflow = {k: v for k, v in fields.items() if v}
        found = calibrations.from_meta({"overflow": self.overflow})
        if found is None or found.source != "overflow":
            return False
        calibrations.learn(route.endpoint_id, route.model, {"overflow": self.overflow})
        self._calibrations[(route.endpoint_id, route.model)] = found
        return True

    def after_overflow(
        self,
        meta: ChatMeta,
        route: Route,
        overflow: tuple[int | None, int | None] | None = None,
    ) -> tuple[list[dict], bool] | None:
        """After a context_overflow before any output: the messages to call again with
        (compacted, or trimmed harder) and whether it compacted; None when this turn
        recovered once already, so a model that keeps refusing cannot make a loop.
        With the server's own numbers (`overflow`: its count of the refused prompt and
        its window) the retry is sized from them; without, it halves what was sent."""
        if self._overflow_retried:
            return None
        self._overflow_retried = True
        if self.learn_overflow(route, overflow):
            compacted = (
                not self.compacted
                and self._auto_compact_enabled(meta)
                and self.compact(route, "overflow")
            )
            # The calibrated estimate now counts as the server does, and the limit is a
            # share of the server's real window: trim to that.
            return self.messages(meta, route, allow_compact=False), compacted
        compacted = (
            not self.compacted
            and self._auto_compact_enabled(meta)
            and self.compact(route, "overflow")
        )
        history = self.context.history()
        estimate = self._estimate(
            history.messages, self.system(meta.settings), self.calibration(route)
        )
        # Our estimate was too low for this model: after compaction aim for the normal
        # limit; without it, halve what was sent.
        limit = min(self.limit(route), max(1, estimate // 2)) if not compacted else None
        return self.messages(meta, route, limit=limit, allow_compact=False), compacted

    def window(self, route: Route) -> tuple[int, bool]:
        """The model's context window in its tokens, and whether it is known."""
        return known_window(self.app.config, route.capabilities(), self.calibration(route))

    def limit(self, route: Route) -> int:
        """The estimated tokens a request may carry before it is compacted or trimmed."""
        window, _known = self.window(route)
        return max(1, int(window * self.app.config["NUMI_AUTO_COMPACT_FRACTION"]))

    def _fit_window(
        self,
        messages: list[dict],
        route: Route,
        system: str,
        cal: Calibration,
        tokens: int | None = None,
    ) -> list[dict]:
        """The request's messages (`tokens`: their estimate_tokens, when the caller has it)
        if their estimate fits a known window: without the
        omission notice when that is what tips it over, then without the tools
        (`tools_left_out`, which the turn says); else the question is refused
        (`context_budget`) before anything is sent. An assumed window refuses nothing."""
        window, known = self.window(route)
        if not known:
            return messages
        raw = estimate_tokens(messages, system) if tokens is None else tokens
        if cal.apply(raw + self.tools_tokens) <= window:
            return messages
        bare = [m for m in messages if not m.get("_notice")]
        estimate = self._estimate(bare, system, cal)
        if estimate <= window:
            return bare
        if self.tools_tokens and cal.apply(estimate_tokens(bare, system)) <= window:
            self.tools_left_out, self.tools_tokens = True, 0
            return bare
        raise NumiError(
            "context_budget",
            f"This request needs about {estimate:,} tokens (the system prompt, the tools and "
            f"the newest question), more than the {window:,} of {route.model}'s context window."
            " Shorten the question or the system prompt, turn tools off for this chat, or "
            "choose a model with a larger window.",
            413,
        )

    def compact(self, route: Route, reason: str) -> bool:
        """Compact now with the turn's model; False when there is nothing older, the
        window cannot hold a summary request, or it failed (the caller then trims)."""
        self.compacted = True
        budget = self.summary_budget(route)
        if budget is not None and budget.too_small:
            # Every turn of a tiny window would say "compacting", then "failed": trim quietly.
            log.info("compaction (%s) skipped: the window cannot hold a summary request", reason)
            return False
        self.before_model_call()
        self.turn.emit("context_compacting", {"reason": reason})
        try:
            checkpoint = compact(
                self.context,
                self.privacy.adapter(adapter_for_route(self.app, route), route.redaction),
                self.app.config["NUMI_COMPACT_MODEL"] or route.model,
                self.app.config,
                on_cancel=self.turn.on_cancel,
                budget=budget,
            )
        except NumiError as exc:
            log.info("compaction (%s) skipped: %s", reason, exc.code)
            self.turn.emit("context_compacted", {"reason": reason, "ok": False, "code": exc.code})
            return False
        data = {
            "reason": reason,
            "ok": True,
            "checkpoint_id": checkpoint.id,
            "messages_before": checkpoint.messages_before,
            "messages_after": checkpoint.messages_after,
            "tokens_before": checkpoint.tokens_before,
            "tokens_after": checkpoint.tokens_after,
        }
        self.metrics["context_compacted"] = {
            k: data[k] for k in ("messages_before", "messages_after")
        }
        self.turn.emit("context_compacted", data)
        return True

    def tools_source(self, caps: Capabilities) -> str:
        """Why a step's tools were left out: its window, else the capabilities' source."""
        return "window" if self.tools_left_out else caps.sources["tools"]

    def summary_budget(self, route: Route) -> Budget | None:
        """How large the route's summary requests may be (`summary_budget`)."""
        return summary_budget(self.app.config, route.capabilities(), self.calibration(route))

    def _auto_compact_enabled(self, meta: ChatMeta) -> bool:
        value = meta.settings.get("auto_compact")
        return self.app.config["NUMI_AUTO_COMPACT"] if value is None else bool(value)

    def _trim(self, messages: list[dict], limit: int, system: str, cal: Calibration) -> list[dict]:
        """Drop the oldest whole turns from this request only (never the newest turn) until
        the estimate fits `limit`; report `context_trimmed` and keep the counts in metrics."""
        prefix = [m for m in messages if m.get("_checkpoint") or m.get("_notice")]
        groups = _group_turns(
            [m for m in messages if not (m.get("_checkpoint") or m.get("_notice"))]
        )
        notice = (
            []
            if any(m.get("_notice") for m in prefix)
            else [
                {"role": "user", "content": OMITTED_NOTICE, "_notice": True},
                {"role": "assistant", "content": "Understood.", "_notice": True},
            ]
        )
        dropped = 0
        while (
            len(groups) > 1
            and self._estimate(prefix + notice + [m for g in groups for m in g], system, cal)
            > limit
        ):
            dropped += len(groups.pop(0))
        if not dropped:
            return messages
        trimmed = prefix + notice + [m for g in groups for m in g]
        self._emit_trimmed(
            "context_window",
            _saved_count(messages),
            _saved_count(trimmed),
            self._estimate(messages, system, cal),
            self._estimate(trimmed, system, cal),
        )
        return trimmed

    def _report_history_limit(self, history, system: str, history_tokens: int) -> None:
        """Older turns that PROMPT_MAX_HISTORY_* left out of the request are a trim too."""
        if not history.omitted or "history_limit" in self._trims_reported:
            return
        saved = [m for m in history.messages if not (m.get("_checkpoint") or m.get("_notice"))]
        tokens_before = (
            estimate_tokens(saved, system) + history.omitted_chars // 4 + 4 * history.omitted
        )
        self._emit_trimmed(
            "history_limit",
            len(saved) + history.omitted,
            len(saved),
            tokens_before,
            history_tokens,  # estimate_tokens(history.messages, system)
        )

    def _emit_trimmed(
        self, reason: str, before: int, after: int, tokens_before: int, tokens_after: int
    ) -> None:
        """`context_trimmed`: saved messages in the request before and after (the omission
        notice is not one of them) and the estimated tokens; the metrics keep the same."""
        self._trims_reported.add(reason)
        data = {
            "before": before,
            "after": after,
            "dropped": before - after,
            "tokens_before": tokens_before,
            "tokens_after": tokens_after,
            "reason": reason,
        }
        self.metrics["context_trimmed"] = {
            k: data[k] for k in ("before", "after", "tokens_before", "tokens_after")
        }
        self.turn.emit("context_trimmed", data)

    def _expand_attachments(self, messages: list[dict], vision: bool) -> list[dict]:
        """Rebuild attached files as content parts for this request only (image bytes are
        read from disk now; nothing of this is stored)."""
        wanted = [
            i
            for m in messages
            for i in message_attachment_ids(m.get("_content_parts"))
            if (i, vision) not in self._parts_cache
        ]
        if wanted:
            rows = {
                i: a
                for i, a in attachments_by_id(wanted).items()
                if a.user_id == self.request.user_id
            }
            for i in wanted:
                self._parts_cache[(i, vision)] = (
                    model_parts(
                        self.app.config["NUMI_DATA_DIR"],
                        [rows[i]] if i in rows else [],
                        vision=vision,
                        max_side=self.app.config["NUMI_IMAGE_MAX_SIDE"],
                    )
                    if i in rows
                    else [{"type": "text", "text": "[an attached file is no longer available]"}]
                )
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
            elif vision and message.get("role") == "tool":
                message = self._with_tool_images(message)
            out.append(message)
        return out

    def _with_tool_images(self, message: dict) -> dict:
        """A tool result with the images its tool showed the user (run_python's plots),
        downscaled to NUMI_CODE_IMAGE_MAX_SIDE, for a model that can see: the text is what
        any other model gets, and an image that is gone is left out."""
        ids = tool_image_ids(message.get("_content_parts"))
        wanted = [i for i in ids if i not in self._tool_images]
        if wanted:
            data_dir = self.app.config["NUMI_DATA_DIR"]
            rows = attachments_by_id(wanted)
            for i in wanted:
                row = rows.get(i)
                part = None
                if row is not None and row.user_id == self.request.user_id and is_image(row):
                    try:
                        mime, data = image_bytes(
                            data_dir, row, self.app.config["NUMI_CODE_IMAGE_MAX_SIDE"]
                        )
                        part = {"type": "image", "mime": mime, "data": data}
                    except (OSError, ValueError):  # gone from disk, or not an image after all
                        part = None
                self._tool_images[i] = part
        images = [self._tool_images[i] for i in ids if self._tool_images.get(i)]
        if not images:
            return message
        text = message.get("content") or ""
        return {**message, "content": [{"type": "text", "text": text}, *images]}


def _saved_count(messages: list[dict]) -> int:
    """Messages of a request that are saved messages (not a summary or the omission notice)."""
    return sum(1 for m in messages if not (m.get("_checkpoint") or m.get("_notice")))
