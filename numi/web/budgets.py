"""Budgets' JSON API (issue 41); the Usage page lists them with their state.

GET    /api/budgets[?user_id=]  the user's budgets and their state (an administrator: any user's)
POST   /api/budgets             {scope, project_id|endpoint_id, period, unit, soft_cap, hard_cap,
                                timezone, user_id (an administrator, for another user)}
PATCH  /api/budgets/<id>        any of those fields
DELETE /api/budgets/<id>
POST   /usage/budgets                 the Usage page's Add form (the section again, with the
                                      error next to the form it came from)
POST   /usage/budgets/<id>            its Edit form
POST   /usage/budgets/<id>/delete     its Delete button

A budget an administrator set for a user is theirs to change: the user sees it and is held
to it, and only an administrator may change or remove it (`admin_only`).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, jsonify, redirect, render_template, request, url_for

from ..chat import budgets
from ..errors import NotFound, NumiError
from ..extensions import db
from ..models import Budget, User
from .inputs import request_data
from .request_kind import is_htmx
from .usage import section_context, usage_page_with

bp = Blueprint("budgets", __name__)


def _admin_only() -> NumiError:
    return NumiError("admin_only", "Only an administrator can set or change this budget.", 403)


def _owner(value: Any) -> int:
    """Whose budget: the signed-in user's, or (an administrator only) the one named."""
    if value is None or value == g.user.id:
        return g.user.id
    if not g.user.is_admin:
        raise _admin_only()
    if not isinstance(value, int) or isinstance(value, bool) or db.session.get(User, value) is None:
        raise NotFound("user")
    return value


def _budget(budget_id: int) -> Budget:
    """The budget the signed-in user may change: their own unless an administrator set it;
    an administrator may change any."""
    if g.user.is_admin:
        budget = db.session.get(Budget, budget_id)
        if budget is None:
            raise NotFound("budget")
        return budget
    budget = budgets.get_budget(g.user.id, budget_id)
    if budget.managed_by is not None:
        raise _admin_only()
    return budget


@bp.get("/api/budgets")
def list_budgets():
    owner = _owner(request.args.get("user_id", type=int))
    return jsonify(budgets=budgets.shown(owner))


@bp.post("/api/budgets")
def create_budget():
    data = request_data()
    owner = _owner(data.get("user_id"))
    # The period is in the user's time zone: the body's, else the browser's header.
    zone = request.headers.get("X-Timezone") or request.headers.get("Timezone")
    budget = budgets.create_budget(
        owner, data, zone, managed_by=g.user.id if owner != g.user.id else None
    )
    return jsonify(budgets.state(budget)), 201


@bp.patch("/api/budgets/<int:budget_id>")
def update_budget(budget_id: int):
    budget = _budget(budget_id)
    budgets.update_budget(budget.user_id, budget, request_data())
    return jsonify(budgets.state(budget))


@bp.delete("/api/budgets/<int:budget_id>")
def delete_budget(budget_id: int):
    budgets.delete_budget(_budget(budget_id))
    return jsonify(ok=True)


# --- The Usage page's forms ------------------------------------------------------------------

# `budget_period`: the page's own `period` is its report's.
FORM_FIELDS = ("applies_to", "budget_period", "unit", "soft_cap", "hard_cap", "timezone")


def _from_form(form: dict[str, str]) -> dict[str, Any]:
    """A form's fields as the API's: "For" names the scope and its project or endpoint."""
    scope, _, target = (form.get("applies_to") or "").partition(":")
    data: dict[str, Any] = {name: form.get(name, "") for name in ("unit", "soft_cap", "hard_cap")}
    data["scope"], data["period"] = scope, form.get("budget_period", "")
    if form.get("timezone"):
        data["timezone"] = form["timezone"]
    if scope in ("project", "endpoint"):
        # Not a number: the id nobody has, refused as any foreign one.
        data[f"{scope}_id"] = int(target) if target.isdigit() else -1
    return data


def _form_answer(change, *, editing: int | None = None):
    """Run `change()`; answer the budgets section (HTMX) or go back to Usage. A refused
    change shows its message next to the form it came from, with what was typed kept."""
    status = 200
    error = None
    try:
        change()
    except NumiError as exc:
        form = {name: request.form.get(name, "") for name in FORM_FIELDS}
        error = {"code": exc.code, "message": exc.message, "form": form, "editing": editing}
        status = exc.status
    if not is_htmx():
        if error is None:
            return redirect(url_for("usage.usage_page"), code=303)
        return usage_page_with(status, budget_error=error)
    return render_template(
        "partials/_usage_budgets.html", budget_error=error, **section_context(g.user.id)
    ), status


@bp.post("/usage/budgets")
def add_budget_form():
    zone = request.form.get("timezone") or None
    return _form_answer(lambda: budgets.create_budget(g.user.id, _from_form(request.form), zone))


@bp.post("/usage/budgets/<int:budget_id>")
def edit_budget_form(budget_id: int):
    budget = _budget(budget_id)
    return _form_answer(
        lambda: budgets.update_budget(budget.user_id, budget, _from_form(request.form)),
        editing=budget.id,
    )


@bp.post("/usage/budgets/<int:budget_id>/delete")
def delete_budget_form(budget_id: int):
    budget = _budget(budget_id)
    return _form_answer(lambda: budgets.delete_budget(budget))
