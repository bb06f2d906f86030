"""Usage: tokens in and out per chat or per model over a period, and per-model prices.

GET  /usage                  the Usage page (HTMX: the report alone)
POST /usage/prices           set or clear a model's price (form)
GET  /api/usage?period=today|7d|30d|all&from=&to=&group=chat|model
GET  /api/usage/prices       the user's prices
POST /api/usage/prices       {model, input_per_mtok, output_per_mtok} (both empty: remove)
"""

from __future__ import annotations

from flask import Blueprint, g, jsonify, redirect, render_template, request, url_for

from ..chat import budgets, usage
from ..chat.projects import list_projects
from ..endpoints import list_endpoints
from .inputs import request_data
from .request_kind import is_htmx

bp = Blueprint("usage", __name__)


def _report() -> usage.UsageReport:
    # request.values: the query string, or the filter fields a price form carries along.
    values = request.values
    period, start, end = usage.parse_period(
        values.get("period"), values.get("from"), values.get("to")
    )
    return usage.usage_report(
        g.user.id, group=values.get("group") or "chat", period=period, start=start, end=end
    )


def section_context(user_id: int) -> dict:
    """What the budgets section shows (its forms are numi/web/budgets.py): the budgets with
    their state and history, and what a budget may be for."""
    return {
        "budgets": budgets.shown(user_id),
        "budget_projects": list_projects(user_id),
        "budget_endpoints": list_endpoints(user_id),
    }


def _page_context(report: usage.UsageReport, **extra) -> dict:
    prices = usage.model_prices(g.user.id)
    models = sorted(set(usage.used_models(g.user.id)) | set(prices))
    return {
        "report": report,
        "prices": prices,
        "price_models": models,
        "periods": usage.PERIODS,
        **section_context(g.user.id),
        **extra,
    }


@bp.get("/usage")
def usage_page():
    report = _report()
    if is_htmx() and request.headers.get("HX-Target") == "usage-report":
        return render_template("partials/_usage_report.html", report=report)
    return render_template("usage.html", **_page_context(report))


def usage_page_with(status: int, **extra):
    """The whole Usage page with `extra` (a refused budget form's error, without scripts)."""
    return render_template("usage.html", **_page_context(_report(), **extra)), status


@bp.post("/usage/prices")
def usage_price_form():
    data = request_data()
    usage.set_price(
        g.user.id, data.get("model"), data.get("input_per_mtok"), data.get("output_per_mtok")
    )
    if is_htmx():
        report = _report()
        return render_template(
            "partials/_usage_body.html", **_page_context(report, saved=data.get("model"))
        )
    return redirect(url_for("usage.usage_page"), code=303)


@bp.get("/api/usage")
def usage_json():
    return jsonify(_report().to_dict())


@bp.get("/api/usage/prices")
def prices_json():
    return jsonify(prices=[p.to_dict() for p in usage.model_prices(g.user.id).values()])


@bp.post("/api/usage/prices")
def set_price_json():
    data = request_data()
    price = usage.set_price(
        g.user.id, data.get("model"), data.get("input_per_mtok"), data.get("output_per_mtok")
    )
    return jsonify(price=price.to_dict() if price else None)
