"""Turn events -> HTML fragments for the default WebSocket view (one instance per client).

Every fragment is a top-level element with `hx-swap-oob`, swapped by id (DOM ids follow
the data: `turn-{turn_id}`, `msg-{id}`, `tool-{call_id}`). Streaming text is rendered as
markdown blocks (numi.render.StreamRender): each frame appends the blocks completed since
the last one and replaces the open block, so the work per frame follows the open block,
not the answer, and text already shown never moves; the final server-rendered message
replaces the live part when the step is saved. Untrusted text reaches HTML only through
templates (autoescaped) and numi.render (sanitised).
"""

from __future__ import annotations

from typing import Any

from flask import render_template
from markupsafe import Markup, escape
from sqlalchemy import select

from ... import endpoints as endpoint_store
from ...render import refusal
from ...extensions import db
from ...models import Message
from ...chat.attachments import transcript_attachments
from ...chat.versions import continued_steps, is_failed_answer, version_info
from ...render import StreamRender
from ...turns.channel import Event
from ...turns.events import EVENT_TYPES
from .research_view import ResearchFragments
from .tool_cards import finished_status, finished_step, saved_cards, snapshot_cards, step_results


def blocks_html(blocks) -> Markup:
    """Rendered markdown blocks as every view shows them (the `md_blocks_html` filter of
    partials/_md_blocks.html): sanitised HTML, code blocks in our own chrome (language
    label, Copy button; static/js/app.js). Python, not a template: a streaming frame
    formats its blocks on every delta of every tab."""
    out = []
    for block in blocks:
        if block.kind == "code":
            lang = escape(block.lang or "code")
            label = escape(block.lang + " ") if block.lang else ""
            out.append(
                f'<div class="code-block"{_artifact_attributes(block)}><div class="code-head">'
                f'<span class="code-lang">{lang}</span>{_artifact_control(block, label)}'
                f'<button type="button" class="copy-code" aria-label="Copy {label}code">Copy</button></div>'
                f"{block.html}</div>"
            )
        else:
            out.append(str(block.html))
    return Markup("".join(out))


def _artifact_attributes(block) -> str:
    # Every previewable block carries its kind, refused or not, so the page counts a
    # message's artifacts as the artifacts API lists them (numi.render.artifacts).
    return f' data-artifact="{escape(block.artifact)}"' if block.artifact else ""


def _artifact_control(block, label: Markup) -> str:
    """The Preview button of a closed artifact block (static/js/artifacts.js), or why
    there is none."""
    if not block.artifact:
        return ""
    if block.refused:
        message = escape(refusal(block.refused)["message"])
        return (
            f'<span class="artifact-refused" data-code="{escape(block.refused)}">{message}</span>'
        )
    return (
        f'<button type="button" class="preview-artifact" aria-label="Preview {label}artifact">'
        "Preview</button>"
    )


def frame_html(turn_id: str, part: str, frame) -> str:
    """One streaming frame of an answer (part "") or its reasoning (part "r"): completed
    blocks appended once (or, after `reset`, all of them replaced), the open block replaced.
    Only our own ids: rendered markdown never carries one (the sanitiser drops them).
    Formatted here rather than by Jinja, since it is the per-delta fragment."""
    prefix = f"turn-{escape(turn_id)}-{part}"
    out = ""
    if frame.reset:
        out = f'<div id="{prefix}done" class="md-done" hx-swap-oob="true">{blocks_html(frame.completed)}</div>'
    elif frame.completed:
        out = f'<div hx-swap-oob="beforeend:#{prefix}done">{blocks_html(frame.completed)}</div>'
    if frame.open is None:
        return out
    return (
        out
        + f'<div id="{prefix}open" class="md-open" hx-swap-oob="true">{blocks_html(frame.open)}</div>'
    )


def _newlines(text: str) -> str:
    # One kind of line break: StreamRender counts lines as the markdown parser does.
    return text.replace("\r\n", "\n").replace("\r", "\n")


# The handler of each event type (`_on_<type>`, looked up on the view's class, so a subclass
# may draw a type differently). Types the HTML view draws nothing for, and why: `done` (the
# answer's `message_saved` already drew it), `lanes` (only a compare view, `ChatView`, draws it).
HANDLERS = {type_: "_on_" + type_ for type_ in EVENT_TYPES}
NOT_DRAWN = frozenset({"done", "lanes"})


class HtmlView(ResearchFragments):
    """Renders one client's events. Keeps just enough state to redraw the live part."""

    def __init__(self, chat, *, last_message_id: int = 0, client_turn_id: str | None = None):
        self.chat = chat
        self.last_message_id = last_message_id
        self.turn_id: str | None = client_turn_id
        self.has_container = client_turn_id is not None
        self.has_container_on_client = self.has_container
        self.step = 0
        self.content = ""
        self.reasoning = ""
        self.preparing: dict[str, dict[str, Any]] = {}
        self.renders: dict[str, StreamRender] = {}  # "content" / "reasoning" -> its render state
        self.running = False
        self.request_id: str | None = None
        self.models: dict[int, str] = {}  # message id -> model, for its metrics line
        self.saved_error: str | None = None  # error code on the message just inserted
        # This client sent a message whose turn has not accepted it yet: an error now is a
        # refused send, shown beside the composer (which still holds the text), not a turn error.
        self.pending_send = False
        self.unaccepted_turn: str | None = None  # started here, its question not saved yet
        self.continues = False  # the live step continues an answer that called tools

    # --- entry point ------------------------------------------------------------------------

    def render(self, event: dict[str, Any]) -> list[str]:
        if event["type"] == "message_saved":
            views = event.views() if isinstance(event, Event) else None
            return self._on_message_saved(event.get("turn_id"), event["data"], views)
        name = HANDLERS.get(event["type"])
        handler = getattr(self, name, None) if name else None
        if handler is None:
            return []
        return handler(event.get("turn_id"), event["data"]) or []

    def cursor(self, event_id: int) -> str:
        # The id of the last event the page got (sent with every batch: no template).
        return f'<div id="event-cursor" hidden data-event-id="{int(event_id)}" hx-swap-oob="true"></div>'

    # --- events -----------------------------------------------------------------------------

    def _on_turn_start(self, turn_id, data):
        self._reset(turn_id)
        self.unaccepted_turn = turn_id
        self.running = True
        return [self._container(turn_id), self._controls()]

    def _on_accepted(self, turn_id, data):
        self.request_id = data.get("request_id")
        self.unaccepted_turn = None
        self.pending_send = False
        # Tells the composer its send was saved: it clears its text, chips and draft.
        return [
            render_template(
                "partials/_composer_feedback.html", accepted=data.get("request_id") or ""
            )
        ]

    def _on_message_saved(self, turn_id, data, views: dict | None = None):
        out = []
        if data.get("role") == "assistant" and data.get("tool_calls"):
            self.continues = True  # the next step goes on with this answer
        if data.get("role") == "assistant":
            self.content, self.reasoning, self.preparing, self.renders = "", "", {}, {}
            out.append(self._live(turn_id))
        # The saved message is read and rendered once per event, not once per open tab:
        # every HTML subscriber of this process gets the same fragment for the same swap.
        key = ("message_saved", self.running)
        saved = views.get(key) if views is not None else None
        if saved is None:
            message = self._load(data["message_id"])
            saved = self._saved_message(turn_id, message) if message is not None else (None, "")
            if views is not None:
                views[key] = saved
        facts, html = saved
        if facts is not None:
            self._note_message(facts)
            out.append(html)
        return out

    def _saved_message(self, turn_id, message) -> tuple[dict, str]:
        """What a saved message tells the view (plain values) and its fragment, placed
        before the live part (or last in the turn when no turn runs)."""
        error = message.meta.get("error") if message.role == "assistant" else None
        facts = {
            "id": message.id,
            "role": message.role,
            "model": message.meta.get("model"),
            "error": error.get("code") if isinstance(error, dict) else None,
        }
        return facts, self._insert_message(turn_id, message)

    def _note_message(self, facts: dict) -> None:
        self.last_message_id = max(self.last_message_id, facts["id"])
        if facts["role"] == "assistant":
            self.models[facts["id"]] = facts["model"]
            self.saved_error = facts["error"]

    def _on_content(self, turn_id, data):
        return self._delta(turn_id, data, "content")

    def _on_reasoning(self, turn_id, data):
        return self._delta(turn_id, data, "reasoning")

    def _delta(self, turn_id, data, kind):
        if data.get("step", self.step) != self.step:
            self.step, self.content, self.reasoning, self.renders = data["step"], "", "", {}
        # The live part is drawn whole when its layout changes: the first reasoning or answer
        # text of a step (the answer starting folds the reasoning away).
        redraw = not (self.content if kind == "content" else self.reasoning)
        delta = _newlines(data["delta"])
        if kind == "content":
            self.content += delta
        else:
            self.reasoning += delta
        if redraw:
            return [self._live(turn_id)]
        frame = self._render(kind).feed(self.content if kind == "content" else self.reasoning)
        html = frame_html(turn_id, "" if kind == "content" else "r", frame)
        return [html] if html else []

    def _render(self, kind: str) -> StreamRender:
        if kind not in self.renders:
            self.renders[kind] = StreamRender()
        return self.renders[kind]

    def _on_tool_preparing(self, turn_id, data):
        self.preparing[data["call_id"]] = {
            "call_id": data["call_id"],
            "name": data["name"],
            "status": "preparing",
        }
        return [self._live(turn_id)]

    def _on_tool_approval(self, turn_id, data):
        card = {
            "call_id": data["call_id"],
            "name": data["name"],
            "status": "approval",
            "arguments": data.get("arguments"),
            "digest": data.get("digest"),
        }
        return [render_template("partials/_tool_card.html", card=card, oob=True)]

    def _on_tool_start(self, turn_id, data):
        card = {
            "call_id": data["call_id"],
            "name": data["name"],
            "status": "running",
            "arguments": data.get("arguments"),
        }
        return [render_template("partials/_tool_card.html", card=card, oob=True)]

    def _on_tool_end(self, turn_id, data):
        # The finished card keeps its arguments, as the saved one shows them after a reload.
        card = {
            "call_id": data["call_id"],
            "name": data["name"],
            "status": finished_status(data.get("ok"), data.get("error_code")),
            "arguments": data.get("arguments"),
            "result": data.get("result"),
            "duration_ms": data.get("duration_ms"),
            "display": data.get("display"),
        }
        return [render_template("partials/_tool_card.html", card=card, oob=True)]

    def _on_tool_output(self, turn_id, data):
        # What a running call prints (run_python), appended to its card's live output.
        return [render_template("partials/_tool_output.html", **data)]

    def _on_metrics(self, turn_id, data):
        return [
            render_template(
                "partials/_metrics.html",
                message_id=data["message_id"],
                metrics=data,
                model=self.models.get(data["message_id"]),
                oob=True,
            )
        ]

    def _on_model_route(self, turn_id, data):
        return [
            render_template(
                "partials/_turn_notice.html",
                turn_id=turn_id,
                text=data.get("notice") or f"Using {data.get('model')} ({data.get('reason')}).",
            )
        ]

    def _on_context_compacting(self, turn_id, data):
        return [
            render_template(
                "partials/_turn_notice.html",
                turn_id=turn_id,
                text="Summarising earlier messages to fit the context…",
            )
        ]

    def _on_context_compacted(self, turn_id, data):
        text = (
            "Earlier messages were summarised."
            if data.get("ok", True)
            else "Summarising failed; older messages are left out of this request instead."
        )
        return [render_template("partials/_turn_notice.html", turn_id=turn_id, text=text)]

    def _on_context_retry(self, turn_id, data):
        return [
            render_template(
                "partials/_turn_notice.html",
                turn_id=turn_id,
                text="The model's context was full; retrying with a shorter history.",
            )
        ]

    def _on_save_retry(self, turn_id, data):
        # "Saving… the database is unavailable", then "Saved." (agent/durable.py).
        return [
            render_template(
                "partials/_turn_notice.html", turn_id=turn_id, text=data.get("message") or ""
            )
        ]

    def _on_tools_omitted(self, turn_id, data):
        return [
            render_template(
                "partials/_turn_notice.html",
                turn_id=turn_id,
                text=data.get("message") or "Tools were left out of this request.",
            )
        ]

    def _on_context_trimmed(self, turn_id, data):
        return [
            render_template(
                "partials/_turn_notice.html",
                turn_id=turn_id,
                text="Older messages were left out of this request to fit the context.",
            )
        ]

    def _on_error(self, turn_id, data):
        if self.saved_error == data.get("code"):
            self.saved_error = None
            return []  # the saved message shows this error already
        refused = turn_id is None or turn_id == self.unaccepted_turn
        if refused and self.pending_send:
            self.pending_send = False
            return [
                render_template(
                    "partials/_composer_feedback.html",
                    code=data.get("code"),
                    message=data.get("message"),
                )
            ]
        if turn_id is None:
            return [
                render_template(
                    "partials/_toast.html",
                    code=data.get("code"),
                    message=data.get("message"),
                    oob=True,
                )
            ]
        return [
            render_template(
                "partials/_turn_error.html",
                turn_id=turn_id,
                chat=self.chat,
                code=data.get("code"),
                message=data.get("message"),
                retry=turn_id != self.unaccepted_turn,
                retry_after=self._transcript_end(),
            )
        ]

    def _on_turn_end(self, turn_id, data):
        self.running = False
        self.content, self.reasoning, self.preparing, self.renders = "", "", {}, {}
        return [
            render_template("partials/_turn_live.html", turn_id=turn_id, delete=True),
            self._controls(),
            # The turn changed the context: the composer's gauge loads its estimate again.
            render_template("partials/_context_refresh.html", chat=self.chat),
        ]

    def _on_queue(self, turn_id, data):
        return [
            render_template(
                "partials/_queue.html",
                chat=self.chat,
                queue=data.get("items") or [],
                paused=data.get("paused"),
                oob=True,
            )
        ]

    def _on_title_update(self, turn_id, data):
        self.chat.title = data["title"]
        title = render_template("partials/_chat_title.html", chat=self.chat, oob=True)
        if self.chat.temporary:
            return [title]  # no sidebar item to update: a temporary chat is not listed
        if self.chat.project_id is not None:
            return [title]  # a project's chat is not in the sidebar's list: nothing to swap
        return [
            render_template(
                "partials/_chat_item.html", chat=self.chat, current_id=self.chat.id, oob=True
            ),
            title,
        ]

    def _on_snapshot(self, turn_id, data):
        if not data:
            return []
        out = []
        kept = self.has_container_on_client = turn_id == self.turn_id and self.has_container
        if not kept:
            self._reset(turn_id)
            if not data.get("finished"):
                out.append(self._container(turn_id))
                self.has_container_on_client = True
        missing = [i for i in data.get("saved_message_ids", []) if i > self.last_message_id]
        # A finished turn the page never saw has no container there: its messages go last.
        target = None if not data.get("finished") or self.has_container_on_client else "#transcript"
        # Known before the saved messages are placed: in a running turn they go above its
        # live part (a page that came in after the question was saved gets it here).
        self.running = not data.get("finished")
        for message in self._load_many(missing):
            out.append(self._insert_message(turn_id, message, target=target))
        self.step = data.get("step", 0)
        self.content, self.reasoning = (
            _newlines(data.get("content", "")),
            _newlines(data.get("reasoning", "")),
        )
        self.renders = {}
        self.preparing = {
            t["call_id"]: t for t in data.get("tools", []) if t.get("status") == "preparing"
        }
        out += [
            render_template("partials/_tool_card.html", card=card, oob=True)
            for card in snapshot_cards(data)
        ]
        out += self._research_snapshot(turn_id, data, kept)
        if self.running:
            out.append(self._live(turn_id))
        out.append(self._controls())
        return out

    # --- pieces -----------------------------------------------------------------------------

    def _reset(self, turn_id):
        self.turn_id = turn_id
        self.has_container = True
        self.continues = False
        self.step, self.content, self.reasoning, self.preparing, self.renders = 0, "", "", {}, {}

    def _container(self, turn_id):
        return render_template("partials/_turn.html", turn_id=turn_id)

    def _controls(self):
        return render_template(
            "partials/_composer_controls.html", chat=self.chat, running=self.running, oob=True
        )

    def _live(self, turn_id):
        """The whole live part, from fresh render states (O(answer): on layout changes only)."""
        self.renders = {}
        for kind in ("content", "reasoning"):
            text = getattr(self, kind)
            if text:
                self._render(kind).feed(text)
        return render_template(
            "partials/_turn_live.html",
            turn_id=turn_id,
            content=self.renders.get("content"),
            reasoning=self.renders.get("reasoning"),
            streaming_reasoning=bool(self.reasoning) and not self.content,
            tools=list(self.preparing.values()),
            continued=self.continues or self.step > 1,
        )

    def _insert_message(self, turn_id, message, target=None):
        """A saved message, placed before the live part (or last in the turn, or `target`)."""
        self.last_message_id = max(self.last_message_id, message.id)
        if message.role == "assistant":
            self.models[message.id] = message.meta.get("model")
            error = message.meta.get("error")
            self.saved_error = error.get("code") if isinstance(error, dict) else None
        if message.role == "tool" and target is None:
            # Its result is already on its card (tool_end); the step's last result redraws
            # the step's calls as the page draws them, runs of finished calls folded.
            return self._finished_step(message)
        if target is not None:
            swap = f"beforeend:{target}"
        elif message.role == "user":
            # A turn's question heads it, whatever of the turn the page drew before the
            # question reached it (an answer, an error, a compare turn's lanes).
            swap = f"afterbegin:#turn-{turn_id}"
        elif self.running:
            swap = f"beforebegin:#turn-{turn_id}-live"
        else:
            swap = f"beforeend:#turn-{turn_id}"
        extra = {
            "versions": version_info(message.chat_id, [message]),  # its ‹ n/m ›, if any
            "continued_ids": continued_steps(message.chat_id, [message]),
            "attachments": transcript_attachments(message.chat_id, [message]),
        }
        if message.role == "assistant" and message.tool_calls:
            # Its cards as the page draws them: a step saved earlier in the turn (a client
            # that came late, from a snapshot) has its results already.
            extra["tool_results"] = step_results(self.chat.id, message)
        if message.role == "assistant" and not message.tool_calls:
            # As the page renders it: "Regenerate" offers the other models too.
            extra.update(chat=self.chat, endpoints=endpoint_store.list_endpoints(self.chat.user_id))
        replaced = self._replaced_failures(message, extra["versions"].get(message.id))
        db.session.commit()  # end the read transaction: this connection may live for hours
        # Just saved, it ends the transcript: a failed answer offers Retry.
        html = render_template(
            "partials/_message_oob.html",
            message=message,
            swap=swap,
            retry_after=message.id,
            **extra,
        )
        return html + replaced

    def _finished_step(self, result: Message) -> str:
        """The calls of the step whose last result `result` is, drawn from their saved
        results as after a reload (partials/_tool_steps.html), or "" before that result."""
        found = finished_step(self.chat.id, result)
        db.session.commit()  # end the read transaction: this connection may live for hours
        if found is None:
            return ""
        cards = saved_cards(*found)
        return render_template(
            "partials/_tool_steps.html", cards=cards, step_id=found[0].id, steps_oob=True
        )

    @staticmethod
    def _replaced_failures(message, version) -> str:
        """A retry's answer takes its failed answer's place on a page that still shows the
        failure (another tab: the one that asked has swapped its transcript): the failed
        versions are named for static/js/app.js to remove. Only failures: a regenerated
        answer's old version may have tool steps below it, which this cannot tell."""
        if version is None or message.role != "assistant":
            return ""
        failed = [i for i in version.ids if i != message.id and is_failed_answer(i)]
        if not failed:
            return ""
        ids = " ".join(str(i) for i in failed)
        return (
            '<div hx-swap-oob="beforeend:#transcript">'
            f'<span class="replaced-versions" hidden data-ids="{ids}"></span></div>'
        )

    def _transcript_end(self) -> int | None:
        """The id of the transcript's last message, which a Retry drawn now names (a retry
        may have set aside a failed answer this view still counts as its newest)."""
        end = db.session.execute(
            select(Message.id)
            .where(Message.chat_id == self.chat.id, Message.shown())
            .order_by(Message.id.desc())
            .limit(1)
        ).scalar_one_or_none()
        db.session.commit()  # end the read transaction: this connection may live for hours
        return end

    def _load(self, message_id: int) -> Message | None:
        found = self._load_many([message_id])
        return found[0] if found else None

    def _drawable(self) -> Any:
        """Which of the chat's rows this view draws: the transcript's (the shown versions)."""
        return Message.shown()

    def _load_many(self, ids: list[int]) -> list[Message]:
        if not ids:
            return []
        rows = (
            db.session.execute(
                select(Message)
                .where(Message.id.in_(ids), Message.chat_id == self.chat.id, self._drawable())
                .order_by(Message.id)
            )
            .scalars()
            .all()
        )
        db.session.commit()  # end the read transaction: this connection may live for hours
        return list(rows)
