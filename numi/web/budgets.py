"""Budgets' JSON API (issue 41); the Usage page lists them with their state.

GET    /api/budgets[?user_id=]  the user's budgets and their state (an administrator: any user's)
POST   /api/budgets             {scope, project_id|endpoint_id, period, unit, soft_cap, hard_cap,
                                timezone, user_id (an administrator, for another user)}
PATCH  /api/budgets/<id>        any of those fields
DELETE /api/budgets/<id>

A budget an administrator set for a user is theirs to change: the user sees it and is held
to it, and only an administrator may change or remove it (`admin_only`).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, jsonify, request

from ..chat import budgets
from ..errors import NotFound, NumiError
from ..extensions import db
from ..models import Budget, User
from .inputs import request_data

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
    return jsonify(budgets=[budgets.state(b) for b in budgets.list_budgets(owner)])


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
