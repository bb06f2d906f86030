"""Scheduled tasks' routes: the JSON API and the Tasks page (issue 38).

POST   /api/tasks                 create a task (201)
GET    /api/tasks                 the user's tasks, each with its next run and last run
PATCH  /api/tasks/<id>            change fields; `paused` pauses and resumes
DELETE /api/tasks/<id>            delete it and its history (its chats stay)
POST   /api/tasks/<id>/run        Run now (202, the run)
GET    /api/tasks/<id>/runs       its run history, newest first

GET /tasks is the page (next run, last result, history, Run now, pause and resume, edit,
delete), and its forms post to /tasks, /tasks/<id>, /tasks/<id>/run|pause|resume|delete:
each answers the page's body (HTMX) or redirects back to the page. A task whose last run
runs asks for itself (GET /tasks/<id>/item) every 2 s until the run has ended. A task is the signed-in
user's only; another's is a 404.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from flask import Blueprint, current_app, g, jsonify, redirect, render_template, request, url_for
from sqlalchemy import select

from .. import endpoints as endpoint_store
from ..agent.research_budget import RESEARCH_TOOL
from ..chat import chats, projects
from ..chat.request_meta import stored_request
from ..errors import NotFound, NumiError
from ..extensions import db
from ..models import Message, Task
from ..services import services
from ..tasks import runs, store
from ..tasks.schedule import zone
from .inputs import int_arg, request_data
from .model_picker import model_picker_html
from .pages.chat_forms import route_fields
from .request_kind import is_htmx
from .pages.chat_forms import chat_tool_choices

bp = Blueprint("tasks", __name__)

HISTORY_ON_PAGE = 10


def _now() -> datetime:
    return services().task_scheduler.now()


def _saved(task: Task) -> None:
    """A task was saved here: the webhook's links start at this page's address, and this
    process's scheduler looks at the due times again."""
    if task.link_base != request.host_url:
        task.link_base = request.host_url
        db.session.commit()
    services().task_scheduler.poke()


def _run_now(task: Task) -> Any:
    # A route that is gone is refused before a run is recorded (the schedule's own run
    # would pause the task instead).
    store.check_route(
        task.user_id, task.endpoint_id, task.project_id, uses_project=task.model is None
    )
    run = runs.claim_manual(task, _now())
    return runs.start_run(run.id)


# --- the JSON API -------------------------------------------------------------------------


@bp.post("/api/tasks")
def create_json():
    data = request_data()
    data.setdefault("timezone", request.headers.get("X-Timezone") or "UTC")
    task = store.create_task(g.user, data, current_app.config, _now())
    _saved(task)
    return jsonify(store.task_dict(task)), 201


@bp.get("/api/tasks")
def list_json():
    tasks = store.list_tasks(g.user.id)
    last = store.last_runs(g.user.id, [t.id for t in tasks])
    return jsonify(tasks=[store.task_dict(t, last.get(t.id)) for t in tasks])


@bp.get("/api/tasks/<int:task_id>")
def get_json(task_id: int):
    task = store.get_task(g.user.id, task_id)
    last = store.last_runs(g.user.id, [task.id]).get(task.id)
    return jsonify(store.task_dict(task, last))


@bp.patch("/api/tasks/<int:task_id>")
def update_json(task_id: int):
    task = store.update_task(g.user, task_id, request_data(), current_app.config, _now())
    _saved(task)
    return jsonify(store.task_dict(task))


@bp.delete("/api/tasks/<int:task_id>")
def delete_json(task_id: int):
    store.delete_task(g.user.id, task_id)
    return "", 204


@bp.post("/api/tasks/<int:task_id>/run")
def run_json(task_id: int):
    run = _run_now(store.get_task(g.user.id, task_id))
    return jsonify(run.to_dict()), 202


@bp.get("/api/tasks/<int:task_id>/runs")
def runs_json(task_id: int):
    limit = int_arg("limit", 50, low=1, high=500)
    return jsonify(runs=[r.to_dict() for r in store.list_runs(g.user.id, task_id, limit)])


# --- the page -----------------------------------------------------------------------------


@bp.get("/tasks")
def tasks_page():
    """The page; `?chat=<id>` ("Schedule this…" in a chat) fills the new task's form with
    the chat's last question, its model, and the chat as where results go."""
    form, route = _from_chat(request.args.get("chat"))
    return render_template("tasks.html", **_page_context(form=form, route=route))


def _from_chat(chat_id: str | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    if not chat_id:
        return {}, None
    chat = chats.get_chat(g.user.id, chat_id)
    question = db.session.execute(
        select(Message.content)
        .where(Message.chat_id == chat.id, Message.role == "user", Message.deleted_at.is_(None))
        .order_by(Message.id.desc())
        .limit(1)
    ).scalar_one_or_none()
    form = {"name": chat.title, "prompt": question or "", "destination": "chat", "chat_id": chat.id}
    return form, {"endpoint_id": chat.endpoint_id, "model": chat.model}


@bp.post("/tasks")
def create_form():
    data = _form_fields(request_data())
    try:
        task = store.create_task(g.user, data, current_app.config, _now())
    except NumiError as exc:
        return _answer(error=exc, form=data, status=exc.status)
    _saved(task)
    return _answer(notice=f"Created the task {task.name}.")


@bp.post("/tasks/<int:task_id>")
def update_form(task_id: int):
    data = _form_fields(request_data())
    try:
        task = store.update_task(g.user, task_id, data, current_app.config, _now())
    except NotFound:
        raise
    except NumiError as exc:
        return _answer(error=exc, editing=task_id, status=exc.status)
    _saved(task)
    return _answer(notice=f"Saved the task {task.name}.")


@bp.post("/tasks/<int:task_id>/run")
def run_form(task_id: int):
    try:
        run = _run_now(store.get_task(g.user.id, task_id))
    except NotFound:
        raise
    except NumiError as exc:
        return _answer(error=exc, status=exc.status)
    if run.status == "failed":
        return _answer(
            error=NumiError(run.error_code or "interrupted", run.error_message or "", 409)
        )
    return _answer(notice="Started a run. Its result appears below when it is done.")


@bp.post("/tasks/<int:task_id>/pause")
def pause_form(task_id: int):
    store.update_task(g.user, task_id, {"paused": True}, current_app.config, _now())
    return _answer()


@bp.post("/tasks/<int:task_id>/resume")
def resume_form(task_id: int):
    try:
        task = store.update_task(g.user, task_id, {"paused": False}, current_app.config, _now())
    except NotFound:
        raise
    except NumiError as exc:
        return _answer(error=exc, status=exc.status)
    _saved(task)
    return _answer()


@bp.post("/tasks/<int:task_id>/delete")
def delete_form(task_id: int):
    store.delete_task(g.user.id, task_id)
    return _answer(notice="Deleted the task.")


@bp.get("/tasks/<int:task_id>/item")
def item_fragment(task_id: int):
    """One task alone: its item asks for itself while its last run runs."""
    task = store.get_task(g.user.id, task_id)
    return render_template("partials/_task_item.html", task=task, **_page_context(only=task))


def _form_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The form's fields as the API's: the model picker's `route`, the tools' checkboxes."""
    fields: dict[str, Any] = {
        key: data[key]
        for key in (
            "name",
            "prompt",
            "schedule",
            "timezone",
            "destination",
            "chat_id",
            "webhook_url",
        )
        if key in data
    }
    if "route" in data:
        route = route_fields(data.get("route") or "")
        fields["endpoint_id"], fields["model"] = route["endpoint_id"], route["model"] or None
    if "project_id" in data:
        fields["project_id"] = data["project_id"] or None
    if "tools" in data:
        fields["tools"] = [t for t in request.form.getlist("tools") if t]
    return fields


def _answer(
    *,
    notice: str | None = None,
    error: NumiError | None = None,
    form: dict[str, Any] | None = None,
    editing: int | None = None,
    status: int = 200,
):
    if not is_htmx():
        if error is not None:
            return render_template("tasks.html", **_page_context(error, form, editing)), status
        return redirect(url_for("tasks.tasks_page"), code=303)
    # HTMX swaps a 200 only: the body carries the error beside the form it came from.
    return render_template(
        "partials/_tasks_body.html", **_page_context(error, form, editing, notice)
    )


def _page_context(
    error: NumiError | None = None,
    form: dict[str, Any] | None = None,
    editing: int | None = None,
    notice: str | None = None,
    only: Task | None = None,
    route: dict[str, Any] | None = None,
) -> dict[str, Any]:
    user_id = g.user.id
    tasks = [only] if only is not None else store.list_tasks(user_id)
    last = store.last_runs(user_id, [t.id for t in tasks])
    endpoints = endpoint_store.list_endpoints(user_id)
    default = endpoint_store.default_route(user_id, endpoints)
    preselected = f"{default.id}:{endpoint_store.first_model(default) or ''}" if default else ""
    return {
        "tasks": tasks,
        "last_runs": last,
        "history": {t.id: store.list_runs(user_id, t.id, HISTORY_ON_PAGE) for t in tasks},
        "endpoints": endpoints,
        "picker": lambda task=None: model_picker_html(endpoints, task or route, preselected),
        "projects": projects.list_projects(user_id),
        "tool_choices": _tool_choices(),
        "local_time": local_time,
        "error": error,
        "form": form or {},
        "editing": editing,
        "notice": notice,
    }


def _tool_choices() -> list[dict[str, str]]:

    # A run has nobody to approve a call: only the tools that need no approval are offered.
    # "Research" makes each run a research run (its web reads need no approval either).
    research = {"name": RESEARCH_TOOL, "label": "Research: a cited report from the web"}
    return [
        c for c in chat_tool_choices() if c["default_policy"] == "auto" and not c["always_ask"]
    ] + [research]


@bp.app_template_global("task_note")
def task_note(message: Any) -> str | None:
    """The note on a question a scheduled task sent (templates/partials/_message.html): that
    a task sent it, and how late when the server was down at its due time."""
    if getattr(message, "role", None) != "user":
        return None
    meta = stored_request(getattr(message, "content_parts", None)) or {}
    client = meta.get("client") if isinstance(meta.get("client"), dict) else {}
    if client.get("kind") != "task":
        return None
    late = client.get("late_seconds")
    if isinstance(late, int) and not isinstance(late, bool) and late > 0:
        return f"Scheduled task, ran {late // 60} min late (the server was not running)"
    return "Scheduled task" if client.get("via") == "schedule" else "Scheduled task (Run now)"


def local_time(moment: datetime | None, timezone: str) -> str:
    """A stored UTC time in the task's time zone, as the page shows it."""
    if moment is None:
        return "—"
    try:
        tz: ZoneInfo = zone(timezone)
    except NumiError:
        tz = ZoneInfo("UTC")
    local = moment.replace(tzinfo=ZoneInfo("UTC")).astimezone(tz)
    return local.strftime("%a %d %b %Y, %H:%M ") + (local.tzname() or "")
