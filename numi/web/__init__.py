"""The web layer: blueprints for pages (HTML), api (JSON/SSE), ws (WebSocket) and auth."""

from __future__ import annotations

from flask import Flask


def register(app: Flask) -> None:
    """Register blueprints, request guards, error handlers and template helpers."""
    from . import api, auth, errors, pages, security, streams, transfer, ws
    from ..render import render_markdown

    security.init_app(app)
    errors.init_app(app)
    app.register_blueprint(auth.bp)
    app.register_blueprint(pages.bp)
    app.register_blueprint(api.bp)
    app.register_blueprint(streams.bp)
    app.register_blueprint(transfer.bp)
    app.register_blueprint(ws.bp)
    from ..endpoints import model_capabilities

    app.jinja_env.filters["markdown"] = render_markdown
    app.jinja_env.globals["model_capabilities"] = model_capabilities
    app.jinja_env.globals["asset_version"] = "1"
