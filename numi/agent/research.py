"""Research mode (issue 38): a question answered by a run that plans, searches, reads and
writes a report with numbered citations, on the turn engine.

`ResearchAgent` is the `Agent` with its loop replaced; the question is saved, routed and
budgeted as any question (a model without tool calling is refused before it is saved,
`research_needs_tools`). The run, step by step, each step saved as it finishes
(`research_store`):

1. plan: the model splits the question into sub-questions (not streamed as the answer);
2. for each sub-question, `web_search`; then its new results are read with `fetch_page`,
   at most `NUMI_RESEARCH_PARALLEL_READS` at once, each page's text capped
   (`NUMI_RESEARCH_PAGE_CHARS`) and kept with when it was read, or skipped with the reason
   (a refused address, not a text page, an error). A page a search found adds the first
   `NUMI_RESEARCH_FOLLOW_LINKS` links in its text this run has not seen to the pages to
   read (a `fetch_page` each, so under its address rules); those add no more;
   and in a chat with documents each sub-question searches them too (`research_documents`),
   each passage found kept as a source;
3. the report: the model writes it from the pages read, citing them as [n]; it streams as
   the answer and is saved with the pages as its citation sources.

The budget (`research_budget`) ends the gathering: most steps (one kept for the report),
most pages, most tokens, the time limit (counted across restarts). Then, or when Stop and
write was asked (`research_store.request_write`), the report is written from what was read.
Stop ends the run and keeps what was read, listed in a short answer. A server that stops
(SIGTERM) leaves the run unfinished: the next start resumes it from its last saved step
(`research_resume`), and no saved page is fetched again.

Every research event carries the whole progress view (`progress`), so the turn's snapshot
keeps only the newest (numi/turns/channel.py) and a reload draws it whole.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import gevent
import gevent.queue

from ..chat.context import ChatMeta
from ..errors import NumiError
from ..extensions import db
from ..models import ResearchRun
from ..providers import ChatRequest
from ..providers.events import StreamError, TextDelta, Usage
from . import research_documents as documents
from . import research_store as store
from .research_prompts import (
    CLARIFY,
    CLARIFY_PROMPT,
    CONVERSATION_CHARS,
    CONVERSATION_MESSAGES,
    NO_SOURCES,
    PLAN_PROMPT,
    REPORT_PROMPT,
    plan_lines,
    report_sources,
)
from .routes import Route, adapter_for_route
from .runtime import Agent, StepResult
from .tools import Tool, ToolContext, ToolFailure, ToolResult

log = logging.getLogger(__name__)

RESULTS_PER_SEARCH = 5

RESUMED = "Resumed after a restart: the saved steps are kept, no saved page is fetched again."
SHUTDOWN = {
    "code": "interrupted",
    "message": "The server restarted during this research run; it resumes when the server is back.",
}


def research_needs_tools(model: str) -> NumiError:
    return NumiError(
        "research_needs_tools",
        f"{model} cannot call tools, and research searches and reads the web with them. "
        "Choose a model with tool calling.",
        400,
    )


def research_cost_unpriced(model: str) -> NumiError:
    return NumiError(
        "research_cost_unpriced",
        f"{model} has no price, so a cost limit cannot be kept. Give it a price on the Usage "
        "page, or research without a cost limit.",
        400,
    )


class ResearchAgent(Agent):
    """A turn in research mode: the agent's start, save and route, then the research run."""

    def __init__(self, turn):
        super().__init__(turn)
        self.research_budget: dict[str, Any] = dict(turn.request.options["research"])
        config = self.app.config
        self.parallel = config["NUMI_RESEARCH_PARALLEL_READS"]
        self.page_chars = config["NUMI_RESEARCH_PAGE_CHARS"]
        self.follow = config["NUMI_RESEARCH_FOLLOW_LINKS"]
        self._seen: set[str] = set()  # every address read, skipped or queued in this run
        self._documents: list[int] = []  # the chat's documents, searched beside the web
        # The run's id: its row is read through the session each time (the agent releases
        # the session before each model call, which detaches the objects it held).
        self.run_id: int | None = None
        self.resumed = False
        self.phase = "planning"
        self._began = time.monotonic()
        self._elapsed_before = 0

    def _routes(self, meta: ChatMeta) -> list[Route]:
        routes = super()._routes(meta)
        if not routes[0].capabilities().tools:
            raise research_needs_tools(routes[0].model)
        if self.research_budget.get("max_cost") and not store.model_price(
            self.request.user_id, routes[0].model
        ):
            raise research_cost_unpriced(routes[0].model)
        return routes

    # --- the run ------------------------------------------------------------------------------

    def _loop(self, meta: ChatMeta, routes: list[Route]) -> None:
        req = self.request
        assert req.request_id is not None  # starting.begin_turn gives research one
        run, self.resumed = store.open_run(
            req.user_id, req.chat_id, req.request_id, self.research_budget
        )
        self.run_id = run.id
        self.research_budget = dict(run.budget)
        self._elapsed_before = run.elapsed_seconds
        self._started()
        route = routes[0]
        if self.resumed:
            store.log_step(run, "resumed", RESUMED)
            self._emit_step("resumed", RESUMED)
        if run.status == "running":
            if run.state.get("plan") is None:
                if not self._plan(route, meta):
                    return
            else:
                self._emit("research_plan", {"questions": run.state["plan"]})
            self._gather(meta)
            if self.turn.cancelled:
                self._end_cancelled()
                return
        self._write(route, meta)

    def _plan(self, route: Route, meta: ChatMeta) -> bool:
        may_ask = not self.resumed and not store.asked_last(self.request.chat_id, self.run_id)
        prompt = PLAN_PROMPT.format(
            clarify=CLARIFY_PROMPT if may_ask else "",
            conversation=self._conversation(),
            question=self.request.message,
        )
        text, error = self._ask(route, meta, prompt)
        run = self._research()  # read after the call, which released the session
        if self.turn.cancelled:
            self._end_cancelled()
            return False
        if error is not None:
            self._fail(error)
            return False
        if may_ask and text.strip().upper().startswith(CLARIFY):
            self._clarify(route, text.strip()[len(CLARIFY) :].strip())
            return False
        questions = plan_lines(text) or [self.request.message[:300]]
        self.turn.confirm_lease()
        store.log_step(
            run, "plan", f"Planned {len(questions)} sub-questions.", step=True, plan=questions
        )
        self._emit("research_plan", {"questions": questions})
        return True

    def _gather(self, meta: ChatMeta) -> None:
        """Search each sub-question not searched yet, then read its new results (and the
        links they cite). A resumed run first reads the links it had queued."""
        run = self._research()
        plan: list[str] = run.state["plan"]
        searches = run.state.get("searches", [])
        seen = self._seen = {row.url for row in store.sources(run)}
        req = self.request
        self._documents = documents.chat_documents(req.user_id, req.chat_id, meta.settings)
        queued = run.state.get("leads", [])
        leftover = [lead for lead in queued if lead["url"] not in seen]
        seen.update(lead["url"] for lead in queued)
        if leftover and not self._halt():
            self._read(leftover, meta)
        for index, question in enumerate(plan):
            if self._halt():
                return
            self.phase = "searching"
            if index < len(searches):
                results = searches[index]["results"]
            else:
                results, note = self._search(question, meta)
                self.turn.confirm_lease()
                store.save_search(run, question, results, note)
                self._emit_step("search", note)
            self._search_documents(index, question)
            fresh = [r for r in results if r["url"] not in seen]
            seen.update(r["url"] for r in fresh)
            self._read(fresh, meta)

    def _conversation(self) -> str:
        """The chat's last messages before the request (a clarification's answer among
        them), as the plan's prompt carries them."""
        lines = []
        for message in self.context.history().messages[:-1][-CONVERSATION_MESSAGES:]:
            content = message.get("content")
            if message.get("role") in ("user", "assistant") and isinstance(content, str):
                lines.append(f"{message['role']}: {content[:CONVERSATION_CHARS]}")
        return "Conversation so far:\n" + "\n".join(lines) + "\n\n" if lines else ""

    def _clarify(self, route: Route, question: str) -> None:
        """The run asks its one question instead of starting: the question is the answer,
        and the user's reply (sent in research mode) starts the run with it."""
        self.turn.confirm_lease()
        run = self._research()
        question = question[:1000] or "What exactly should the research find out?"
        text = "Asked a clarifying question before starting."
        store.log_step(run, "clarify", text)
        store.set_status(run, "asked", self._elapsed())
        self.phase = "asked"
        self._emit_step("clarify", text)
        message = self.saves.save(
            role="assistant",
            content=question,
            meta={"model": route.model, "turn_id": self.turn.id, "research": {"clarify": True}},
        )
        self.turn.emit(
            "message_saved", {"message_id": message.id, "role": "assistant", "tool_calls": []}
        )
        self.turn.emit("done", {"message_id": message.id})
        self.answered = True

    def _halt(self) -> bool:
        """Whether gathering ends now: Stop, Stop and write, or the budget."""
        if self.turn.cancelled:
            return True
        run = self._research()
        if store.write_requested(run.id):
            self._note_end("stop_write", "Stop and write: writing the report from the pages read.")
            return True
        reason = self._over_budget()
        if reason is not None:
            self._note_end("budget", f"Budget reached ({reason}): writing the report.")
            return True
        return False

    def _over_budget(self) -> str | None:
        run, budget = self._research(), self.research_budget
        if run.steps >= budget["max_steps"] - 1:  # one step is kept for the report
            return f"{budget['max_steps']} steps"
        if run.tokens >= budget["max_tokens"]:
            return f"{budget['max_tokens']} tokens"
        if budget.get("max_cost") and (run.state.get("cost") or 0) >= budget["max_cost"]:
            return f"cost {budget['max_cost']:g}"
        if self._elapsed() >= budget["time_limit_seconds"]:
            return f"{budget['time_limit_seconds']} s"
        if self._pages_read() >= budget["max_pages"]:
            return f"{budget['max_pages']} pages"
        return None

    def _note_end(self, kind: str, text: str) -> None:
        if self.phase != "ending":
            self.phase = "ending"
            store.log_step(self._research(), kind, text)
            self._emit_step(kind, text)

    # --- searching and reading ----------------------------------------------------------------

    def _search(self, query: str, meta: ChatMeta) -> tuple[list[dict[str, str]], str]:
        tool = self.registry.get("web_search")
        outcome = self._tool(tool, {"query": query, "count": RESULTS_PER_SEARCH}, meta)
        if isinstance(outcome, ToolResult):
            results = [
                {"title": str(s.get("title") or s["url"])[:300], "url": s["url"]}
                for s in outcome.sources
                if isinstance(s.get("url"), str)
            ]
            return results, f"Searched “{query}”: {len(results)} results."
        return [], f"Search “{query}” failed: {_short(outcome)}"

    def _read(self, results: list[dict[str, str]], meta: ChatMeta) -> None:
        """Read pages, at most `parallel` at once; each saved as it finishes."""
        self.phase = "reading"
        pending = list(results)
        running: set[str] = set()
        finished: gevent.queue.Queue = gevent.queue.Queue()
        tool = self.registry.get("fetch_page")
        while pending or running:
            while (
                pending
                and len(running) < self.parallel
                and self._pages_read() + len(running) < self.research_budget["max_pages"]
                and not self._halt()
            ):
                result = pending.pop(0)
                running.add(result["url"])
                gevent.spawn(self._fetch, tool, result, meta, finished)
            if not running:
                return
            try:
                result, outcome = finished.get(timeout=0.5)
            except gevent.queue.Empty:
                if self.turn.cancelled:
                    return  # Stop or a server stop: pages still in flight are not kept
                continue
            running.discard(result["url"])
            self._keep(result, outcome)
            pending.extend(self._leads(result, outcome))

    def _fetch(self, tool, result, meta, finished: gevent.queue.Queue) -> None:
        arguments = {"url": result["url"], "max_chars": self.page_chars}
        try:
            outcome = self._tool(tool, arguments, meta)
        except BaseException as exc:  # a fetch must always report, or the run waits forever
            outcome = f"Error: {type(exc).__name__}"
        finished.put((result, outcome))

    def _keep(self, result: dict[str, str], outcome: Any) -> None:
        self.turn.confirm_lease()  # a turn that lost its chat saves nothing more
        run = self._research()
        if isinstance(outcome, ToolResult) and outcome.sources:
            page = outcome.sources[0]
            text = str(page.get("content") or "")[: self.page_chars]
            title = str(page.get("title") or result["title"])
            row = store.save_source(run, result["url"], title, text=text, reason=None)
        else:
            row = store.save_source(
                run, result["url"], result["title"], text=None, reason=_short(outcome)
            )
        self._emit("research_source", {"source": store.source_dict(row, None)})

    def _search_documents(self, index: int, question: str) -> None:
        """The chat's documents searched for a sub-question (once: saved with the step),
        each passage not kept yet kept as a source."""
        done = self._research().state.get("documents_searched", [])
        if not self._documents or index in done or self._halt():
            return
        passages, note = documents.search(self.request.user_id, question, self._documents)
        self.turn.confirm_lease()
        run = self._research()
        for passage in passages:
            key = documents.address(passage)
            if key not in self._seen:
                self._seen.add(key)
                text = passage.text[: self.page_chars]
                row = store.save_source(
                    run, key, passage.source, text=text, reason=None, step=False
                )
                self._emit("research_source", {"source": store.source_dict(row, None)})
        store.log_step(run, "documents", note, step=True, documents_searched=[*done, index])
        self._emit_step("documents", note)

    def _leads(self, result: dict[str, str], outcome: Any) -> list[dict[str, str]]:
        """The first links a page found by a search cites that this run has not seen, to
        read next (under the page budget, like any page): saved with the step, so a resumed
        run reads them too. A page read by following a link adds none."""
        if result.get("via") or not self.follow or not isinstance(outcome, ToolResult):
            return []
        page = outcome.sources[0] if outcome.sources else {}
        leads: list[dict[str, str]] = []
        for link in page.get("links") or []:
            if len(leads) >= self.follow:
                break
            if link["url"] not in self._seen:
                self._seen.add(link["url"])
                leads.append({**link, "via": result["url"]})
        if not leads:
            return []
        run = self._research()
        title = str(page.get("title") or result["title"])[:120]
        text = f"Following {len(leads)} links cited by “{title}”: " + "; ".join(
            lead["title"][:80] for lead in leads
        )
        store.log_step(run, "follow", text, leads=[*run.state.get("leads", []), *leads])
        self._emit_step("follow", text)
        return leads

    def _tool(self, tool: Tool | None, arguments: dict[str, Any], meta: ChatMeta) -> Any:
        """A web tool's outcome: its ToolResult, or the text of its failure."""
        if tool is None:
            return "Error: the web tools are not installed."
        req = self.request
        context = ToolContext(
            user_id=req.user_id,
            chat_id=req.chat_id,
            is_admin=req.is_admin,
            timezone=req.timezone,
            tz_offset_minutes=req.tz_offset_minutes,
            settings=meta.settings,
        )
        timeout = tool.timeout or self.app.config["NUMI_TOOL_TIMEOUT_SECONDS"]
        try:
            with gevent.Timeout(timeout), self.app.app_context():
                return tool.run(arguments, context)
        except gevent.Timeout:
            return f"Error: timed out after {timeout:g} s."
        except ToolFailure as failure:
            return failure.text
        except Exception as exc:
            log.info("research tool %s failed: %r", tool.name, exc)
            return f"Error: {type(exc).__name__}"

    # --- the report ---------------------------------------------------------------------------

    def _write(self, route: Route, meta: ChatMeta) -> None:
        self.turn.confirm_lease()
        run = self._research()
        self.phase = "writing"
        store.set_status(run, "writing", self._elapsed())
        rows = store.sources(run)
        read = store.read_sources(rows)
        text = f"Writing the report from {len(read)} pages."
        store.log_step(run, "write", text)
        self._emit_step("write", text)
        prompt = REPORT_PROMPT.format(
            question=self.request.message,
            plan="".join(f"- {q}\n" for q in run.state.get("plan") or []) + "\n",
            sources=report_sources(read) or NO_SOURCES,
        )
        messages = [{"role": "user", "content": prompt}]
        result = self._call_model(route, messages, meta.settings, [], 1)
        self.turn.confirm_lease()
        run = self._research()  # read after the call, which released the session
        store.add_usage(run, result.usage, route.model)
        cited = [store.source_dict(row, number) for number, row in read]
        if self.turn.cancelled and self.turn.cancel_reason == "shutdown":
            self._emit("research_step", {"kind": "interrupted", "text": SHUTDOWN["message"]})
            self.turn.emit("error", SHUTDOWN)  # the run stays "writing": it resumes
            return
        if self.turn.cancelled or result.error is not None:
            error = (
                {"code": "cancelled", "message": "Stopped by the user."}
                if self.turn.cancelled
                else {"code": result.error.code, "message": result.error.message}
            )
            self._save_partial(route, result, 1, error)
            store.set_status(run, "stopped" if self.turn.cancelled else "failed", self._elapsed())
            self._emit_step("stopped", "The report was cut short.")
            self.turn.emit("error", error if not self.turn.cancelled else _stopped())
            return
        step = self._save_report(route, result, cited)
        store.set_status(run, "done", self._elapsed())
        self.phase = "done"
        self._emit_step("done", f"Report written from {len(read)} pages.")
        self.turn.emit("done", {"message_id": step.id})
        self.answered = True
        self._schedule_title(meta, route)

    def _save_report(self, route: Route, result: StepResult, cited: list[dict[str, Any]]):
        meta = self._meta(route, result, 1)
        run = self._research()
        meta["research"] = {
            "run_id": run.id,
            "steps": run.steps,
            "tokens": run.tokens,
            "pages_read": len(cited),
            "elapsed_seconds": self._elapsed(),
            "resumes": run.resumes,
        }
        message = self.saves.save(
            role="assistant", content=result.content, meta=meta, citation_sources=cited or None
        )
        self.turn.emit(
            "message_saved", {"message_id": message.id, "role": "assistant", "tool_calls": []}
        )
        self.turn.emit("metrics", {"message_id": message.id, **self._metrics(route, result)})
        return message

    # --- ends ---------------------------------------------------------------------------------

    def _end_cancelled(self) -> None:
        """Stop (keep what was read, list it) or a server stop (resume later)."""
        self.turn.confirm_lease()  # lost its chat: another process goes on with the run
        run = self._research()
        if self.turn.cancel_reason == "shutdown":
            store.save_elapsed(run.id, self._elapsed())
            self._emit("research_step", {"kind": "interrupted", "text": SHUTDOWN["message"]})
            self.turn.emit("error", SHUTDOWN)
            return
        read = store.read_sources(store.sources(run))
        store.set_status(run, "stopped", self._elapsed())
        self.phase = "stopped"
        text = f"Stopped. {len(read)} pages read are kept."
        store.log_step(run, "stopped", text)
        self._emit_step("stopped", text)
        lines = [f"Research stopped before the report. Pages read ({len(read)}):"]
        lines += [f"[{number}] {row.title}" for number, row in read]
        message = self.saves.save(
            role="assistant",
            content="\n".join(lines),
            meta={"turn_id": self.turn.id, "partial": True, "error": _stopped()},
            citation_sources=[store.source_dict(row, number) for number, row in read] or None,
        )
        self.turn.emit(
            "message_saved", {"message_id": message.id, "role": "assistant", "tool_calls": []}
        )
        self.turn.emit("error", _stopped())

    def _fail(self, error: StreamError) -> None:
        run = self._research()
        store.set_status(run, "failed", self._elapsed())
        self.turn.emit("error", {"code": error.code, "message": error.message})

    # --- pieces -------------------------------------------------------------------------------

    def _ask(self, route: Route, meta: ChatMeta, prompt: str) -> tuple[str, StreamError | None]:
        """A model call whose text is the run's own (the plan): not streamed as the answer."""
        request = ChatRequest(
            model=route.model,
            messages=[{"role": "user", "content": prompt}],
            system=self.window.system(meta.settings),
            temperature=meta.settings.get("temperature"),
            reasoning=route.capabilities().reasoning,
        )
        adapter = self.window.privacy.adapter(adapter_for_route(self.app, route), route.redaction)
        self.context.release()
        stream = adapter.stream(request)
        unregister = self.turn.on_cancel(stream.close)
        parts: list[str] = []
        error = None
        try:
            for event in stream:
                if isinstance(event, TextDelta):
                    parts.append(event.text)
                elif isinstance(event, Usage):
                    store.add_usage(self._research(), event, route.model)
                elif isinstance(event, StreamError):
                    error = event
        finally:
            unregister()
            stream.close()
        return "".join(parts), error

    def _emit_step(self, kind: str, text: str) -> None:
        self._emit("research_step", {"kind": kind, "text": text})

    def _emit(self, type_: str, data: dict[str, Any]) -> None:
        run = self._research()
        data["progress"] = store.progress(
            run,
            store.sources(run),
            phase=self.phase,
            elapsed=self._elapsed(),
            resumed=self.resumed,
        )
        self.turn.emit(type_, data)

    def _research(self) -> ResearchRun:
        assert self.run_id is not None
        run = db.session.get(ResearchRun, self.run_id)
        assert run is not None  # deleted with its chat, which ends the turn first
        return run

    def _pages_read(self) -> int:
        return store.pages_read(store.sources(self._research()))

    def _elapsed(self) -> int:
        return self._elapsed_before + int(time.monotonic() - self._began)


def _short(outcome: Any) -> str:
    text = outcome if isinstance(outcome, str) else "no readable text"
    return re.sub(r"^Error:\s*", "", text).strip()[:300] or "no readable text"


def _stopped() -> dict[str, str]:
    return {"code": "cancelled", "message": "Stopped. The pages read so far are kept."}
