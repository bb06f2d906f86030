"""Token usage per chat or per model over a period, and the prices that turn it into cost.

The counts come from the answers' stored metrics: `messages.input_tokens`/`output_tokens`
(and `model`), copied from each answer's meta when it is saved (`Message.meta`), so the
sums run in the database on both backends. Every answer counts, including regenerated
versions, deleted messages and deleted chats: those tokens were spent. Days are UTC days,
as every stored time is UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from sqlalchemy import func, literal, or_, select

from ..errors import invalid
from ..extensions import db
from ..models import ApiKey, ApiRequest, Chat, Message, ModelPrice, utcnow

PERIODS = ("today", "7d", "30d", "all")
GROUPS = ("chat", "model", "key")
MAX_PRICE = 1_000_000.0
UNKNOWN_MODEL = "(unknown model)"


@dataclass
class UsageRow:
    key: str | None  # the chat id or the model name
    label: str
    input_tokens: int = 0
    output_tokens: int = 0
    answers: int = 0
    cost: float | None = None  # None: no price is known for any of its models
    cached_tokens: int = 0  # input tokens read from a provider's prompt cache
    saved: float | None = None  # what those cost less than the input price
    deleted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "answers": self.answers,
            "cost": None if self.cost is None else round(self.cost, 6),
            "cached_tokens": self.cached_tokens,
            "saved": None if self.saved is None else round(self.saved, 6),
            "deleted": self.deleted,
        }


@dataclass
class UsageReport:
    group: str
    period: str
    start: date | None
    end: date | None  # inclusive
    rows: list[UsageRow] = field(default_factory=list)
    total: UsageRow = field(default_factory=lambda: UsageRow(None, "Total"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "period": self.period,
            "from": self.start.isoformat() if self.start else None,
            "to": self.end.isoformat() if self.end else None,
            "rows": [r.to_dict() for r in self.rows],
            "total": self.total.to_dict(),
        }


def parse_period(
    period: str | None, start: str | None, end: str | None
) -> tuple[str, date | None, date | None]:
    """(period name, first day, last day) from `period` or from/to dates (YYYY-MM-DD)."""
    if start or end:
        first, last = _day(start, "from"), _day(end, "to")
        if first and last and first > last:
            raise invalid("from must not be after to.", "invalid_period")
        return "custom", first, last
    period = period or "30d"
    if period not in PERIODS:
        raise invalid(
            f"period must be one of: {', '.join(PERIODS)} (or give from/to dates).",
            "invalid_period",
        )
    today = utcnow().date()
    days = {"today": 0, "7d": 6, "30d": 29}.get(period)
    return (
        period,
        (None if days is None else today - timedelta(days=days)),
        (None if days is None else today),
    )


def _day(value: str | None, name: str) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise invalid(f"{name} must be a date like 2026-01-31.", "invalid_period") from None


def usage_report(
    user_id: int, *, group: str, period: str, start: date | None, end: date | None
) -> UsageReport:
    """The user's token sums by chat or by model (one grouped query), priced where a price is set."""
    if group not in GROUPS:
        raise invalid(f"group must be one of: {', '.join(GROUPS)}.", "invalid_group")
    if group == "key":
        return _key_report(user_id, period, start, end)
    conditions = [
        Chat.user_id == user_id,
        Message.role == "assistant",
        or_(Message.input_tokens.is_not(None), Message.output_tokens.is_not(None)),
    ]
    if start is not None:
        conditions.append(Message.created_at >= datetime.combine(start, time.min))
    if end is not None:
        conditions.append(Message.created_at < datetime.combine(end + timedelta(days=1), time.min))
    sums = (
        func.coalesce(func.sum(Message.input_tokens), 0).label("tokens_in"),
        func.coalesce(func.sum(Message.output_tokens), 0).label("tokens_out"),
        func.count().label("answers"),
        func.coalesce(func.sum(Message.cached_tokens), 0).label("tokens_cached"),
    )
    # By chat the model is kept in the grouping too: each model has its own price.
    keys = (
        (Chat.id, Chat.title, Chat.deleted_at.is_not(None).label("deleted"), Message.model)
        if group == "chat"
        else (Message.model,)
    )
    rows = db.session.execute(
        select(*keys, *sums)
        .join(Chat, Chat.id == Message.chat_id)
        .where(*conditions)
        .group_by(*keys)
    ).all()
    prices = model_prices(user_id)
    report = UsageReport(group, period, start, end)
    by_key: dict[Any, UsageRow] = {}
    for row in rows:
        model = row.model or UNKNOWN_MODEL
        if group == "chat":
            item = by_key.setdefault(row.id, UsageRow(row.id, row.title, deleted=bool(row.deleted)))
        else:
            item = by_key.setdefault(model, UsageRow(row.model, model))
        _add(item, row, prices.get(row.model or ""))
        _add(report.total, row, prices.get(row.model or ""))
    if group == "model":
        # API requests of keys that keep no chats have no answer row: counted from their own.
        for row in _api_rows(user_id, start, end, kept=False, by_key=False):
            model = row.model or UNKNOWN_MODEL
            item = by_key.setdefault(model, UsageRow(row.model, model))
            _add(item, row, prices.get(row.model or ""))
            _add(report.total, row, prices.get(row.model or ""))
    report.rows = sorted(
        by_key.values(), key=lambda r: (-(r.input_tokens + r.output_tokens), r.label)
    )
    return report


def _api_rows(user_id: int, start: date | None, end: date | None, *, kept: bool, by_key: bool):
    """Sums of the user's /v1 requests (numi/gateway) by model, and by key when `by_key`;
    `kept` False: only those kept in no chat."""
    conditions = [ApiRequest.user_id == user_id]
    if not kept:
        conditions.append(ApiRequest.chat_id.is_(None))
    if start is not None:
        conditions.append(ApiRequest.created_at >= datetime.combine(start, time.min))
    if end is not None:
        conditions.append(
            ApiRequest.created_at < datetime.combine(end + timedelta(days=1), time.min)
        )
    keys = (ApiKey.id, ApiKey.name, ApiRequest.model) if by_key else (ApiRequest.model,)
    query = select(
        *keys,
        func.coalesce(func.sum(ApiRequest.input_tokens), 0).label("tokens_in"),
        func.coalesce(func.sum(ApiRequest.output_tokens), 0).label("tokens_out"),
        func.count().label("answers"),
        # /v1 requests keep no cache count of their own (yet): the same columns as a chat's.
        literal(0).label("tokens_cached"),
    )
    if by_key:
        query = query.join(ApiKey, ApiKey.id == ApiRequest.key_id)
    return db.session.execute(query.where(*conditions).group_by(*keys)).all()


def _key_report(user_id: int, period: str, start: date | None, end: date | None) -> UsageReport:
    """Tokens per API key (each request, kept or not), priced per model."""
    prices = model_prices(user_id)
    report = UsageReport("key", period, start, end)
    by_key: dict[Any, UsageRow] = {}
    for row in _api_rows(user_id, start, end, kept=True, by_key=True):
        item = by_key.setdefault(row.id, UsageRow(str(row.id), row.name))
        _add(item, row, prices.get(row.model or ""))
        _add(report.total, row, prices.get(row.model or ""))
    report.rows = sorted(
        by_key.values(), key=lambda r: (-(r.input_tokens + r.output_tokens), r.label)
    )
    return report


def _add(item: UsageRow, row, price: ModelPrice | None) -> None:
    item.input_tokens += int(row.tokens_in)
    item.output_tokens += int(row.tokens_out)
    item.answers += int(row.answers)
    item.cached_tokens += int(row.tokens_cached)
    if price is not None and row.tokens_cached:
        saved = int(row.tokens_cached) / 1e6 * price.input_per_mtok * cache_discount(row.model)
        item.saved = (item.saved or 0.0) + saved
    if price is not None:
        cost = (
            int(row.tokens_in) / 1e6 * price.input_per_mtok
            + int(row.tokens_out) / 1e6 * price.output_per_mtok
        )
        item.cost = (item.cost or 0.0) + cost


def cache_discount(model: str) -> float:
    """The share of the input price a cached token does not cost: Anthropic bills a cache
    read at a tenth of the input price, OpenAI (and most compatible servers) at half."""
    return 0.9 if "claude" in model.lower() else 0.5


def model_prices(user_id: int) -> dict[str, ModelPrice]:
    rows = db.session.execute(
        select(ModelPrice).where(ModelPrice.user_id == user_id).order_by(ModelPrice.model)
    )
    return {p.model: p for p in rows.scalars()}


def used_models(user_id: int) -> list[str]:
    """Models the user's answers name, for the price form (one grouped query)."""
    rows = db.session.execute(
        select(Message.model)
        .join(Chat, Chat.id == Message.chat_id)
        .where(Chat.user_id == user_id, Message.model.is_not(None))
        .group_by(Message.model)
        .order_by(Message.model)
    ).scalars()
    return list(rows)


def set_price(
    user_id: int, model: Any, input_per_mtok: Any, output_per_mtok: Any
) -> ModelPrice | None:
    """Set (or, with both prices empty, remove) the user's price per million tokens for `model`."""
    if not isinstance(model, str) or not model.strip() or len(model) > 200:
        raise invalid("model must be a model name of at most 200 characters.")
    model = model.strip()
    existing = db.session.execute(
        select(ModelPrice).where(ModelPrice.user_id == user_id, ModelPrice.model == model)
    ).scalar_one_or_none()
    if input_per_mtok in (None, "") and output_per_mtok in (None, ""):
        if existing is not None:
            db.session.delete(existing)
            db.session.commit()
        return None
    price_in, price_out = (
        _price(input_per_mtok, "input_per_mtok"),
        _price(output_per_mtok, "output_per_mtok"),
    )
    if existing is None:
        existing = ModelPrice(user_id=user_id, model=model)
        db.session.add(existing)
    existing.input_per_mtok, existing.output_per_mtok = price_in, price_out
    db.session.commit()
    return existing


def _price(value: Any, name: str) -> float:
    if value in (None, ""):
        return 0.0
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise invalid(
            f"{name} must be a number (a price per million tokens).", "invalid_price"
        ) from None
    if isinstance(value, bool) or not 0 <= number <= MAX_PRICE or number != number:
        raise invalid(f"{name} must be between 0 and {MAX_PRICE:,.0f}.", "invalid_price")
    return number
