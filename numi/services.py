"""The app's per-process state: one typed `Services` object, made whole in create_app().

Each piece of state a process keeps between requests (the running turns, the login
throttle, the tool registry, caches, background jobs, locks) is a named attribute here, so
a reader finds it by name and type, two apps never share it, and this dataclass is the one
list of what a test must reset. Nothing is created on first use: create_app() passes every
field (the dataclass has no defaults), and what needs the database is a `Lazy` made there.

It sits in the base layer (pyproject.toml) so that every layer reaches it; the types of the
higher layers are imported for the checker only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from flask import current_app

if TYPE_CHECKING:
    from flask import Flask
    from gevent import Greenlet
    from gevent.lock import Semaphore

    from .agent.tools import ToolRegistry
    from .agent.tools.code.pool import KernelPool
    from .agent.tools.mcp.catalog import ToolList
    from .chat.live_mirror import MirrorKeeper
    from .gateway.keys import MinuteWindow
    from .login_limits import LoginThrottle
    from .providers.base import ProviderAdapter
    from .tasks.scheduler import TaskScheduler
    from .turns.manager import TurnManager
    from .web.live.message_rate import UserMessageBuckets
    from .web.live.open_sockets import OpenSockets
    from .web.live.sidebar_feed import SidebarFeeds

# The app's Services under Flask's one-key-per-extension convention.
KEY = "numi"

T = TypeVar("T")


class Lazy(Generic[T]):
    """A value worked out on the first `get()` and kept: for what needs the database, which
    create_app() does not touch. Two greenlets racing the first `get()` both work it out;
    what they find is the same."""

    def __init__(self, make: Callable[[], T]):
        self._make = make
        self._value: T | None = None

    def get(self) -> T:
        """The value, made on the first call."""
        if self._value is None:
            self._value = self._make()
        return self._value


@dataclass(eq=False)
class Services:
    """One app's per-process state (`services()` finds it). Every field is made in
    create_app(); a new piece of state is a new field here, never an `app.extensions` key."""

    # The running turns of this process (numi.turns.manager), with their injected producer.
    turns: TurnManager
    # Login failures and delays (the database, or Redis with NUMI_REDIS_URL).
    login_throttle: LoginThrottle
    # Password checks running per client address and per (address, account) (web.auth
    # refuses one past its bound at once).
    hashes_in_flight: Counter[str | tuple[str, str]]
    # The tools the plugins registered (a plugin: `services(app).tools.register(tool)`).
    tools: ToolRegistry
    # The WebSockets being served, closed with 1012 on a graceful stop (web.live.open_sockets).
    open_sockets: OpenSockets
    # The open pages' sidebar feeds, by user (web.live.sidebar_feed).
    sidebar_feeds: SidebarFeeds
    # The per-user message buckets shared by all of a user's sockets (web.live.message_rate).
    ws_user_buckets: UserMessageBuckets
    # Held while a queued follow-up is taken and started (agent.followup_queue.start_next).
    queue_lock: Semaphore
    # The users whose "Show as markdown" renders now: one at a time per user
    # (web.markdown_on_request).
    markdown_renders: set[int]
    # Provider adapters per (kind, base_url, api_key, guarded, retries): connections reused.
    adapters: dict[tuple[str, str, str | None, bool, bool], ProviderAdapter]
    # Background model-list fetches per endpoint id (numi.endpoints.refresh_when_stale).
    model_refreshes: dict[int, Greenlet]
    # Background document indexing per attachment id (numi.knowledge.index).
    document_jobs: dict[int, Greenlet]
    # How fts_document_chunks was made ("fts5", "postgres", "like") per database URL, and the
    # vector search it has under "vectors:<url>" ("sqlite-vec", "pgvector", "numpy" or "" for
    # none).
    document_backends: dict[str, str]
    # The local embedding models loaded in this process, by name (numi.knowledge.embedding).
    embedding_models: dict[str, Any]
    # A user's vectors of one model as one matrix (or a scope's: a chat's or project's
    # documents), for the numpy search, with the state of the index they were read at
    # (numi.knowledge.vectors).
    vector_matrices: dict[tuple[Any, ...], Any]
    # Each MCP server's tool list (agent.tools.mcp.catalog), per server id.
    mcp_tools: dict[int, ToolList]
    # Message search's engine ("fts5", "postgresql", "ilike"), detected on the first search.
    search_engine: Lazy[str]
    # The single-user mode's user id once found or made (numi.identity.local_user).
    local_user_id: int | None
    # time.monotonic() of the last sweep of idle temporary chats (web.temporary).
    temporary_swept_at: float
    # Runs scheduled tasks when due, under its clock (numi.tasks.scheduler; started by
    # `numi serve` and each gunicorn worker).
    task_scheduler: TaskScheduler
    # The chats' Python kernels in this process (agent.tools.code; empty until the first
    # run_python call, and without the `code` extra).
    kernels: KernelPool
    # Each API key's requests of the last minute (gateway.keys, NUMI_API_RATE_PER_MINUTE).
    api_windows: MinuteWindow
    # The live Markdown mirror's pending changes and writer (chat.live_mirror).
    mirror: MirrorKeeper


def services(app: Flask | None = None) -> Services:
    """The app's Services (the current app's when `app` is None)."""
    return (app if app is not None else current_app).extensions[KEY]
