"""Settings: every knob Numi reads from the environment, with its default and meaning.

`SETTINGS` is the single list of settings. `load_config()` turns the environment into a
plain dict that `create_app()` puts into `app.config`. The README documents each setting;
a test fails when one is missing there, so adding a setting here means documenting it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from .data_dir import default_data_dir, persisted_secret, private_directory, private_file


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str


TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})


def parse_bool(value: Any, name: str | None = None) -> bool:
    """The one reading of a true/false value: a JSON boolean, 0 or 1, or a word from a form,
    a query string or an environment variable ("1", "true", "yes", "on"; any case).

    With `name`, a value that is neither true nor false is refused (`invalid_input` naming
    the field); without it, as for settings, anything not true is false.
    """
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    elif value is None or (isinstance(value, int | float) and value in (0, 1)):
        return bool(value)
    if name is None:
        return False
    from .errors import invalid

    raise invalid(f"{name} must be true or false.")


def _bool(value: str) -> bool:
    return parse_bool(value)


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        value = value.strip().lower()
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value

    return parse


def _csv(value: str) -> tuple[str, ...]:
    return tuple(item.strip().lower() for item in value.split(",") if item.strip())


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "NUMI_DATA_DIR",
        None,
        str,
        "Directory for the SQLite database, uploads and the generated secret key.",
    ),
    Setting(
        "NUMI_DATABASE_URL",
        None,
        str,
        "SQLAlchemy URL; default is SQLite in the data directory. PostgreSQL: postgresql+psycopg://user@host/db.",
    ),
    Setting(
        "NUMI_DB_POOL_SIZE",
        20,
        int,
        "PostgreSQL: connections kept open per process (gevent serves many requests on each).",
    ),
    Setting(
        "NUMI_DB_MAX_OVERFLOW",
        20,
        int,
        "PostgreSQL: extra connections a process may open at peaks.",
    ),
    Setting("NUMI_HOST", "127.0.0.1", str, "Address `numi serve` binds to."),
    Setting("NUMI_PORT", 8765, int, "Port `numi serve` listens on."),
    Setting(
        "NUMI_AUTH",
        "single",
        _choice("single", "multi", "none"),
        "`single`: one local user, no login, but the access token is needed once per browser. "
        "`multi`: login page, users, bearer tokens. `none`: one local user and no token at all "
        "(anything that reaches the port can use Numi and its tools).",
    ),
    Setting(
        "NUMI_ACCESS_TOKEN",
        None,
        str,
        "Single-user mode's access token (`?token=` once per browser, or `Authorization: "
        "Bearer`). Generated and stored in the data directory when unset.",
    ),
    Setting(
        "NUMI_SECRET_KEY",
        None,
        str,
        "Signs session cookies; the key that encrypts stored API keys is derived from it "
        "(changing it makes them unreadable). Generated and stored in the data directory when "
        "unset.",
    ),
    Setting(
        "NUMI_SECURE_COOKIES",
        False,
        _bool,
        "Mark the session cookie Secure (sent over HTTPS only): set it when Numi is served through TLS.",
    ),
    Setting(
        "NUMI_TRUSTED_PROXIES",
        0,
        int,
        "Number of reverse proxies in front of Numi whose X-Forwarded-For, -Proto and -Host "
        "headers are trusted (werkzeug ProxyFix); 0 ignores those headers.",
    ),
    Setting(
        "NUMI_SESSION_LIFETIME_HOURS",
        168,
        float,
        "A login (or a remembered access token) ends after this many hours without a visit.",
    ),
    Setting(
        "NUMI_TEMPORARY_CHAT_HOURS",
        24,
        float,
        "A temporary chat is deleted after this many hours without activity (and when its user "
        "starts another chat).",
    ),
    Setting(
        "NUMI_LOGIN_FREE_ATTEMPTS",
        5,
        int,
        "Failed logins for one username from one address before delays start; one username from "
        "any address, or one address for any username, gets four times as many.",
    ),
    Setting(
        "NUMI_LOGIN_DELAY_SECONDS",
        5,
        float,
        "The first delay after the free attempts; it doubles with each further failure.",
    ),
    Setting(
        "NUMI_LOGIN_MAX_DELAY_SECONDS",
        900,
        float,
        "The longest delay (a temporary lockout). Failures are forgotten a day after the last one.",
    ),
    Setting(
        "NUMI_TEST_FAST_PASSWORD_HASHES",
        False,
        _bool,
        "For Numi's own test suite only: argon2id at its smallest cost, so hundreds of test "
        "logins are quick. Never set it for real users: a server without it rehashes such "
        "passwords at the next login, and one with it warns at start-up.",
    ),
    Setting(
        "NUMI_ALLOWED_HOSTS",
        (),
        _csv,
        "Extra host names accepted in the Host header (comma separated); `*` accepts any. "
        "localhost and the bound address are always accepted.",
    ),
    Setting(
        "NUMI_AUTO_ENDPOINTS",
        True,
        _bool,
        "On first start, add endpoints from OPENAI_API_KEY/OPENAI_BASE_URL, ANTHROPIC_API_KEY and a local Ollama.",
    ),
    Setting("NUMI_LOG_LEVEL", "INFO", str, "Python logging level."),
    Setting(
        "NUMI_PLUGINS",
        (),
        lambda v: tuple(i.strip() for i in v.split(",") if i.strip()),
        "Python modules (comma separated) whose `register(app)` is called at start-up, e.g. to add tools.",
    ),
    Setting(
        "PROMPT_MAX_HISTORY_MESSAGES",
        200,
        int,
        "Most saved messages loaded into one model request.",
    ),
    Setting(
        "PROMPT_MAX_HISTORY_CHARS",
        400_000,
        int,
        "Most characters of saved history loaded into one model request.",
    ),
    Setting(
        "NUMI_AUTO_COMPACT",
        True,
        _bool,
        "Compact a chat automatically before a model call when its prompt nears the context "
        "window (a chat's `auto_compact` setting overrides this).",
    ),
    Setting(
        "NUMI_AUTO_COMPACT_FRACTION",
        0.8,
        float,
        "Auto-compaction starts when the estimated prompt exceeds this fraction of the model's context window.",
    ),
    Setting(
        "NUMI_COMPACT_MODEL",
        None,
        str,
        "Model that writes compaction summaries; default is the chat's own model.",
    ),
    Setting(
        "NUMI_COMPACT_KEEP_MESSAGES",
        4,
        int,
        "Newest messages a compaction leaves out of the summary (kept word for word).",
    ),
    Setting(
        "NUMI_DEFAULT_CONTEXT_WINDOW",
        32_768,
        int,
        "Context window (tokens) assumed for a model that reports none.",
    ),
    Setting(
        "NUMI_UPLOAD_MAX_BYTES", 20 * 1024 * 1024, int, "Largest file accepted as an attachment."
    ),
    Setting(
        "NUMI_UPLOAD_TYPES",
        (
            "text/",
            "application/pdf",
            "application/json",
            "image/png",
            "image/jpeg",
            "image/gif",
            "image/webp",
        ),
        _csv,
        "Attachment types accepted (comma separated MIME types; a trailing `/` accepts a whole "
        "family). Code files count as text.",
    ),
    Setting(
        "NUMI_IMAGE_MAX_SIDE",
        1568,
        int,
        "Images are downscaled so their longer side is at most this many pixels before they go to a model.",
    ),
    Setting(
        "NUMI_ATTACHMENT_MAX_TEXT_CHARS",
        200_000,
        int,
        "Most characters of a text, code or PDF attachment sent to the model.",
    ),
    Setting(
        "NUMI_PDF_MAX_PAGES",
        500,
        int,
        "Most pages of a PDF attachment whose text is read; later pages are left out, and the text says so.",
    ),
    Setting(
        "NUMI_PDF_MAX_SECONDS",
        30.0,
        float,
        "Most wall-clock time reading one PDF's text may take (a child process, killed at the "
        "limit; the pages read so far are kept).",
    ),
    Setting(
        "NUMI_PDF_MAX_MEMORY_MB",
        512,
        int,
        "Address-space limit of the child process that reads a PDF's text.",
    ),
    Setting(
        "NUMI_PDF_MAX_STREAM_MB",
        32,
        int,
        "Most bytes one compressed stream of a PDF may inflate to while its text is read "
        "(decompression bombs stop there).",
    ),
    Setting(
        "NUMI_MAX_REQUEST_BYTES",
        32 * 1024 * 1024,
        int,
        "Largest HTTP request body accepted (uploads included).",
    ),
    Setting("NUMI_MAX_MESSAGE_CHARS", 200_000, int, "Longest user message accepted."),
    Setting(
        "NUMI_MARKDOWN_MAX_CHARS",
        100_000,
        int,
        "Longest message text rendered as markdown, saved or streaming; a longer one is shown as "
        'plain, escaped text with a "Show as markdown" button.',
    ),
    Setting("NUMI_MAX_TITLE_CHARS", 200, int, "Longest chat title accepted."),
    Setting(
        "NUMI_MAX_SYSTEM_PROMPT_CHARS", 50_000, int, "Longest per-chat system prompt accepted."
    ),
    Setting("NUMI_MAX_NAME_CHARS", 100, int, "Longest endpoint, user or token name accepted."),
    Setting(
        "NUMI_MAX_JSON_DEPTH",
        64,
        int,
        "Deepest nesting of arrays and objects accepted in a JSON body, import file or WebSocket message.",
    ),
    Setting(
        "NUMI_HEADER_TIMEOUT_SECONDS",
        10.0,
        float,
        "`numi serve` closes a connection whose request line and headers have not arrived "
        "this long after it started waiting for them (slowloris; idle keep-alive included).",
    ),
    Setting(
        "NUMI_WS_MESSAGES_PER_SECOND",
        20.0,
        float,
        "Client messages one WebSocket may send per second on average; a socket over "
        "`NUMI_WS_MESSAGE_BURST` is sent `rate_limited_client` and closed (1008).",
    ),
    Setting(
        "NUMI_WS_MESSAGE_BURST",
        40,
        int,
        "Client messages one WebSocket may send at once before its rate limit applies.",
    ),
    Setting(
        "NUMI_WS_USER_MESSAGES_PER_SECOND",
        # High enough that a user whose hundred open chats resume at once is not cut off
        # (each socket sends one resume); a flood of one socket meets its own limit first.
        200.0,
        float,
        "Client messages one user's WebSockets together may send per second in one server "
        "process (burst twice that).",
    ),
    Setting(
        "NUMI_PAGE_SIZE_CHATS", 50, int, "Chats per page in the sidebar and GET /api/sessions."
    ),
    Setting(
        "NUMI_PAGE_SIZE_MESSAGES",
        50,
        int,
        "Messages per page in the chat view and GET /api/history.",
    ),
    Setting(
        "NUMI_MODELS_CACHE_SECONDS",
        3600,
        int,
        "How long an endpoint's fetched model list is reused.",
    ),
    Setting("NUMI_PROVIDER_TIMEOUT_SECONDS", 600, float, "Read timeout for a provider stream."),
    Setting(
        "NUMI_PROVIDER_IDLE_SECONDS",
        300,
        float,
        "A provider stream that sends no token, reasoning or tool delta for this long (keep-alive "
        "comments do not count) ends with `provider_timeout`; 0 turns the deadline off.",
    ),
    Setting(
        "NUMI_PROVIDER_MAX_RETRIES",
        2,
        int,
        "Retries of rate-limited or failing provider calls, only before any output streamed.",
    ),
    Setting("NUMI_MAX_STEPS", 12, int, "Most model steps (tool rounds) in one turn."),
    Setting(
        "NUMI_TOOL_TIMEOUT_SECONDS",
        60,
        float,
        "Time a tool may run before its call fails with a timeout result.",
    ),
    Setting(
        "NUMI_MCP_TIMEOUT_SECONDS",
        30,
        float,
        "Time limit for one MCP server session (listing tools or one tool call).",
    ),
    Setting(
        "NUMI_MCP_TOOLS_CACHE_SECONDS",
        60,
        int,
        "How long a server's MCP tool list is reused before it is fetched again.",
    ),
    Setting(
        "NUMI_MCP_THREADS",
        4,
        int,
        "OS threads of the pool that runs MCP sessions (its own: a hanging MCP server never takes "
        "the server's shared threads).",
    ),
    Setting(
        "NUMI_MCP_RETRY_SECONDS",
        5.0,
        float,
        "First wait before a failed MCP server's tool list is fetched again; it doubles on each failure.",
    ),
    Setting(
        "NUMI_MCP_RETRY_MAX_SECONDS",
        300.0,
        float,
        "Longest wait between tries of a failing MCP server's tool list.",
    ),
    Setting(
        "NUMI_FRAME_INTERVAL_MS",
        40,
        int,
        "Streaming deltas are coalesced into one WebSocket frame per interval.",
    ),
    Setting(
        "NUMI_TURN_BUFFER_EVENTS",
        4000,
        int,
        "Events a running turn keeps for reconnecting clients.",
    ),
    Setting(
        "NUMI_TURN_BUFFER_BYTES",
        2 * 1024 * 1024,
        int,
        "Bytes of events a running turn keeps for reconnecting clients.",
    ),
    Setting(
        "NUMI_SUBSCRIBER_QUEUE",
        512,
        int,
        "Events queued for one slow client before it is resynced by snapshot.",
    ),
    Setting(
        "NUMI_TURN_RETENTION_SECONDS",
        120,
        int,
        "How long a finished turn's events stay for late reconnects.",
    ),
    Setting(
        "NUMI_REDIS_URL",
        None,
        str,
        "Redis for live turns shared by many processes and hosts (e.g. redis://127.0.0.1:6379/0); "
        "unset: one process, turns in memory.",
    ),
    Setting(
        "NUMI_REDIS_PREFIX",
        "numi:",
        str,
        "Prefix of every Redis key and channel Numi uses (several installs can share one Redis).",
    ),
    Setting(
        "NUMI_TURN_LEASE_MS",
        6000,
        int,
        "With Redis: a turn's lease; a process that dies mid-turn is noticed within this time and its turn closed.",
    ),
    Setting(
        "NUMI_TITLE_MODEL",
        None,
        str,
        "Model for generated chat titles; default is the chat's own model.",
    ),
    Setting(
        "NUMI_GENERATE_TITLES",
        True,
        _bool,
        "Ask the model for a short title after a chat's first answer (else the first words of the question).",
    ),
    Setting(
        "NUMI_APPROVAL_TIMEOUT_SECONDS",
        300,
        float,
        "How long a tool call waits for the user's approval before it counts as denied.",
    ),
    Setting(
        "NUMI_FETCH_MAX_BYTES",
        2_000_000,
        int,
        "Most bytes `web_search` and `fetch_page` read from one response.",
    ),
    Setting(
        "NUMI_FETCH_TIMEOUT_SECONDS",
        20,
        float,
        "Most time one web search or page fetch (with its redirects) may take.",
    ),
    Setting(
        "NUMI_WORKSPACE_MAX_FILE_BYTES",
        1_000_000,
        int,
        "Largest file the workspace tools read, search or write.",
    ),
    Setting(
        "NUMI_BASH_TIMEOUT_SECONDS",
        120,
        float,
        "Most time one `bash` command may run before it is killed.",
    ),
    Setting(
        "NUMI_BASH_MAX_OUTPUT_CHARS",
        20_000,
        int,
        "Output of a `bash` command kept for the model (its start and end).",
    ),
)


def load_config(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Read every setting from `environ` (default: os.environ) into a config dict.

    Raises ValueError naming the variable when a value does not parse.
    """
    environ = os.environ if environ is None else environ
    config: dict[str, Any] = {}
    for setting in SETTINGS:
        raw = environ.get(setting.name)
        if raw is None or raw == "":
            config[setting.name] = setting.default
            continue
        try:
            config[setting.name] = setting.parse(raw)
        except ValueError as exc:
            raise ValueError(f"{setting.name}={raw!r}: {exc}") from None
    return config


def finalize(config: dict[str, Any]) -> dict[str, Any]:
    """Fill in what depends on other settings: data dir, database URL, secret key, access token."""
    data_dir = Path(config.get("NUMI_DATA_DIR") or default_data_dir()).expanduser()
    private_directory(data_dir)
    config["NUMI_DATA_DIR"] = str(data_dir)
    if not config.get("NUMI_DATABASE_URL"):
        config["NUMI_DATABASE_URL"] = f"sqlite:///{data_dir / 'numi.db'}"
        private_file(data_dir / "numi.db")  # SQLite gives its -wal and -shm files the same mode
    if not config.get("NUMI_SECRET_KEY"):
        config["NUMI_SECRET_KEY"] = persisted_secret(data_dir / "secret_key")
    config["SECRET_KEY"] = config["NUMI_SECRET_KEY"]
    if config.get("NUMI_AUTH", "single") == "single" and not config.get("NUMI_ACCESS_TOKEN"):
        # 32 bytes: unguessable, and short enough to paste or keep in a bookmark.
        config["NUMI_ACCESS_TOKEN"] = persisted_secret(data_dir / "access_token", nbytes=32)
    config["SQLALCHEMY_DATABASE_URI"] = config["NUMI_DATABASE_URL"]
    if not config["NUMI_DATABASE_URL"].startswith("sqlite"):
        # Connections are returned between short transactions (never held while a model
        # streams), so a pool much smaller than the number of live turns suffices.
        options = config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", {})
        options.setdefault("pool_size", config.get("NUMI_DB_POOL_SIZE", 20))
        options.setdefault("max_overflow", config.get("NUMI_DB_MAX_OVERFLOW", 20))
    config["MAX_CONTENT_LENGTH"] = config["NUMI_MAX_REQUEST_BYTES"]
    config.setdefault("SESSION_COOKIE_SAMESITE", "Lax")
    config.setdefault("SESSION_COOKIE_HTTPONLY", True)
    config.setdefault("SESSION_COOKIE_SECURE", bool(config.get("NUMI_SECURE_COOKIES")))
    config.setdefault(
        "PERMANENT_SESSION_LIFETIME",
        timedelta(hours=config.get("NUMI_SESSION_LIFETIME_HOURS", 168)),
    )
    return config
