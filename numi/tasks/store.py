"""A user's scheduled tasks: checked input, owner-scoped reads and writes.

Every field is checked before anything is written, so a refused request (a bad schedule,
time zone or webhook, a route that is gone, one task too many) changes nothing. Every query
is filtered by the owner; another user's task is a 404 like a missing one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import delete, func, select

from .. import endpoints as endpoint_store
from ..addresses import AddressRefused, check_url, guard_for
from ..chat import chats, followups, projects
from ..chat.chats import validate_settings
from ..errors import NotFound, NumiError, invalid, no_model
from ..extensions import db
from ..models import Task, TaskRun, User, utcnow
from ..models.columns import iso
from . import schedule as schedules

DESTINATIONS = ("new_chat", "chat")
FIELDS = (
    "name", "prompt", "endpoint_id", "model", "project_id", "tools", "schedule", "timezone",
    "destination", "chat_id", "webhook_url", "paused",
)  # fmt: skip
MAX_NAME_CHARS = 200
MAX_WEBHOOK_CHARS = 2000


def route_gone(what: str) -> NumiError:
    """A task whose endpoint or project (or chat to append to) was deleted."""
    return NumiError(
        "task_route_gone",
        f"The task's {what} was deleted: choose another and resume the task.",
        409,
    )


def get_task(user_id: int, task_id: int) -> Task:
    """The user's task `task_id`, or NotFound (404), as for another user's task."""
    task = db.session.execute(
        select(Task).where(Task.id == task_id, Task.user_id == user_id)
    ).scalar_one_or_none()
    if task is None:
        raise NotFound("task")
    return task


def list_tasks(user_id: int) -> list[Task]:
    """The user's tasks, the next due first (paused ones last)."""
    return list(
        db.session.execute(
            select(Task)
            .where(Task.user_id == user_id)
            .order_by(Task.paused, Task.next_run_at.is_(None), Task.next_run_at, Task.id)
        ).scalars()
    )


def list_runs(user_id: int, task_id: int, limit: int = 50) -> list[TaskRun]:
    """A task's runs, newest first (the task must be the user's)."""
    get_task(user_id, task_id)
    return list(
        db.session.execute(
            select(TaskRun)
            .where(TaskRun.task_id == task_id, TaskRun.user_id == user_id)
            .order_by(TaskRun.id.desc())
            .limit(limit)
        ).scalars()
    )


def last_runs(user_id: int, task_ids: list[int]) -> dict[int, TaskRun]:
    """Each task's newest run (one query for a page of tasks)."""
    if not task_ids:
        return {}
    newest = (
        select(func.max(TaskRun.id))
        .where(TaskRun.user_id == user_id, TaskRun.task_id.in_(task_ids))
        .group_by(TaskRun.task_id)
    )
    rows = db.session.execute(select(TaskRun).where(TaskRun.id.in_(newest))).scalars()
    return {run.task_id: run for run in rows}


def create_task(user: User, data: dict[str, Any], config: Any, now: datetime) -> Task:
    """A new task from `data`; its first due time is worked out from `now`."""
    limit = config["NUMI_TASKS_PER_USER"]
    count = db.session.execute(
        select(func.count()).select_from(Task).where(Task.user_id == user.id)
    ).scalar_one()
    if count >= limit:
        raise NumiError(
            "too_many_tasks",
            f"You have {count} tasks, the most this server allows ({limit}): delete one first.",
            409,
        )
    task = Task(user_id=user.id, paused=False, destination="new_chat")
    _apply(task, user, {"destination": "new_chat", **data}, config, now, new=True)
    db.session.add(task)
    db.session.commit()
    return task


def update_task(user: User, task_id: int, data: dict[str, Any], config: Any, now: datetime) -> Task:
    """Change some of a task's fields (pause and resume too); a bad field changes nothing."""
    task = get_task(user.id, task_id)
    _apply(task, user, data, config, now, new=False)
    task.updated_at = utcnow()
    db.session.commit()
    return task


def delete_task(user_id: int, task_id: int) -> None:
    """Delete a task and its run history; the chats its runs made stay."""
    task = get_task(user_id, task_id)
    db.session.execute(delete(TaskRun).where(TaskRun.task_id == task.id))
    db.session.delete(task)
    db.session.commit()


def _apply(
    task: Task, user: User, data: dict[str, Any], config: Any, now: datetime, *, new: bool
) -> None:
    """Check every given field, then assign them all."""
    if not isinstance(data, dict):
        raise invalid("A task must be a JSON object.")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise invalid(f"Unknown task field {unknown[0]!r}.", "unknown_field")
    updates: dict[str, Any] = {}
    if new or "name" in data:
        name = data.get("name")
        if name is not None and not isinstance(name, str):
            raise invalid("name must be text.")
        updates["name"] = (name or "").strip()[:MAX_NAME_CHARS]
    if new or "prompt" in data:
        updates["prompt"] = followups.check_text(
            data.get("prompt"), config["NUMI_MAX_MESSAGE_CHARS"]
        )
        if not updates.get("name"):
            updates["name"] = _name_from(updates["prompt"])
    if "tools" in data:
        updates["tools"] = validate_settings({"tools": data["tools"] or []}, {})["tools"]
    updates.update(_route(task, user, data, new=new))
    if new or "destination" in data or "chat_id" in data:
        updates.update(_destination(task, user.id, data))
    if "webhook_url" in data:
        updates["webhook_url"] = check_webhook(data["webhook_url"], user.is_admin)
    timing_changed = new or "schedule" in data or "timezone" in data
    schedule_text = data.get("schedule", task.schedule)
    timezone = data.get("timezone", task.timezone) or "UTC"
    if timing_changed:
        parsed = schedules.parse(schedule_text)
        schedules.zone(timezone)
        schedules.check_interval(parsed, config["NUMI_TASK_MIN_INTERVAL_MINUTES"])
        if parsed.next_after(now, timezone) is None:
            raise schedules.invalid_schedule(f"{schedule_text!r} never comes round.")
        updates.update(schedule=schedule_text.strip(), cron=parsed.cron, timezone=timezone)
    resuming = False
    if "paused" in data:
        if not isinstance(data["paused"], bool):
            raise invalid("paused must be true or false.")
        resuming = task.paused and not data["paused"]
        updates["paused"] = data["paused"]
        if resuming:
            check_route(
                user.id,
                updates.get("endpoint_id", task.endpoint_id),
                updates.get("project_id", task.project_id),
                uses_project=updates.get("model", task.model) is None,
            )
    for name, value in updates.items():
        setattr(task, name, value)
    if (
        resuming
        or (timing_changed and not task.paused)
        or "endpoint_id" in data
        or "project_id" in data
    ):
        task.paused_code = task.paused_reason = None
    if new or timing_changed or resuming:
        # From now: a paused stretch or an old schedule leaves no run to catch up.
        task.next_run_at = schedules.parse(task.cron).next_after(now, task.timezone)


def _name_from(prompt: str) -> str:
    first = prompt.strip().splitlines()[0] if prompt.strip() else "Task"
    return first[:60] + ("…" if len(first) > 60 else "")


def _route(task: Task, user: User, data: dict[str, Any], *, new: bool) -> dict[str, Any]:
    """The route fields: an endpoint and model, or a project's defaults and fallback chain;
    with neither, the user's default endpoint now."""
    if not new and not {"endpoint_id", "model", "project_id"} & set(data):
        return {}
    endpoint_id = data.get("endpoint_id", None if new else task.endpoint_id)
    project_id = data.get("project_id", None if new else task.project_id)
    model = data.get("model", None if new else task.model)
    if endpoint_id in ("", None):
        endpoint_id = None
    elif isinstance(endpoint_id, bool) or not isinstance(endpoint_id, (int, str)):
        raise invalid("endpoint_id must be a number.")
    if project_id in ("", None):
        project_id = None
    else:
        try:
            project_id = int(project_id)
        except (TypeError, ValueError):
            raise invalid("project_id must be a number.") from None
        projects.chosen_project(user.id, project_id)
    if model is not None and (not isinstance(model, str) or len(model) > 200):
        raise invalid("model must be text of at most 200 characters.")
    model = (model or "").strip() or None
    if endpoint_id is None:
        if project_id is not None:
            return {"endpoint_id": None, "model": None, "project_id": project_id}
        default = endpoint_store.default_route(user.id)
        if default is None:
            raise no_model()
        endpoint_id = default.id
    try:
        endpoint = endpoint_store.get_endpoint(user.id, int(endpoint_id))
    except (TypeError, ValueError):
        raise invalid("endpoint_id must be a number.") from None
    except NotFound:
        raise route_gone("endpoint") from None
    model = model or endpoint_store.first_model(endpoint)
    if not model:
        raise no_model()
    return {"endpoint_id": endpoint.id, "model": model, "project_id": project_id}


def check_route(
    user_id: int, endpoint_id: int | None, project_id: int | None, *, uses_project: bool
) -> None:
    """Refuse (`task_route_gone`) a route whose endpoint or project was deleted."""
    if project_id is not None:
        try:
            projects.get_project(user_id, project_id)
        except NotFound:
            raise route_gone("project") from None
    elif uses_project or endpoint_id is None:
        raise route_gone("project" if uses_project else "endpoint")
    if endpoint_id is not None:
        try:
            endpoint_store.get_endpoint(user_id, endpoint_id)
        except NotFound:
            raise route_gone("endpoint") from None


def _destination(task: Task, user_id: int, data: dict[str, Any]) -> dict[str, Any]:
    destination = data.get("destination", task.destination)
    if destination not in DESTINATIONS:
        raise invalid("destination must be new_chat (a chat per run) or chat (one chat).")
    chat_id = data.get("chat_id", task.chat_id if destination == "chat" else None)
    if destination == "new_chat":
        return {"destination": destination, "chat_id": None}
    if chat_id in ("", None):
        return {"destination": destination, "chat_id": None}  # made at the first run
    if not isinstance(chat_id, str):
        raise invalid("chat_id must be a chat id.")
    chat = chats.get_chat(user_id, chat_id)
    if chat.temporary:
        raise invalid("A temporary chat cannot receive a task's results.")
    return {"destination": destination, "chat_id": chat.id}


def check_webhook(value: Any, is_admin: bool) -> str | None:
    """A webhook URL under fetch_page's address rules: http(s), and for a non-admin no
    private, loopback or other internal address (`webhook_refused`). Empty: none."""
    if value in (None, ""):
        return None
    if not isinstance(value, str) or len(value) > MAX_WEBHOOK_CHARS:
        raise invalid(
            f"webhook_url must be a URL of at most {MAX_WEBHOOK_CHARS} characters.",
            "invalid_webhook",
        )
    url = value.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise invalid("webhook_url must be an http:// or https:// URL.", "invalid_webhook")
    policy = guard_for(is_admin)
    if policy is not None:
        try:
            # A host that does not resolve now may later: it is checked again at each POST.
            check_url(url, policy, resolvable=False)
        except AddressRefused:
            raise webhook_refused() from None
    return url


def webhook_refused() -> NumiError:
    return NumiError(
        "webhook_refused",
        "That webhook address is refused: private, loopback and other internal addresses are "
        "for administrators only.",
        400,
    )


def task_dict(task: Task, last: TaskRun | None = None) -> dict[str, Any]:
    """A task as the API shows it."""
    return {
        "id": task.id,
        "name": task.name,
        "prompt": task.prompt,
        "endpoint_id": task.endpoint_id,
        "model": task.model,
        "project_id": task.project_id,
        "tools": task.tools,
        "schedule": task.schedule,
        "cron": task.cron,
        "timezone": task.timezone,
        "destination": task.destination,
        "chat_id": task.chat_id,
        "webhook_url": task.webhook_url,
        "paused": task.paused,
        "paused_reason": (
            {"code": task.paused_code, "message": task.paused_reason} if task.paused_code else None
        ),
        "next_run_at": None if task.paused else iso(task.next_run_at),
        "last_run": last.to_dict() if last is not None else None,
        "created_at": iso(task.created_at),
    }
