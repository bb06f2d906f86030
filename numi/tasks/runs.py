"""A task's runs: claimed once per due time, started as a turn, recorded when it ends.

Claiming is one short transaction per task and holds nothing while a model answers: the
task's `next_run_at` is moved on by a conditional UPDATE (`WHERE next_run_at = <the due
time this process read>`), and the run is inserted beside it, unique per (task, due time).
Two processes (two `numi serve` on one PostgreSQL, two gunicorn workers) reading the same
due task both try; the UPDATE of the second finds the row moved on (PostgreSQL re-reads it
after the first commits; SQLite runs one writer at a time) and it claims nothing. The next
due time is counted from now, so after downtime a missed run happens once, with how late
it was, not once per missed time.

The run is a turn like any other (numi.agent.sending.start_turn: the durable turn engine,
fallback chains included), its question sent with the run's `request_id`; the turn-end
hook `record_after_turn` finds the run by it and records the answer's status, tokens and
cost, then the webhook. The run's chat changing from answering to answered is what the
sidebars hear, as for any answer.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any

import gevent
from flask import current_app
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from ..addresses import AddressRefused, guard_for, guarded_transport
from ..agent.research_budget import RESEARCH_TOOL, ResearchBudget
from ..agent.send import Send
from ..agent.sending import start_turn
from ..chat import chats, projects
from ..chat.usage import model_prices
from ..errors import NotFound, NumiError
from ..extensions import db
from ..models import Chat, Message, Task, TaskRun, User, utcnow
from . import schedule as schedules
from . import store

log = logging.getLogger(__name__)

# A run's question carries this request_id prefix: the turn-end hook knows it by that.
REQUEST_PREFIX = "task-run-"
# A run that starts more than this after its due time was late (the server was down or
# busy); the page and the webhook say so.
LATE_AFTER_SECONDS = 60
WEBHOOK_TIMEOUT_SECONDS = 10


def claim_due(now: datetime, limit: int = 100) -> list[int]:
    """Claim the runs due by `now` (naive UTC) that no other process claimed: their ids."""
    due = db.session.execute(
        select(Task.id, Task.user_id, Task.next_run_at, Task.cron, Task.timezone)
        .where(Task.paused.is_(False), Task.next_run_at <= now)
        .order_by(Task.next_run_at)
        .limit(limit)
    ).all()
    db.session.commit()  # end the read: each claim is its own short transaction
    claimed = []
    for row in due:
        run_id = _claim(row, now)
        if run_id is not None:
            claimed.append(run_id)
    return claimed


def _claim(row: Any, now: datetime) -> int | None:
    following = schedules.parse(row.cron).next_after(now, row.timezone)
    moved = db.session.execute(
        update(Task)
        .where(Task.id == row.id, Task.next_run_at == row.next_run_at, Task.paused.is_(False))
        .values(next_run_at=following)
    )
    if moved.rowcount != 1:
        db.session.rollback()  # another process claimed it (or it was paused or edited)
        return None
    late = int((now - row.next_run_at).total_seconds())
    run = _new_run(row.id, row.user_id, row.next_run_at, "schedule", late)
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()  # this due time has its run already
        return None
    return run.id


def claim_manual(task: Task, now: datetime) -> TaskRun:
    """A run now, asked for by the user (Run now): the schedule is left as it is."""
    run = _new_run(task.id, task.user_id, now, "manual", 0)
    db.session.commit()
    return run


def _new_run(task_id: int, user_id: int, due_at: datetime, trigger: str, late: int) -> TaskRun:
    run = TaskRun(
        task_id=task_id,
        user_id=user_id,
        due_at=due_at,
        trigger=trigger,
        late_seconds=late if late > LATE_AFTER_SECONDS else 0,
        status="running",
        request_id=REQUEST_PREFIX + uuid.uuid4().hex,
        started_at=utcnow(),
    )
    db.session.add(run)
    db.session.flush()
    return run


def start_run(run_id: int) -> TaskRun:
    """Start a claimed run's turn. A refusal (the route or chat is gone, no model, the
    server stopping) ends the run as failed with its reason; a task whose route or chat
    is gone is paused with that reason too, not skipped silently."""
    run = db.session.get(TaskRun, run_id)
    task = db.session.get(Task, run.task_id) if run is not None else None
    user = db.session.get(User, task.user_id) if task is not None else None
    if run is None or task is None or user is None:
        raise NotFound("task")
    try:
        store.check_route(
            user.id, task.endpoint_id, task.project_id, uses_project=task.model is None
        )
        chat = _chat_for(task, run)
        run.chat_id, run.title = chat.id, chat.title
        db.session.commit()
        send = Send(
            message=task.prompt,
            request_id=run.request_id,
            queue=True,
            timezone=task.timezone,
            # "research" among the task's tools: each run is a research run on the
            # settings' default budget (numi.agent.research).
            research=ResearchBudget.defaults(current_app.config)
            if RESEARCH_TOOL in task.tools
            else None,
        )
        # Kept with the question (its `request` part): which task asked, and how late.
        client = {
            "kind": "task",
            "via": run.trigger,
            "task_id": task.id,
            "late_seconds": run.late_seconds,
        }
        start_turn(user.id, user.is_admin, chat.id, send, client=client)
    except NumiError as exc:
        db.session.rollback()
        if exc.code == "task_route_gone":
            pause(task, exc)
        finish(run, "failed", error=exc.to_dict())
    return run


def pause(task: Task, reason: NumiError) -> None:
    """Pause a task with the reason the page shows (its route or chat is gone)."""
    task.paused = True
    task.paused_code, task.paused_reason = reason.code, reason.message
    db.session.commit()
    log.info("task %s paused: %s", task.id, reason.code)


def _chat_for(task: Task, run: TaskRun) -> Chat:
    """The chat the run answers in: a new one, or the task's one chat (made at its first
    run), its route brought up to the task's."""
    config = current_app.config
    fields: dict[str, Any] = {"settings": {"tools": task.tools}}
    if task.endpoint_id is not None:
        fields.update(endpoint_id=task.endpoint_id, model=task.model)
    if task.destination == "chat" and task.chat_id is not None:
        try:
            return chats.update_chat(task.user_id, task.chat_id, fields, config)
        except NotFound:
            raise store.route_gone("chat") from None
    fields["title"] = task.name
    if task.project_id is not None:
        fields = projects.new_chat_fields(
            projects.get_project(task.user_id, task.project_id), fields
        )
    chat = chats.create_chat(task.user_id, fields, config)
    if task.destination == "chat":
        task.chat_id = chat.id  # every later run appends here
    return chat


def finish(run: TaskRun, status: str, *, error: dict[str, Any] | None = None) -> None:
    """End a run: its status, the error's code and message, its end time."""
    run.status = status
    if error:
        run.error_code = str(error.get("code") or "interrupted")[:60]
        run.error_message = str(error.get("message") or "")
    run.finished_at = utcnow()
    db.session.commit()


def record_after_turn(turn: Any) -> None:
    """The turn manager's turn-end hook: a task run's turn ended; record its answer (status,
    tokens, cost, the message to link to), then send the webhook if the task has one."""
    request_id = turn.request.request_id
    if not request_id or not request_id.startswith(REQUEST_PREFIX):
        return
    run = db.session.execute(
        select(TaskRun).where(TaskRun.request_id == request_id)
    ).scalar_one_or_none()
    if run is None or run.status != "running":
        return
    record_answer(run, turn.last_error)
    task = db.session.get(Task, run.task_id)
    if task is not None and task.webhook_url:
        user = db.session.get(User, task.user_id)
        payload = webhook_payload(task, run)
        gevent.spawn(send_webhook, task.webhook_url, payload, bool(user and user.is_admin))


def record_answer(run: TaskRun, error: dict[str, Any] | None) -> None:
    """Sum what the run's answers used and end the run: failed with the turn's error, or
    done with its last answer to link to."""
    question_id = db.session.execute(
        select(Message.id).where(
            Message.chat_id == run.chat_id, Message.request_id == run.request_id
        )
    ).scalar_one_or_none()
    answers = []
    if question_id is not None:
        answers = list(
            db.session.execute(
                select(Message).where(
                    Message.chat_id == run.chat_id,
                    Message.id > question_id,
                    Message.role == "assistant",
                    Message.deleted_at.is_(None),
                )
            ).scalars()
        )
    prices = model_prices(run.user_id)
    cost = None
    for answer in answers:
        run.input_tokens += answer.input_tokens or 0
        run.output_tokens += answer.output_tokens or 0
        price = prices.get(answer.model or "")
        if price is not None:
            cost = (cost or 0.0) + (
                (answer.input_tokens or 0) / 1e6 * price.input_per_mtok
                + (answer.output_tokens or 0) / 1e6 * price.output_per_mtok
            )
    run.cost = cost
    if answers:
        run.message_id = answers[-1].id
    chat = db.session.get(Chat, run.chat_id) if run.chat_id else None
    if chat is not None:
        run.title = chat.title
    if error is None and answers and answers[-1].meta.get("error"):
        saved = answers[-1].meta["error"]  # cut short (a restart): saved with its reason
        error = saved if isinstance(saved, dict) else {"code": "interrupted", "message": str(saved)}
    if error is None and not answers:
        error = {"code": "no_answer", "message": "The run ended without an answer."}
    finish(run, "failed" if error else "done", error=error)


def webhook_payload(task: Task, run: TaskRun) -> dict[str, Any]:
    """What the webhook POSTs: the result's title, link and status (no answer text)."""
    link = f"/c/{run.chat_id}" + (f"#msg-{run.message_id}" if run.message_id else "")
    base = (task.link_base or "").rstrip("/")
    return {
        "task": task.name,
        "task_id": task.id,
        "run_id": run.id,
        "title": run.title or task.name,
        "link": base + link,
        "status": run.status,
        "late_seconds": run.late_seconds,
        "error": run.to_dict()["error"],
    }


def send_webhook(url: str, payload: dict[str, Any], is_admin: bool) -> bool:
    """POST the payload to the task's webhook under fetch_page's address rules (a
    non-admin's reaches public addresses only, checked and pinned at connect time, and
    redirects are not followed). A failure is logged; the run stays as it ended."""
    import httpx2  # lazy: start-up time

    policy = guard_for(is_admin)
    transport = guarded_transport(policy) if policy is not None else None
    try:
        with httpx2.Client(
            transport=transport, timeout=WEBHOOK_TIMEOUT_SECONDS, trust_env=False
        ) as client:
            response = client.post(url, json=payload)
        if response.status_code >= 400:
            log.warning("task %s webhook answered %s", payload["task_id"], response.status_code)
            return False
        return True
    except AddressRefused:
        log.warning("task %s webhook refused: the address is internal", payload["task_id"])
    except Exception as exc:
        log.warning("task %s webhook failed: %s", payload["task_id"], type(exc).__name__)
    return False
