"""What a model picker offers: one group per endpoint, its models with what each can do,
and which one is chosen. `templates/partials/_model_picker.html` renders it as a native
`<select>` (it works without script) and a listbox `<template>` that `static/js/picker.js`
turns into a searchable listbox beside the select.

Nothing is preselected that cannot answer: an endpoint that lists no models shows as a
disabled "(no models listed)" line unless the chat is on it already, and with no usable
choice the picker says "Choose a model…" instead of picking the first line.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from flask import current_app, g
from markupsafe import Markup

from ..models import Endpoint
from ..providers.capabilities import listed_capabilities


@dataclass
class PickerOption:
    value: str  # `<endpoint id>:<model>`, what the form posts (pages.chat_forms.route_fields)
    model: str
    hints: list[str]  # what the model can do, in words: "tools", "vision", "128K context"

    @property
    def label(self) -> str:
        """The native option's text: the model, then its hints."""
        return " · ".join([self.model, *self.hints])


@dataclass
class PickerGroup:
    """One endpoint's models. It holds the endpoint's values, not the entity: a WebSocket
    connection keeps its pickers across its database sessions (model_picker_html), and an
    entity its session expired and let go cannot be read (DetachedInstanceError)."""

    endpoint_id: int
    name: str
    enabled: bool
    models_problem: str | None  # why the model list was not refreshed, if it was not
    options: list[PickerOption] = field(default_factory=list)
    empty_value: str = ""  # the "(no models listed)" line's value

    @property
    def label(self) -> str:
        return self.name + ("" if self.enabled else " (disabled)")


@dataclass
class Picker:
    groups: list[PickerGroup]
    selected: str  # the chosen value, "" when none is

    def chosen(self, value: str) -> bool:
        return value == self.selected

    def chosen_option(self) -> PickerOption | None:
        """The chosen model's option (None: nothing chosen, or an endpoint listing none)."""
        return next(
            (o for grp in self.groups for o in grp.options if o.value == self.selected), None
        )


def model_picker_html(
    endpoints: list[Endpoint],
    chat: Any = None,
    preselected: str = "",
    select_id: str | None = None,
    *,
    shared_options: bool = False,
) -> Markup:
    """The picker's markup (templates/partials/_model_picker.html). A chat page holds one
    picker per answer (Regenerate's "Model…"), all alike: each distinct picker is worked
    out once per request (or WebSocket connection: the key holds what the endpoints list),
    and the listbox they share is sent once per rendered page or fragment. With
    `shared_options` (Regenerate's) the select holds only its chosen option, and its
    others come from a `<template>` sent once per page or fragment too, which picker.js
    copies in when the menu opens: a page of 50 messages no longer carries 25 copies of
    every model's option."""
    endpoint_id, model = _route_of(chat)
    known = tuple(
        (e.id, e.name, e.enabled, e.default_model, e.models_json, e.hidden_models_json)
        + (e.settings_json, e.models_problem)
        for e in endpoints
    )
    pickers = g.setdefault("numi_model_pickers", {})
    if len(pickers) > 32:  # a long-lived connection's context: keep it small
        pickers.clear()
    key = (known, endpoint_id, model, preselected, select_id, shared_options)
    macros = current_app.jinja_env.get_template("partials/_model_picker.html").module
    if key not in pickers:
        picker = model_picker(endpoints, chat, preselected)
        listed = repr([(grp.label, grp.models_problem, grp.options) for grp in picker.groups])
        list_id = "picker-list-" + hashlib.blake2b(listed.encode(), digest_size=6).hexdigest()
        options_id = list_id + "-options" if shared_options and endpoints else ""
        select = macros.select(
            picker, endpoints, select_id, list_id if endpoints else "", options_id
        )
        pickers[key] = (picker, list_id, options_id, Markup(select))
    picker, list_id, options_id, html = pickers[key]
    sent = g.setdefault("numi_picker_lists", set())
    if endpoints and list_id not in sent:
        sent.add(list_id)
        html += macros.listbox(picker, list_id)
    if options_id and options_id not in sent:
        sent.add(options_id)
        html += macros.options_template(Picker(picker.groups, ""), options_id)  # none chosen
    return html


def forget_sent_lists(*_args, **_extra) -> None:
    """A new page or fragment is rendered: its first picker sends the listbox again
    (connected to Flask's `before_render_template`)."""
    g.pop("numi_picker_lists", None)


def model_picker(endpoints: list[Endpoint], chat: Any = None, preselected: str = "") -> Picker:
    """The picker over `endpoints` for `chat` (an object or dict with `endpoint_id` and
    `model`, or None), else with `preselected` chosen (the home page's default route)."""
    endpoint_id, model = _route_of(chat)
    groups = [_group(endpoint, endpoint_id, model) for endpoint in endpoints]
    current = f"{endpoint_id}:{model or ''}" if endpoint_id is not None else preselected
    values = {o.value for g in groups for o in g.options}
    # A chat already on an endpoint without models keeps showing it (honestly empty).
    values |= {g.empty_value for g in groups if g.endpoint_id == endpoint_id and not g.options}
    return Picker(groups, current if current in values else "")


def _route_of(chat: Any) -> tuple[int | None, str | None]:
    if chat is None:
        return None, None
    get = chat.get if isinstance(chat, dict) else lambda name: getattr(chat, name, None)
    endpoint_id = get("endpoint_id")
    try:
        endpoint_id = int(endpoint_id) if endpoint_id not in (None, "") else None
    except (TypeError, ValueError):
        endpoint_id = None
    return endpoint_id, get("model") or None


def _group(endpoint: Endpoint, chat_endpoint_id: int | None, chat_model: str | None) -> PickerGroup:
    listed = endpoint.models  # parsed once for all its models' hints
    hidden = endpoint.hidden_models
    ids = [m["id"] if isinstance(m, dict) else str(m) for m in listed]
    ids = [m for m in ids if m not in hidden]
    # The endpoint's own default model stays pickable when the server's list omits it (a
    # gateway alias, a model the list does not name), unless the user hid it.
    default = endpoint.default_model
    if default and default not in ids and default not in hidden:
        ids.insert(0, default)
    if chat_endpoint_id == endpoint.id and chat_model and chat_model not in ids:
        ids.insert(0, chat_model)
    return PickerGroup(
        endpoint.id,
        endpoint.name,
        endpoint.enabled,
        endpoint.models_problem,
        [PickerOption(f"{endpoint.id}:{m}", m, _hints(endpoint, listed, m)) for m in ids],
        f"{endpoint.id}:",
    )


def _hints(endpoint: Endpoint, listed: list, model: str) -> list[str]:
    caps = listed_capabilities(model, listed, endpoint.model_capabilities.get(model))
    hints = [name for name in ("tools", "vision", "reasoning") if getattr(caps, name)]
    if caps.context_window:
        hints.append(f"{_short_count(caps.context_window)} context")
    return hints


def _short_count(tokens: int) -> str:
    """How model cards name a context size: 131072 -> "128K", 200000 -> "200K",
    1047576 -> "1M"."""
    if tokens >= 1_000_000:
        return f"{round(tokens / 1_000_000, 1):g}M"
    if tokens >= 1000:
        binary = tokens % 1024 == 0 and tokens % 1000 != 0
        return f"{tokens // 1024 if binary else round(tokens / 1000)}K"
    return str(tokens)
