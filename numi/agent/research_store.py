"""A research run's saved steps: the run's row, its searches and the pages it read.

Each write is its own short transaction, made as the step finishes (never while a page is
fetched or the model streams), so a process that dies loses at most the step it was on.
The progress view (`progress`) is made from the row and the sources: what every research
event carries whole, so a snapshot or a reload draws it again without replaying steps.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import CursorResult

from ..extensions import db
from ..models import ModelPrice, ResearchRun, ResearchSource, utcnow
from ..models.research import UNFINISHED
from .research_documents import cited

# The newest log lines a progress view shows (a long run keeps the rest in its row).
LOG_SHOWN = 40


def open_run(
    user_id: int, chat_id: str, request_id: str, budget: dict[str, int]
) -> tuple[ResearchRun, bool]:
    """The question's run, made on its first turn. (run, resumed): `resumed` is true when
    the run was cut short before (its process stopped or died) and goes on now."""
    run = db.session.execute(
        select(ResearchRun).where(
            ResearchRun.chat_id == chat_id, ResearchRun.request_id == request_id
        )
    ).scalar_one_or_none()
    if run is None:
        run = ResearchRun(
            user_id=user_id,
            chat_id=chat_id,
            request_id=request_id,
            status="running",
            budget=budget,
            state={"plan": None, "searches": [], "log": []},
        )
        db.session.add(run)
        db.session.commit()
        return run, False
    resumed = run.status in UNFINISHED
    if resumed:
        run.resumes += 1
    else:
        # A Retry of a stopped or failed run goes on with what it read (no page twice).
        run.status, run.finished_at = "running", None
    run.stop_request = None
    db.session.commit()
    return run, resumed


def log_step(run: ResearchRun, kind: str, text: str, *, step: bool = False, **state: Any) -> None:
    """Keep a line of the run's log (and, with `step`, count a step); `state` updates the
    saved state (the plan, a search)."""
    saved = run.state
    saved.update(state)
    saved["log"] = [*saved.get("log", []), {"kind": kind, "text": text[:500], "at": _now()}]
    run.state = saved
    if step:
        run.steps += 1
    db.session.commit()


def save_search(run: ResearchRun, query: str, results: list[dict[str, str]], note: str) -> None:
    searches = [*run.state.get("searches", []), {"query": query, "results": results}]
    log_step(run, "search", note, step=True, searches=searches)


def save_source(
    run: ResearchRun,
    url: str,
    title: str,
    *,
    text: str | None,
    reason: str | None,
    step: bool = True,
) -> ResearchSource:
    """A page read (text) or skipped (reason), saved as it finishes: a resumed run never
    fetches it again. A document's passage is kept the same way, its search the step."""
    source = ResearchSource(
        run_id=run.id,
        url=url,
        title=(title or url)[:300],
        status="read" if text is not None else "skipped",
        reason=reason,
        text=text,
    )
    db.session.add(source)
    if step:
        run.steps += 1
    db.session.commit()
    return source


def sources(run: ResearchRun) -> list[ResearchSource]:
    rows = list(
        db.session.execute(
            select(ResearchSource)
            .where(ResearchSource.run_id == run.id)
            .order_by(ResearchSource.id)
        ).scalars()
    )
    db.session.commit()
    return rows


def add_usage(run: ResearchRun, usage: Any, model: str) -> None:
    """Count a model call's tokens, and its cost when the user priced the model (Usage's
    prices per million tokens); the cost so far is kept in the run's state."""
    tokens_in = getattr(usage, "input_tokens", 0) or 0
    tokens_out = getattr(usage, "output_tokens", 0) or 0
    run.tokens += max(0, tokens_in + tokens_out)
    price = model_price(run.user_id, model)
    if price is not None:
        state = run.state
        state["cost"] = (state.get("cost") or 0.0) + (
            tokens_in / 1e6 * price.input_per_mtok + tokens_out / 1e6 * price.output_per_mtok
        )
        run.state = state
    db.session.commit()


def model_price(user_id: int, model: str) -> ModelPrice | None:
    """The user's price for `model` (the Usage page's, per million tokens), if any."""
    return db.session.execute(
        select(ModelPrice).where(ModelPrice.user_id == user_id, ModelPrice.model == model)
    ).scalar_one_or_none()


def set_status(run: ResearchRun, status: str, elapsed: int) -> None:
    run.status = status
    run.elapsed_seconds = elapsed
    if status not in UNFINISHED:
        run.finished_at = utcnow()
    db.session.commit()


def save_elapsed(run_id: int, elapsed: int) -> None:
    db.session.execute(
        update(ResearchRun).where(ResearchRun.id == run_id).values(elapsed_seconds=elapsed)
    )
    db.session.commit()


def write_requested(run_id: int) -> bool:
    """Whether Stop and write was asked (by this process or another)."""
    asked = db.session.execute(
        select(ResearchRun.stop_request).where(ResearchRun.id == run_id)
    ).scalar_one_or_none()
    db.session.commit()
    return asked == "write"


def request_write(user_id: int, chat_id: str) -> bool:
    """Stop and write: the chat's gathering run writes its report at its next step. False
    when no run of this user's chat is gathering (nothing changed)."""
    changed: CursorResult = db.session.execute(  # type: ignore[assignment]  # an UPDATE's result
        update(ResearchRun)
        .where(
            ResearchRun.user_id == user_id,
            ResearchRun.chat_id == chat_id,
            ResearchRun.status == "running",
        )
        .values(stop_request="write")
    )
    db.session.commit()
    return bool(changed.rowcount)


def asked_last(chat_id: str, run_id: int | None) -> bool:
    """Whether the chat's run before this one asked a clarifying question (then this one
    does not ask another)."""
    status = db.session.execute(
        select(ResearchRun.status)
        .where(ResearchRun.chat_id == chat_id, ResearchRun.id != run_id)
        .order_by(ResearchRun.id.desc())
        .limit(1)
    ).scalar_one_or_none()
    db.session.commit()
    return status == "asked"


def unfinished_runs() -> list[ResearchRun]:
    """Runs cut short by a stop or a crash, oldest first: a starting process resumes them."""
    rows = list(
        db.session.execute(
            select(ResearchRun).where(ResearchRun.status.in_(UNFINISHED)).order_by(ResearchRun.id)
        ).scalars()
    )
    db.session.commit()
    return rows


def progress(
    run: ResearchRun, rows: list[ResearchSource], *, phase: str, elapsed: int, resumed: bool
) -> dict[str, Any]:
    """The whole progress view: plan, log, sources read and skipped, tokens, elapsed
    (and the start it counts from)."""
    state = run.state
    return {
        "phase": phase,
        "plan": list(state.get("plan") or []),
        "log": list(state.get("log", []))[-LOG_SHOWN:],
        "sources": [source_dict(row, number) for number, row in _numbered(rows)],
        "steps": run.steps,
        "pages_read": pages_read(rows),
        "passages": sum(1 for row in rows if cited(row.url)),
        "tokens": run.tokens,
        "cost": None if state.get("cost") is None else round(state["cost"], 6),
        "elapsed_seconds": elapsed,
        # When the run would have started had it never stopped (server time, epoch seconds):
        # the page ticks the elapsed time from it between events.
        "started_at": round(time.time() - elapsed, 3),
        "budget": run.budget,
        "resumed": resumed,
    }


def pages_read(rows: list[ResearchSource]) -> int:
    """Web pages read (what the page budget counts; a document's passage is not one)."""
    return sum(1 for row in rows if row.status == "read" and not cited(row.url))


def source_dict(row: ResearchSource, number: int | None) -> dict[str, Any]:
    return {
        "n": number,
        "title": row.title,
        "url": row.url,
        "status": row.status,
        "reason": row.reason,
        "read_at": row.read_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        **(cited(row.url) or {}),
    }


def _numbered(rows: list[ResearchSource]):
    """Each row with its citation number: pages read are [1], [2], ... in reading order."""
    number = 0
    for row in rows:
        if row.status == "read":
            number += 1
            yield number, row
        else:
            yield None, row


def read_sources(rows: list[ResearchSource]) -> list[tuple[int, ResearchSource]]:
    return [(number, row) for number, row in _numbered(rows) if number is not None]


def _now() -> str:
    return utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")
