"""Numi: a lightweight, self-hosted chat workstation for large language models."""

from __future__ import annotations

import gc
import importlib
import logging
from collections import Counter
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask

    from .services import Services

__version__ = "0.1.0"  # the one place: pyproject.toml reads it (`numi --version` prints it)

# Nothing heavy is imported at package import: `numi serve` must monkey-patch first.
# The checkout's root (bench/ uses it); the app finds its files through numi/resources.py.
ROOT = Path(__file__).resolve().parent.parent


PROVIDER_HTTP_LOGGERS = ("httpx", "httpx2", "httpcore", "openai", "anthropic")


def create_app(test_config: dict[str, Any] | None = None) -> "Flask":
    """Build the Flask app: settings from the environment (or `test_config`), extensions,
    blueprints. Does not touch the network; migrations run in `numi serve` / `numi db upgrade`.
    """
    from flask import Flask  # lazy: gevent patch order

    from .config import finalize, load_config  # lazy: start-up time
    from .extensions import db, sock  # lazy: gevent patch order
    from .process_guard import make_undumpable  # lazy: start-up time
    from .resources import STATIC, TEMPLATES, resource_dir  # lazy: start-up time

    # Before anything runs a command: /proc/<this pid>/environ holds the secrets.
    make_undumpable()

    app = Flask(
        __name__,
        template_folder=str(resource_dir(TEMPLATES)),
        static_folder=str(resource_dir(STATIC)),
    )
    config = load_config()
    if test_config:
        config.update(test_config)
    app.config.update(finalize(config))
    logging.basicConfig(
        level=app.config["NUMI_LOG_LEVEL"], format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # The provider SDKs log every HTTP request at INFO (also on CLI commands' stderr):
    # that is debugging detail, shown only with NUMI_LOG_LEVEL=DEBUG.
    quiet = logging.DEBUG if logging.getLogger().isEnabledFor(logging.DEBUG) else logging.WARNING
    for name in PROVIDER_HTTP_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
    # Alembic announces each of its plugins at INFO on a fresh data dir; the revisions it
    # runs (alembic.runtime.migration) are worth a line each, the plugins are not.
    logging.getLogger("alembic.runtime.plugins").setLevel(quiet)
    if app.config["NUMI_AUTH"] == "none":
        logging.getLogger("numi").warning(
            "NUMI_AUTH=none: no access token is needed. Any process or user that reaches this port "
            "can use Numi and run its tools as this user."
        )

    if app.config["NUMI_TEST_FAST_PASSWORD_HASHES"] and not app.testing:
        logging.getLogger("numi").warning(
            "NUMI_TEST_FAST_PASSWORD_HASHES is set: new password hashes are weak (test suites only). "
            "Unset it; each password is rehashed properly at its next login."
        )

    if app.config["NUMI_TRUSTED_PROXIES"] > 0:
        # Only then are X-Forwarded-For/-Proto/-Host believed: without a proxy that sets
        # them, any client could claim another address (and dodge the login limits).
        from werkzeug.middleware.proxy_fix import ProxyFix  # lazy: gevent patch order

        hops = app.config["NUMI_TRUSTED_PROXIES"]
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops)

    db.init_app(app)
    from .web.live.message_rate import YieldingReaderEvent  # lazy: gevent patch order
    from .web.live.streams import client_message_limit  # lazy: gevent patch order

    # The socket reader yields after each message, so a flood is counted as it arrives;
    # it counts a message's characters as its frames arrive and closes the socket (1009)
    # past the limit, before a huge message is held in memory whole.
    app.config.setdefault(
        "SOCK_SERVER_OPTIONS",
        {"event_class": YieldingReaderEvent, "max_message_size": client_message_limit(app.config)},
    )
    sock.init_app(app)
    from .database import configure_engine  # lazy: gevent patch order

    with app.app_context():
        configure_engine(db.engine)

    from .web import register  # lazy: gevent patch order

    register(app)
    from .services import KEY  # lazy: gevent patch order

    app.extensions[KEY] = _make_services(app)
    _load_plugins(app)
    return app


def _make_services(app: "Flask") -> "Services":
    """Every piece of the app's per-process state, made now (numi/services.py)."""
    from gevent.lock import Semaphore  # lazy: gevent patch order

    from .agent.producer import run_turn  # lazy: gevent patch order
    from .agent.followup_queue import queue_after_turn  # lazy: gevent patch order
    from .agent.tools import ToolRegistry  # lazy: gevent patch order
    from .agent.tools.code.pool import KernelPool  # lazy: gevent patch order
    from .chat.live_mirror import (  # lazy: gevent patch order
        MirrorKeeper,
        mirror_after_turn,
        watch_changes,
    )
    from .chat.search import detect_engine  # lazy: gevent patch order
    from .gateway.keys import MinuteWindow  # lazy: gevent patch order
    from .extensions import db  # lazy: gevent patch order
    from .login_limits import throttle_from_config  # lazy: gevent patch order
    from .services import Lazy, Services  # lazy: gevent patch order
    from .tasks.runs import record_after_turn  # lazy: gevent patch order
    from .tasks.scheduler import TaskScheduler  # lazy: gevent patch order
    from .turns.manager import TurnManager  # lazy: gevent patch order
    from .web.live.message_rate import user_buckets_from_config  # lazy: gevent patch order
    from .web.live.open_sockets import OpenSockets, close_for_restart  # lazy: gevent patch order
    from .web.live.sidebar_feed import SidebarFeeds, chat_changed  # lazy: gevent patch order

    kernels = KernelPool()
    # Every committed change of a chat reaches its app's Markdown mirror (once per process).
    watch_changes()
    return Services(
        # The turn layer knows neither the agent nor the chat layer: it gets its producer
        # and its turn-end hook (queued follow-ups) here.
        turns=TurnManager(
            app,
            producer=run_turn,
            # A scheduled task's run is recorded when its turn ends; the chat's Markdown
            # mirror file is updated.
            turn_end_hooks=[queue_after_turn, record_after_turn, mirror_after_turn],
            # An open socket is a request that never ends: closed (1012) once turns are saved.
            # The chats' Python kernels end with the process (they also watch their parent).
            stopped_hooks=[partial(close_for_restart, app), kernels.shutdown],
            # The sidebars of the user's open pages hear of a chat's answer and title.
            change_hooks=[partial(chat_changed, app)],
        ),
        login_throttle=throttle_from_config(app.config),
        hashes_in_flight=Counter(),
        tools=ToolRegistry(),  # filled by the plugins, built-ins first
        open_sockets=OpenSockets(),
        sidebar_feeds=SidebarFeeds(),
        ws_user_buckets=user_buckets_from_config(app.config),
        queue_lock=Semaphore(),
        markdown_renders=set(),
        adapters={},
        model_refreshes={},
        document_jobs={},
        document_backends={},
        embedding_models={},
        vector_matrices={},
        mcp_tools={},
        search_engine=Lazy(lambda: detect_engine(db.engine)),
        local_user_id=None,
        temporary_swept_at=0.0,
        task_scheduler=TaskScheduler(app),
        kernels=kernels,
        api_windows=MinuteWindow(app.config["NUMI_API_RATE_PER_MINUTE"]),
        mirror=MirrorKeeper(app),
    )


def settle_heap_for_serving() -> None:
    """Set the cyclic garbage collector for serving, once a serving process is ready.

    What start-up made (modules, the ORM's mappers, compiled templates, routes) is taken out
    of its sight: it is never freed anyway, and every full collection walked all of it
    (under 100 streaming turns those paused the hub for up to 200 ms at a time).

    The youngest generation is collected every 10,000 new container objects instead of
    700: a stream's tokens make thousands a second (events, frames, dicts), and 500 turns
    at 20 tokens/s ran a thousand young and nine full collections in 10 s, each full one
    pausing every stream for 150-220 ms. At 10,000: 65 young and one full, about 5 % less
    CPU and a p95 a sixth lower in the same runs, for at most 10,000 garbage objects held a
    little longer (bench/PROFILE.md).

    gevent's greenlet tree is not tracked: every spawn recorded its spawner and up to 10
    frames of its stack, which Numi never reads; 500 streams' greenlets kept 4 MiB more of
    the heap after they ended (issue 45, bench/PROFILE.md)."""
    import gevent  # lazy: gevent patch order

    gevent.config.track_greenlet_tree = False
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


# Numi's own tools and endpoint kinds, registered through the plugin hook before NUMI_PLUGINS.
DEFAULT_PLUGINS = ("numi.providers.default_kinds", "numi.agent.tools.default_tools")


def _load_plugins(app: "Flask") -> None:
    """Call `register(app)` of each default plugin, then of each module named in NUMI_PLUGINS
    (tools, endpoint kinds, routes, ...)."""
    for name in (*DEFAULT_PLUGINS, *app.config["NUMI_PLUGINS"]):
        importlib.import_module(name).register(app)
