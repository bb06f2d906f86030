"""A NUMI_PLUGINS module for the live server in turn tests: tools with known behaviour."""

from __future__ import annotations

import gevent
from flask import before_render_template

from numi.agent.tools import Tool
from numi.services import services

# An answer whose text holds this fails to draw, once per message (a stand-in for a bug
# in drawing one event): tests/turns/test_relay_failure.py.
DRAW_FAILS_ONCE = "[this answer fails to draw once]"
_failed_draws: set[int] = set()


def _fail_a_draw_once(sender, template, context, **extra):
    message = context.get("message")
    if template.name != "partials/_message_oob.html" or message is None:
        return
    if DRAW_FAILS_ONCE in (message.content or "") and message.id not in _failed_draws:
        _failed_draws.add(message.id)
        raise RuntimeError("drawing this answer failed on purpose")


def _sleep(arguments, context):
    gevent.sleep(float(arguments.get("seconds", 0.1)))
    return f"slept {arguments.get('seconds')}s: {arguments.get('label', '')}"


def _fail(arguments, context):
    raise RuntimeError("the tool broke on purpose")


def _echo(arguments, context):
    return {"echo": arguments}


def register(app):
    tools = services(app).tools
    schema = {
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}},
    }
    tools.register(Tool("sleepy", "Sleep for some seconds.", schema, _sleep))
    tools.register(Tool("broken", "Always fails.", {"type": "object", "properties": {}}, _fail))
    tools.register(Tool("echo", "Echo the arguments.", {"type": "object", "properties": {}}, _echo))
    tools.register(Tool("slow_timeout", "Sleeps past its timeout.", schema, _sleep, timeout=0.2))
    tools.register(Tool("guarded", "Needs approval.", schema, _echo, needs_approval=True))
    before_render_template.connect(_fail_a_draw_once, app)
