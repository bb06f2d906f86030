"""The web layer: blueprints for pages (HTML), api (JSON/SSE), ws (WebSocket) and auth."""

from __future__ import annotations

from flask import Flask, before_render_template


def register(app: Flask) -> None:
    """Register blueprints, request guards, error handlers and template helpers."""
    # This package's __init__ runs for every numi.web module, the import worker child's
    # (`python -m numi.web.import_worker`) too: the routes are imported when an app is made.
    from . import (  # lazy: start-up time
        access,
        api,
        api_keys,
        artifacts as artifact_routes,
        assets,
        attachments as attachment_routes,
        auth,
        budgets as budget_routes,
        context as context_routes,
        errors,
        fallbacks as fallback_routes,
        followups,
        gateway,
        hidden_characters,
        inputs,
        installable,
        integrations,  # document search and MCP server settings
        library,
        mcp_server,
        mirror,
        offline_pages,
        organising,
        pages,
        project_pages,
        projects as project_routes,
        prompts,
        security,
        shares as share_routes,
        tasks as task_routes,
        temporary as temporary_routes,
        transcript,
        transfer,
        usage as usage_routes,
        voice,
    )
    from ..chat.attachments import human_size  # lazy: start-up time
    from ..endpoints import (  # lazy: start-up time
        capability_source_label,
        model_capabilities,
        redaction_view,
        reported_capabilities,
    )
    from ..redaction.rules import RULE_NAMES  # lazy: start-up time
    from ..render import render_blocks, render_markdown  # lazy: start-up time
    from .live import sidebar_feed, streams, tool_cards, ws  # lazy: start-up time
    from .live.fragments import blocks_html  # lazy: start-up time
    from .live.message_render import long_question, message_html, past_cap  # lazy: start-up time
    from .markdown_on_request import can_render_on_request  # lazy: start-up time
    from .model_picker import forget_sent_lists, model_picker_html  # lazy: start-up time
    from .routing import LazyBuilderRule  # lazy: start-up time
    from .template_code import share_compiled_templates  # lazy: start-up time

    app.url_rule_class = LazyBuilderRule  # before any blueprint adds its rules

    security.init_app(app)
    assets.init_app(app)
    offline_pages.init_app(app)
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
    app.register_blueprint(mirror.bp)
    app.register_blueprint(transcript.bp)
    app.register_blueprint(ws.bp)
    app.register_blueprint(sidebar_feed.bp)
    app.register_blueprint(integrations.bp)
    integrations.init_app(app)
    app.register_blueprint(attachment_routes.bp)
    app.register_blueprint(context_routes.bp)
    app.register_blueprint(fallback_routes.bp)
    app.register_blueprint(usage_routes.bp)
    app.register_blueprint(library.bp)
    app.register_blueprint(budget_routes.bp)
    app.register_blueprint(artifact_routes.bp)
    app.register_blueprint(project_routes.bp)
    app.register_blueprint(project_pages.bp)
    app.register_blueprint(temporary_routes.bp)
    temporary_routes.init_app(app)
    app.register_blueprint(voice.bp)
    app.register_blueprint(task_routes.bp)
    app.register_blueprint(api_keys.bp)
    app.register_blueprint(gateway.bp)
    app.register_blueprint(mcp_server.bp)
    app.register_blueprint(share_routes.bp)
    app.jinja_env.filters["human_size"] = human_size
    app.jinja_env.filters["markdown"] = render_markdown
    app.jinja_env.filters["markdown_blocks"] = render_blocks
    app.jinja_env.filters["md_blocks_html"] = blocks_html
    app.jinja_env.globals["message_html"] = message_html
    app.jinja_env.globals["long_question"] = long_question
    app.jinja_env.globals["past_markdown_cap"] = past_cap
    app.jinja_env.globals["can_render_on_request"] = can_render_on_request
    app.jinja_env.globals["model_capabilities"] = model_capabilities
    app.jinja_env.globals["endpoint_redaction"] = redaction_view
    app.jinja_env.globals["redaction_rule_names"] = RULE_NAMES
    app.jinja_env.globals["model_picker_html"] = model_picker_html
    before_render_template.connect(forget_sent_lists, app)
    app.jinja_env.globals["reported_capabilities"] = reported_capabilities
    app.jinja_env.globals["capability_source_label"] = capability_source_label
    app.jinja_env.globals["asset_version"] = "1"
    share_compiled_templates(app.jinja_env)

    tool_cards.init_app(app)
    hidden_characters.init_app(app)
