"""The web layer: blueprints for pages (HTML), api (JSON/SSE), ws (WebSocket) and auth."""

from __future__ import annotations

from flask import Flask


def register(app: Flask) -> None:
    """Register blueprints, request guards, error handlers and template helpers."""
    from .routing import LazyBuilderRule

    app.url_rule_class = LazyBuilderRule  # before any blueprint adds its rules
    from . import (
        access,
        api,
        assets,
        auth,
        errors,
        followups,
        inputs,
        installable,
        organising,
        pages,
        prompts,
        security,
        streams,
        transcript,
        transfer,
        ws,
    )
    from ..render import render_blocks, render_markdown

    security.init_app(app)
    assets.init_app(app)
    errors.init_app(app)
    app.before_request(inputs.check_query_values)
    app.register_blueprint(auth.bp)
    app.register_blueprint(access.bp)
    app.register_blueprint(installable.bp)
    app.register_blueprint(pages.bp)
    app.register_blueprint(organising.bp)
    app.register_blueprint(prompts.bp)
    app.register_blueprint(api.bp)
    app.register_blueprint(streams.bp)
    app.register_blueprint(followups.bp)
    app.register_blueprint(transfer.bp)
    app.register_blueprint(transcript.bp)
    app.register_blueprint(ws.bp)
    from . import integrations  # document search and MCP server settings

    app.register_blueprint(integrations.bp)
    integrations.init_app(app)
    from . import attachments as attachment_routes, context as context_routes

    app.register_blueprint(attachment_routes.bp)
    app.register_blueprint(context_routes.bp)
    from . import fallbacks as fallback_routes

    app.register_blueprint(fallback_routes.bp)
    from . import usage as usage_routes

    app.register_blueprint(usage_routes.bp)
    from . import artifacts as artifact_routes

    app.register_blueprint(artifact_routes.bp)
    from . import project_pages, projects as project_routes

    app.register_blueprint(project_routes.bp)
    app.register_blueprint(project_pages.bp)
    from . import temporary as temporary_routes

    app.register_blueprint(temporary_routes.bp)
    temporary_routes.init_app(app)
    from . import voice

    app.register_blueprint(voice.bp)
    from ..chat.attachments import human_size, template_attachments, template_checkpoints

    app.jinja_env.globals["message_attachments"] = template_attachments
    app.jinja_env.globals["chat_checkpoints"] = template_checkpoints
    app.jinja_env.filters["human_size"] = human_size
    from ..endpoints import capability_source_label, model_capabilities, reported_capabilities

    app.jinja_env.filters["markdown"] = render_markdown
    app.jinja_env.filters["markdown_blocks"] = render_blocks
    from .fragments import blocks_html

    app.jinja_env.filters["md_blocks_html"] = blocks_html
    from .message_render import long_question, message_html, past_cap

    app.jinja_env.globals["message_html"] = message_html
    app.jinja_env.globals["long_question"] = long_question
    app.jinja_env.globals["past_markdown_cap"] = past_cap
    app.jinja_env.globals["model_capabilities"] = model_capabilities
    from flask import before_render_template

    from .model_picker import forget_sent_lists, model_picker_html

    app.jinja_env.globals["model_picker_html"] = model_picker_html
    before_render_template.connect(forget_sent_lists, app)
    app.jinja_env.globals["reported_capabilities"] = reported_capabilities
    app.jinja_env.globals["capability_source_label"] = capability_source_label
    app.jinja_env.globals["asset_version"] = "1"
    from . import tool_cards

    tool_cards.init_app(app)
