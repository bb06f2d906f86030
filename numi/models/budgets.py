"""Budgets (issue 41): a cap on what a user, a project or an endpoint spends per period.

A budget counts in money (from the user's model prices) or in tokens. `spent` is what the
turns of the current period settled; `reserved` is what running turns hold: a turn
reserves its estimate with a conditional UPDATE before anything leaves and settles its real
usage at its end (numi/chat/budgets.py). `period_start` is the start of the current period
in the budget's time zone, stored as naive UTC like every time; a reservation made after
it ends starts the next period (spent and reserved back to zero), and the period that
ended is kept in `budget_periods` for the Usage page's history.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .columns import IDS_NEVER_REUSED, utcnow


class Budget(db.Model):
    __tablename__ = "budgets"
    __table_args__ = (IDS_NEVER_REUSED,)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    scope: Mapped[str] = mapped_column(String(16))  # user | project | endpoint
    project_id: Mapped[int | None] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    endpoint_id: Mapped[int | None] = mapped_column(ForeignKey("endpoints.id", ondelete="CASCADE"))
    period: Mapped[str] = mapped_column(String(16))  # day | week | month
    timezone: Mapped[str] = mapped_column(String(64))
    unit: Mapped[str] = mapped_column(String(16))  # money | tokens
    soft_cap: Mapped[float | None] = mapped_column(Float)
    hard_cap: Mapped[float | None] = mapped_column(Float)
    period_start: Mapped[datetime] = mapped_column()
    spent: Mapped[float] = mapped_column(Float, default=0.0)
    reserved: Mapped[float] = mapped_column(Float, default=0.0)
    # The administrator who set this budget for the user (multi-user mode): only an
    # administrator may change or remove it. NULL: the user's own.
    managed_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class BudgetPeriod(db.Model):
    """A budget's history, one row per period that had something to tell: what it spent
    (written when the next period starts; the current period's is the budget's `spent`),
    and how many sends it refused or moved to another route of their fallback chain."""

    __tablename__ = "budget_periods"
    __table_args__ = (UniqueConstraint("budget_id", "period_start"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    budget_id: Mapped[int] = mapped_column(ForeignKey("budgets.id", ondelete="CASCADE"))
    period_start: Mapped[datetime] = mapped_column()
    spent: Mapped[float] = mapped_column(Float, default=0.0)
    refused: Mapped[int] = mapped_column(Integer, default=0)
    rerouted: Mapped[int] = mapped_column(Integer, default=0)
