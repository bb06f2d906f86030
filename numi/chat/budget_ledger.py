"""A budget's ledger: its periods, and the reservations that keep concurrent turns under it.

A turn reserves its estimate on every budget that applies (the user's, its chat's project's,
its route's endpoint's) in one short transaction before anything leaves, with a conditional
UPDATE per budget (`WHERE spent + reserved < hard_cap`): whichever turns run at once, each
one sees the others' reservations, so together they overshoot a hard cap by at most one
turn's estimate (PostgreSQL re-reads the row after a concurrent commit; SQLite writes one
at a time). The turn settles its real usage at its end, again in one short transaction;
nothing is held while the provider streams.

What a period spent is kept when the next one starts, with the sends each budget refused
or moved to another route of their chain (`budget_periods`): the Usage page's history.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import bindparam, case, func, or_, select, update
from sqlalchemy.exc import IntegrityError

from ..errors import NumiError
from ..extensions import db
from ..models import Budget, BudgetPeriod, Endpoint, Message, ModelPrice, Project, utcnow
from .token_estimate import text_tokens

log = logging.getLogger(__name__)

PERIOD_WORDS = {"day": "today's", "week": "this week's", "month": "this month's"}


def period_bounds(period: str, timezone: str, now: datetime) -> tuple[datetime, datetime]:
    """The current period's start and end as naive UTC: a day, a week from Monday or a
    month, each from midnight in the budget's time zone."""
    zone = ZoneInfo(timezone)
    local = now.replace(tzinfo=ZoneInfo("UTC")).astimezone(zone)
    day = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        start, end = day, day + timedelta(days=1)
    elif period == "week":
        start = day - timedelta(days=day.weekday())
        end = start + timedelta(days=7)
    else:
        start = day.replace(day=1)
        end = (start + timedelta(days=32)).replace(day=1)
    # Re-anchored at midnight: a daylight-saving change within the period moves the offset.
    start, end = (
        datetime(t.year, t.month, t.day, tzinfo=zone).astimezone(ZoneInfo("UTC"))
        for t in (start, end)
    )
    return start.replace(tzinfo=None), end.replace(tzinfo=None)


def scope_label(budget: Budget) -> str:
    """What a budget is for, in words: "OpenRouter", "project Thesis", "your account"."""
    if budget.scope == "endpoint" and budget.endpoint_id is not None:
        endpoint = db.session.get(Endpoint, budget.endpoint_id)
        return endpoint.name if endpoint is not None else "an endpoint"
    if budget.scope == "project" and budget.project_id is not None:
        project = db.session.get(Project, budget.project_id)
        return f"project {project.name}" if project is not None else "a project"
    return "your account"


def describe(budget: Budget) -> str:
    """ "this month's budget for OpenRouter"."""
    return f"{PERIOD_WORDS[budget.period]} budget for {scope_label(budget)}"


class BudgetExceeded(NumiError):
    """A `budget_exceeded` refusal, carrying its budget and period for the budget's history."""

    budget_id: int
    period_start: datetime


def budget_exceeded(budget: Budget, period_start: datetime, resets_at: datetime) -> BudgetExceeded:
    """The refusal of a send whose budget's hard cap is reached: which budget, and when it resets."""
    error = BudgetExceeded(
        "budget_exceeded",
        f"The hard cap of {describe(budget)} is reached; nothing was sent. "
        f"It resets at {resets_at.isoformat(timespec='minutes')} UTC.",
        429,
    )
    error.budget_id, error.period_start = budget.id, period_start
    return error


def unpriced(models: list[str]) -> NumiError:
    """The refusal of a money budget (or a send under one) for models without a price."""
    return NumiError(
        "budget_unpriced",
        "A money budget needs a price for every model it covers; no price is set for: "
        + ", ".join(sorted(models))
        + " (Usage → Prices).",
        400,
    )


# Built once: every turn asks (issue 45), and building an ORM select with its `or_` and
# `in_` cost as much as running it. No project matches no row (`= NULL`); no endpoints
# makes the expanding `IN` an empty set.
_APPLICABLE = (
    select(Budget)
    .where(
        Budget.user_id == bindparam("user_id"),
        or_(
            Budget.scope == "user",
            (Budget.scope == "project") & (Budget.project_id == bindparam("project_id")),
            (Budget.scope == "endpoint")
            & Budget.endpoint_id.in_(bindparam("endpoint_ids", expanding=True)),
        ),
    )
    .order_by(Budget.id)
)


def applicable(
    user_id: int, project_id: int | None, endpoint_id: int | None, *more_endpoints: int
) -> list[Budget]:
    """The user's budgets that a turn of this project and endpoint(s) counts against."""
    endpoints = [e for e in (endpoint_id, *more_endpoints) if e is not None]
    params = {"user_id": user_id, "project_id": project_id, "endpoint_ids": endpoints}
    return list(db.session.execute(_APPLICABLE, params).scalars())


def amount(
    budget: Budget, price: ModelPrice | None, input_tokens: int, output_tokens: int
) -> float:
    """What tokens count against the budget: the tokens, or their price."""
    if budget.unit == "tokens":
        return float(input_tokens + output_tokens)
    if price is None:
        return 0.0
    return (input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok) / 1e6


def _price(user_id: int, model: str) -> ModelPrice | None:
    return db.session.execute(
        select(ModelPrice).where(ModelPrice.user_id == user_id, ModelPrice.model == model)
    ).scalar_one_or_none()


def estimate_tokens(chat_id: str, message: str, output_allowance: int) -> tuple[int, int]:
    """A turn's estimated (input, output) tokens: the last answer's request and answer (what
    the history carries now), the new question, and an allowance for the answer."""
    last = db.session.execute(
        select(Message.input_tokens, Message.output_tokens)
        .where(Message.chat_id == chat_id, Message.role == "assistant")
        .order_by(Message.id.desc())
        .limit(1)
    ).first()
    history = ((last.input_tokens or 0) + (last.output_tokens or 0)) if last else 0
    return history + text_tokens(message), output_allowance


@dataclass
class Reservation:
    """What a turn holds on its budgets until it settles."""

    user_id: int
    chat_id: str
    after_message_id: int  # the turn's answers are the chat's assistant messages after it
    held: list[tuple[int, datetime, float]] = field(default_factory=list)  # id, period, amount


def covers(budget: Budget, endpoint_id: int | None) -> bool:
    """Whether usage on `endpoint_id` counts against the budget."""
    return budget.scope != "endpoint" or budget.endpoint_id == endpoint_id


def reserve(
    user_id: int,
    chat_id: str,
    project_id: int | None,
    routes: list[tuple[int, str]],
    tokens: tuple[int, int] | Callable[[], tuple[int, int]],
    *,
    rerouted: bool = False,
    end_read: bool = True,
) -> Reservation | None:
    """Reserve a turn's estimate on each budget that applies, all or none, in one short
    transaction: once per (endpoint_id, model) in `routes` (a compare turn's lanes; else
    one). Raises `budget_exceeded` (a hard cap reached) or `budget_unpriced` (a money
    budget and a model without a price); None when no budget applies (`tokens`, the
    (input, output) estimate, may be a function: called only then). Then nothing was
    written, and with `end_read` False the read transaction is left to the caller's next
    commit (a turn's question save follows at once). A refusal counts in
    the refusing budget's history as a send refused, or with `rerouted` (the caller tries
    the next route of a chain) as one moved to another route."""
    budgets = applicable(user_id, project_id, *[endpoint for endpoint, _ in routes])
    if not budgets:
        if end_read:
            db.session.commit()
        return None
    if callable(tokens):  # estimated only when a budget applies: most turns have none
        tokens = tokens()
    prices = {model: _price(user_id, model) for _, model in routes}
    last_id = db.session.execute(
        select(func.max(Message.id)).where(Message.chat_id == chat_id)
    ).scalar()
    held = Reservation(user_id, chat_id, last_id or 0)
    now = utcnow()
    try:
        for budget in budgets:
            lanes = [(e, m) for e, m in routes if covers(budget, e)]
            if budget.unit == "money" and any(prices[m] is None for _, m in lanes):
                raise unpriced([m for _, m in lanes if prices[m] is None])
            start, end = period_bounds(budget.period, budget.timezone, now)
            if budget.period_start != start:
                # A new period: what the last one spent and held is its own, and is kept.
                ended, ended_spent = budget.period_start, budget.spent
                turned = db.session.execute(
                    update(Budget)
                    .where(Budget.id == budget.id, Budget.period_start == ended)
                    .values(period_start=start, spent=0.0, reserved=0.0)
                )
                if turned.rowcount == 1:
                    _add_to_period(budget.id, ended, spent=ended_spent)
            estimate = sum(amount(budget, prices[m], *tokens) for _, m in lanes)
            under_cap = (
                True
                if budget.hard_cap is None
                else Budget.spent + Budget.reserved < budget.hard_cap
            )
            taken = db.session.execute(
                update(Budget)
                .where(Budget.id == budget.id, Budget.period_start == start, under_cap)
                .values(reserved=Budget.reserved + estimate)
            )
            if taken.rowcount != 1:
                raise budget_exceeded(budget, start, end)
            held.held.append((budget.id, start, estimate))
        db.session.commit()
    except Exception as exc:
        db.session.rollback()
        if isinstance(exc, BudgetExceeded):
            _note_refusal(exc, rerouted)
        raise
    return held


def _add_to_period(
    budget_id: int,
    start: datetime,
    *,
    spent: float | None = None,
    refused: int = 0,
    rerouted: int = 0,
) -> None:
    """Add to a period's row of a budget's history (made if it is the period's first), in
    the caller's transaction; a row another process made meanwhile is added to instead."""
    values: dict = {}
    if spent is not None:
        values["spent"] = spent
    if refused:
        values["refused"] = BudgetPeriod.refused + refused
    if rerouted:
        values["rerouted"] = BudgetPeriod.rerouted + rerouted
    where = (BudgetPeriod.budget_id == budget_id, BudgetPeriod.period_start == start)
    if db.session.execute(update(BudgetPeriod).where(*where).values(**values)).rowcount:
        return
    try:
        with db.session.begin_nested():
            db.session.add(
                BudgetPeriod(
                    budget_id=budget_id,
                    period_start=start,
                    spent=spent or 0.0,
                    refused=refused,
                    rerouted=rerouted,
                )
            )
    except IntegrityError:
        db.session.execute(update(BudgetPeriod).where(*where).values(**values))


def _note_refusal(refusal: BudgetExceeded, rerouted: bool) -> None:
    """Count a refusal in its budget's history, in a short transaction of its own. The
    refusal stands if this fails (the budget deleted meanwhile, the database gone)."""
    try:
        _add_to_period(
            refusal.budget_id,
            refusal.period_start,
            refused=0 if rerouted else 1,
            rerouted=1 if rerouted else 0,
        )
        db.session.commit()
    except Exception:
        db.session.rollback()
        log.exception("budget %s: a refusal could not be noted", refusal.budget_id)


def settle(reservation: Reservation) -> None:
    """Replace the turn's reservations by what its answers used (their saved usage, priced
    per answer's model), in one short transaction."""
    rows = db.session.execute(
        select(Message.model, Message.input_tokens, Message.output_tokens, Message.meta_json).where(
            Message.chat_id == reservation.chat_id,
            Message.role == "assistant",
            Message.id > reservation.after_message_id,
        )
    ).all()
    settle_usage(
        reservation,
        [
            (r.model, _endpoint_of(r.meta_json), r.input_tokens or 0, r.output_tokens or 0)
            for r in rows
        ],
    )


def settle_usage(
    reservation: Reservation, usages: list[tuple[str | None, int | None, int, int]]
) -> None:
    """Replace the reservations by `usages`, (model, endpoint_id, input, output tokens) of
    each answer, in one short transaction: a turn's saved answers, or a /v1 call's answer
    (numi/gateway/spending.py), which saves no message."""
    prices: dict[str, ModelPrice | None] = {}
    for model, _endpoint, _in, _out in usages:
        if model and model not in prices:
            prices[model] = _price(reservation.user_id, model)
    try:
        for budget_id, start, estimate in reservation.held:
            budget = db.session.get(Budget, budget_id)
            if budget is None:
                continue  # deleted meanwhile
            used = sum(
                amount(budget, prices.get(model or ""), tokens_in, tokens_out)
                for model, endpoint_id, tokens_in, tokens_out in usages
                if covers(budget, endpoint_id)
            )
            same_period = db.session.execute(
                update(Budget)
                .where(Budget.id == budget_id, Budget.period_start == start)
                .values(
                    spent=Budget.spent + used,
                    reserved=case(
                        (Budget.reserved > estimate, Budget.reserved - estimate), else_=0.0
                    ),
                )
            )
            if same_period.rowcount != 1:
                # The period turned while the turn ran: its usage counts in the new one.
                db.session.execute(
                    update(Budget).where(Budget.id == budget_id).values(spent=Budget.spent + used)
                )
        db.session.commit()
    except Exception:
        db.session.rollback()
        raise


def _endpoint_of(meta_json: str | None) -> int | None:
    """The endpoint an answer came from (its meta says; a compare turn's lanes differ)."""
    try:
        value = json.loads(meta_json or "{}").get("endpoint_id")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None
