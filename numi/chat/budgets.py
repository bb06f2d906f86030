"""Budgets: the user's caps per user, project or endpoint, checked and listed with their state.

`GET|POST /api/budgets` and `PATCH|DELETE /api/budgets/<id>` (numi/web/budgets.py) come
here; the reservations that enforce the hard cap are in `budget_ledger`. Every query is
scoped to the owner; a project or endpoint the user cannot use is refused with its code.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import select

from ..endpoints import get_endpoint
from ..errors import NotFound, NumiError, invalid
from ..extensions import db
from ..models import Budget, BudgetPeriod, Chat, ModelPrice, get_owned, utcnow
from .budget_ledger import applicable, describe, period_bounds, scope_label, unpriced
from .projects import chosen_project

SCOPES = ("user", "project", "endpoint")
PERIODS = ("day", "week", "month")
UNITS = ("money", "tokens")
MAX_CAP = 1e12
FIELDS = (
    "scope",
    "project_id",
    "endpoint_id",
    "period",
    "timezone",
    "unit",
    "soft_cap",
    "hard_cap",
)


def list_budgets(user_id: int) -> list[Budget]:
    return list(
        db.session.execute(
            select(Budget).where(Budget.user_id == user_id).order_by(Budget.id)
        ).scalars()
    )


def get_budget(user_id: int, budget_id: Any) -> Budget:
    """The user's budget `budget_id`, or NotFound."""
    return get_owned(Budget, budget_id, user_id, "budget")


def create_budget(
    user_id: int, data: dict[str, Any], timezone: str | None, *, managed_by: int | None = None
) -> Budget:
    """A new budget of `user_id` from checked fields; its period starts now. `managed_by`:
    the administrator who sets it for that user."""
    fields = _checked(user_id, {"timezone": timezone or "UTC", "period": "month", **data})
    start, _ = period_bounds(fields["period"], fields["timezone"], utcnow())
    budget = Budget(
        user_id=user_id,
        period_start=start,
        spent=0.0,
        reserved=0.0,
        managed_by=managed_by,
        **fields,
    )
    db.session.add(budget)
    db.session.commit()
    return budget


def update_budget(user_id: int, budget: Budget, data: dict[str, Any]) -> Budget:
    """Change a budget's fields (all checked together, as the budget would be after)."""
    current = {name: getattr(budget, name) for name in FIELDS}
    fields = _checked(user_id, {**current, **data})
    if (fields["period"], fields["timezone"]) != (budget.period, budget.timezone):
        budget.period_start, _ = period_bounds(fields["period"], fields["timezone"], utcnow())
    if fields["unit"] != budget.unit:
        budget.spent = 0.0  # money and tokens do not convert: the count starts again
    for name, value in fields.items():
        setattr(budget, name, value)
    db.session.commit()
    return budget


def delete_budget(budget: Budget) -> None:
    db.session.delete(budget)
    db.session.commit()


def _checked(user_id: int, data: dict[str, Any]) -> dict[str, Any]:
    unknown = set(data) - set(FIELDS) - {"id", "user_id"}
    if unknown:
        raise invalid(f"Unknown budget fields: {', '.join(sorted(unknown))}.", "unknown_field")
    scope, period, unit = data.get("scope"), data.get("period"), data.get("unit") or "money"
    for name, value, allowed in (
        ("scope", scope, SCOPES),
        ("period", period, PERIODS),
        ("unit", unit, UNITS),
    ):
        if value not in allowed:
            raise invalid(f"{name} must be one of: {', '.join(allowed)}.", "invalid_budget")
    timezone = data.get("timezone")
    try:
        ZoneInfo(timezone) if isinstance(timezone, str) and timezone else None
    except (ZoneInfoNotFoundError, ValueError):
        timezone = None
    if not isinstance(timezone, str) or not timezone:
        raise invalid(
            "timezone must be an IANA time zone such as Europe/Berlin.", "invalid_timezone"
        )
    soft, hard = _cap(data.get("soft_cap"), "soft_cap"), _cap(data.get("hard_cap"), "hard_cap")
    if soft is None and hard is None:
        raise invalid("Give a soft cap, a hard cap or both.", "invalid_budget_cap")
    if soft is not None and hard is not None and soft > hard:
        raise invalid("The soft cap must not be above the hard cap.", "invalid_budget_cap")
    project_id = endpoint_id = None
    if scope == "project":
        project_id = chosen_project(user_id, data.get("project_id")).id
    elif scope == "endpoint":
        endpoint_id = _endpoint(user_id, data.get("endpoint_id"))
    if unit == "money":
        missing = _unpriced_models(user_id, project_id, endpoint_id)
        if missing:
            raise unpriced(missing)
    return {
        "scope": scope,
        "project_id": project_id,
        "endpoint_id": endpoint_id,
        "period": period,
        "timezone": timezone,
        "unit": unit,
        "soft_cap": soft,
        "hard_cap": hard,
    }


def _cap(value: Any, name: str) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise invalid(f"{name} must be a number above zero.", "invalid_budget_cap")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise invalid(f"{name} must be a number above zero.", "invalid_budget_cap") from None
    if not 0 < number <= MAX_CAP:  # also refuses NaN
        raise invalid(f"{name} must be a number above zero.", "invalid_budget_cap")
    return number


def _endpoint(user_id: int, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise NumiError("unknown_endpoint", "No such endpoint.", 404)
    try:
        return get_endpoint(user_id, value).id
    except NotFound:
        raise NumiError("unknown_endpoint", "No such endpoint.", 404) from None


def _unpriced_models(user_id: int, project_id: int | None, endpoint_id: int | None) -> list[str]:
    """The models the scope's chats answer with that have no price: a money budget could
    not count them."""
    conditions = [Chat.user_id == user_id, Chat.deleted_at.is_(None), Chat.model.is_not(None)]
    if project_id is not None:
        conditions.append(Chat.project_id == project_id)
    if endpoint_id is not None:
        conditions.append(Chat.endpoint_id == endpoint_id)
    used = set(db.session.execute(select(Chat.model).where(*conditions)).scalars())
    priced = set(
        db.session.execute(select(ModelPrice.model).where(ModelPrice.user_id == user_id)).scalars()
    )
    return sorted(m for m in used - priced if m)


def state(budget: Budget, now: datetime | None = None) -> dict[str, Any]:
    """A budget as the API and the Usage page show it: what it used this period (settled
    and held), its share of the caps, `ok`/`warning`/`exceeded`, and when it resets."""
    start, end = period_bounds(budget.period, budget.timezone, now or utcnow())
    current = budget.period_start == start
    used = (budget.spent + budget.reserved) if current else 0.0
    cap = budget.hard_cap or budget.soft_cap or 0.0
    status = "ok"
    if budget.hard_cap is not None and used >= budget.hard_cap:
        status = "exceeded"
    elif budget.soft_cap is not None and used >= budget.soft_cap:
        status = "warning"
    return {
        "id": budget.id,
        "scope": budget.scope,
        "project_id": budget.project_id,
        "endpoint_id": budget.endpoint_id,
        "label": scope_label(budget),
        "description": describe(budget),
        "period": budget.period,
        "timezone": budget.timezone,
        "unit": budget.unit,
        "soft_cap": budget.soft_cap,
        "hard_cap": budget.hard_cap,
        "spent": round(budget.spent if current else 0.0, 6),
        "reserved": round(budget.reserved if current else 0.0, 6),
        "percent": round(100 * used / cap) if cap else 0,
        "state": status,
        "period_start": start.isoformat() + "Z",
        "resets_at": end.isoformat() + "Z",
        "user_id": budget.user_id,
        "set_by_admin": budget.managed_by is not None,
    }


HISTORY_PERIODS = 12


def shown(user_id: int) -> list[dict[str, Any]]:
    """The user's budgets with their state and history, as the API and Usage show them."""
    return [{**state(b), "history": history(b)} for b in list_budgets(user_id)]


def history(budget: Budget, now: datetime | None = None) -> list[dict[str, Any]]:
    """A budget's last periods, the current one first: what each spent, and how many sends
    it refused or moved to another route of their fallback chain."""
    start, _ = period_bounds(budget.period, budget.timezone, now or utcnow())
    rows = {
        row.period_start: row
        for row in db.session.execute(
            select(BudgetPeriod)
            .where(BudgetPeriod.budget_id == budget.id)
            .order_by(BudgetPeriod.period_start.desc())
            .limit(HISTORY_PERIODS)
        ).scalars()
    }
    current = budget.spent if budget.period_start == start else 0.0
    periods = []
    for period_start in sorted({start, *rows}, reverse=True)[:HISTORY_PERIODS]:
        row = rows.get(period_start)
        # The current period's spending is the budget's own, kept up to date; an ended
        # period's was written into its row when the next began.
        spent = current if period_start == start else (row.spent if row else 0.0)
        periods.append(
            {
                "period_start": period_start.isoformat() + "Z",
                "label": _period_label(budget, period_start),
                "current": period_start == start,
                "spent": round(spent, 6),
                "refused": row.refused if row is not None else 0,
                "rerouted": row.rerouted if row is not None else 0,
            }
        )
    return periods


def _period_label(budget: Budget, period_start: datetime) -> str:
    """A period in the budget's time zone: "6 Dec 2026", "Week of 30 Nov 2026", "Dec 2026"."""
    local = period_start.replace(tzinfo=ZoneInfo("UTC")).astimezone(ZoneInfo(budget.timezone))
    if budget.period == "month":
        return local.strftime("%b %Y")
    day = f"{local.day} {local.strftime('%b %Y')}"
    return f"Week of {day}" if budget.period == "week" else day


def warnings(user_id: int, project_id: int | None, endpoint_id: int | None) -> list[str]:
    """The lines the context panel and the composer show for a chat's budgets past their soft
    cap (or at their hard cap): "83 % of this month's budget for OpenRouter"."""
    lines = []
    for budget in applicable(user_id, project_id, endpoint_id):
        now = state(budget)
        if now["state"] == "warning":
            lines.append(f"{now['percent']} % of {now['description']}")
        elif now["state"] == "exceeded":
            lines.append(f"The hard cap of {now['description']} is reached: sends are refused.")
    return lines
