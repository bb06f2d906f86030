"""The app's per-process state is one typed `Services` object (numi/services.py), made whole
in create_app: two apps share none of it, every field holds what its type says, and a used
app keeps no state of its own under any other `app.extensions` key."""

from __future__ import annotations

import types
import typing
from collections import Counter
from dataclasses import MISSING, fields

from flask import Flask
from gevent import Greenlet
from gevent.lock import Semaphore

from numi.agent.tools import Tool, ToolRegistry
from numi.agent.tools.code.pool import KernelPool
from numi.agent.tools.mcp.catalog import ToolList
from numi.chat.live_mirror import MirrorKeeper
from numi.gateway.keys import MinuteWindow
from numi.login_limits import LoginThrottle
from numi.providers.base import ProviderAdapter
from numi.tasks.scheduler import TaskScheduler
from numi.services import KEY, Lazy, Services, services
from numi.turns.manager import TurnManager
from numi.web.live.message_rate import UserMessageBuckets
from numi.web.live.open_sockets import OpenSockets
from numi.web.live.sidebar_feed import SidebarFeeds

# The keys of app.extensions that belong to the libraries Numi binds, not to Numi.
LIBRARY_KEYS = {"sqlalchemy", "migrate", "sock"}
# The higher layers' types, which numi/services.py imports for the checker only.
TYPES = {
    cls.__name__: cls
    for cls in (
        Flask,
        Greenlet,
        Semaphore,
        ToolRegistry,
        ToolList,
        LoginThrottle,
        ProviderAdapter,
        TurnManager,
        UserMessageBuckets,
        MinuteWindow,
        OpenSockets,
        SidebarFeeds,
        TaskScheduler,
        KernelPool,
        MirrorKeeper,
    )
}
HINTS = typing.get_type_hints(Services, localns=TYPES)
# Values rather than objects: two apps may hold equal ones (0.0, None).
VALUES = (int, float, str, type(None))


def _runtime_types(hint) -> tuple[type, ...]:
    """What isinstance() can check of a type hint: `dict[int, X]` -> dict, `Lazy[str]` -> Lazy,
    `int | None` -> (int, NoneType)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return tuple(kind for arg in typing.get_args(hint) for kind in _runtime_types(arg))
    return (origin or hint,)


def test_services_has_no_defaults_so_create_app_fills_every_field():
    unfilled = [f.name for f in fields(Services) if f.default is not MISSING]
    unfilled += [f.name for f in fields(Services) if f.default_factory is not MISSING]
    assert not unfilled, f"fields create_app could leave to a default: {unfilled}"


def test_each_app_gets_its_own_services_of_the_declared_types(make_app):
    first, second = services(make_app()), services(make_app())
    assert first is not second
    for field in fields(Services):
        mine, theirs = getattr(first, field.name), getattr(second, field.name)
        assert isinstance(mine, _runtime_types(HINTS[field.name])), (
            f"{field.name} is a {type(mine).__name__}"
        )
        if not isinstance(mine, VALUES):
            assert mine is not theirs, f"two apps share their {field.name}"
    # What one app's plugin registers, the other app does not see.
    first.tools.register(Tool("only_here", "One app's tool.", {"type": "object"}, lambda a, c: ""))
    assert "only_here" in first.tools.names()
    assert "only_here" not in second.tools.names()
    assert first.turns is not second.turns and first.turns.app is not second.turns.app


def test_a_used_app_keeps_its_state_only_in_its_services(make_app):
    """Requests that used to create state on first use (the local user, the message search
    engine, the temporary-chat sweep, a chat and its page) add no key of Numi's
    own to app.extensions."""
    app = make_app()
    client = app.test_client()
    assert client.get("/").status_code == 200  # single-user mode: the local user is made
    assert client.get("/search", query_string={"q": "hello", "mode": "messages"}).status_code == 200
    created = client.post("/api/session", json={"title": "Services"})
    assert created.status_code == 201
    assert client.get(f"/c/{created.get_json()['id']}").status_code == 200
    state = services(app)
    assert state.local_user_id is not None
    assert state.search_engine.get() in {"fts5", "postgresql", "ilike"}
    assert state.temporary_swept_at > 0
    assert set(app.extensions) - LIBRARY_KEYS == {KEY}


def test_lazy_works_its_value_out_once():
    calls = Counter()

    def make():
        calls["made"] += 1
        return "fts5"

    lazy = Lazy(make)
    assert not calls
    assert [lazy.get(), lazy.get()] == ["fts5", "fts5"]
    assert calls["made"] == 1
