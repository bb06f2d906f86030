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

from .database_check import database_url, sqlite_module, without_password
from .data_dir import (
    check_writable,
    default_data_dir,
    persisted_secret,
    private_directory,
    private_file,
)
from .setting_values import (
    SettingError,
    boolean,
    choice,
    log_level,
    lowercase_list,
    name_list,
    number,
    text,
    whole,
)


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "NUMI_DATA_DIR",
        None,
        text,
        "Directory for the SQLite database, uploads and the generated secret key.",
    ),
    Setting(
        "NUMI_DATABASE_URL",
        None,
        database_url,
        "SQLAlchemy URL; default is SQLite in the data directory. PostgreSQL: postgresql+psycopg://user@host/db.",
    ),
    Setting(
        "NUMI_SQLITE_MODULE",
        None,
        sqlite_module,
        "SQLite: the DB-API module that opens the database in place of Python's `sqlite3`, "
        "e.g. `sqlean.dbapi2` (`pip install sqlean.py`): for a Python whose `sqlite3` cannot "
        "load extensions, so document vectors are searched by sqlite-vec.",
    ),
    Setting(
        "NUMI_DB_POOL_SIZE",
        20,
        whole(1),
        "PostgreSQL: connections kept open per process (gevent serves many requests on each).",
    ),
    Setting(
        "NUMI_DB_MAX_OVERFLOW",
        20,
        whole(),
        "PostgreSQL: extra connections a process may open at peaks.",
    ),
    Setting("NUMI_HOST", "127.0.0.1", text, "Address `numi serve` binds to."),
    Setting("NUMI_PORT", 8765, whole(1, 65535), "Port `numi serve` listens on."),
    Setting(
        "NUMI_AUTH",
        "single",
        choice("single", "multi", "none"),
        "`single`: one local user, no login, but the access token is needed once per browser. "
        "`multi`: login page, users, bearer tokens. `none`: one local user and no token at all "
        "(anything that reaches the port can use Numi and its tools).",
    ),
    Setting(
        "NUMI_ACCESS_TOKEN",
        None,
        text,
        "Single-user mode's access token (`?token=` once per browser, or `Authorization: "
        "Bearer`). Generated and stored in the data directory when unset.",
    ),
    Setting(
        "NUMI_SECRET_KEY",
        None,
        text,
        "Signs session cookies; the key that encrypts stored API keys is derived from it "
        "(changing it makes them unreadable). Generated and stored in the data directory when "
        "unset.",
    ),
    Setting(
        "NUMI_SECURE_COOKIES",
        False,
        boolean,
        "Mark the session cookie Secure (sent over HTTPS only): set it when Numi is served through TLS.",
    ),
    Setting(
        "NUMI_TRUSTED_PROXIES",
        0,
        whole(),
        "Number of reverse proxies in front of Numi whose X-Forwarded-For, -Proto and -Host "
        "headers are trusted (werkzeug ProxyFix); 0 ignores those headers.",
    ),
    Setting(
        "NUMI_SESSION_LIFETIME_HOURS",
        168,
        number(),
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
        whole(),
        "Failed logins for one username from one address before delays start; one username from "
        "any address, or one address for any username, gets four times as many.",
    ),
    Setting(
        "NUMI_LOGIN_DELAY_SECONDS",
        5,
        number(),
        "The first delay after the free attempts; it doubles with each further failure.",
    ),
    Setting(
        "NUMI_SHARE_FREE_GUESSES",
        20,
        whole(),
        "Wrong share-link tokens one address may open before it is held back, for "
        "NUMI_LOGIN_DELAY_SECONDS doubling with each further one up to NUMI_LOGIN_MAX_DELAY_SECONDS.",
    ),
    Setting(
        "NUMI_LOGIN_MAX_DELAY_SECONDS",
        900,
        number(),
        "The longest delay (a temporary lockout). Failures are forgotten a day after the last one.",
    ),
    Setting(
        "NUMI_TEST_FAST_PASSWORD_HASHES",
        False,
        boolean,
        "For Numi's own test suite only: argon2id at its smallest cost, so hundreds of test "
        "logins are quick. Never set it for real users: a server without it rehashes such "
        "passwords at the next login, and one with it warns at start-up.",
    ),
    Setting(
        "NUMI_ALLOWED_HOSTS",
        (),
        lowercase_list,
        "Extra host names accepted in the Host header (comma separated); `*` accepts any. "
        "localhost and the bound address are always accepted.",
    ),
    Setting(
        "NUMI_API_RATE_PER_MINUTE",
        120,
        whole(),
        "Requests a minute each API key may send to /v1 (per process); past it, 429 with "
        "Retry-After. 0: no limit.",
    ),
    Setting(
        "NUMI_API_MAX_MESSAGES",
        2000,
        whole(1),
        "Most messages one /v1 request may carry.",
    ),
    Setting(
        "NUMI_API_MAX_BODY_BYTES",
        16 * 1024 * 1024,
        whole(1024),
        "Largest /v1 request body accepted (images included, base64); past it, 413.",
    ),
    Setting(
        "NUMI_API_CORS_ORIGINS",
        (),
        lowercase_list,
        "Browser origins allowed to call /v1 with an API key (comma separated, e.g. "
        "`https://app.example.org`). Empty: no CORS headers, so no web page can call /v1.",
    ),
    Setting(
        "NUMI_AUTO_ENDPOINTS",
        True,
        boolean,
        "On first start, add endpoints from OPENAI_API_KEY/OPENAI_BASE_URL, ANTHROPIC_API_KEY and a local Ollama.",
    ),
    Setting("NUMI_LOG_LEVEL", "INFO", log_level, "Python logging level."),
    Setting(
        "NUMI_PLUGINS",
        (),
        name_list,
        "Python modules (comma separated) whose `register(app)` is called at start-up, e.g. to add tools.",
    ),
    Setting(
        "PROMPT_MAX_HISTORY_MESSAGES",
        200,
        whole(),
        "Most saved messages loaded into one model request.",
    ),
    Setting(
        "PROMPT_MAX_HISTORY_CHARS",
        400_000,
        whole(),
        "Most characters of saved history loaded into one model request.",
    ),
    Setting(
        "NUMI_AUTO_COMPACT",
        True,
        boolean,
        "Compact a chat automatically before a model call when its prompt nears the context "
        "window (a chat's `auto_compact` setting overrides this).",
    ),
    Setting(
        "NUMI_AUTO_COMPACT_FRACTION",
        0.8,
        number(0, 1),
        "Auto-compaction starts when the estimated prompt exceeds this fraction of the model's context window.",
    ),
    Setting(
        "NUMI_COMPACT_MODEL",
        None,
        text,
        "Model that writes compaction summaries; default is the chat's own model.",
    ),
    Setting(
        "NUMI_COMPACT_KEEP_MESSAGES",
        4,
        whole(),
        "Newest messages a compaction leaves out of the summary (kept word for word).",
    ),
    Setting(
        "NUMI_DEFAULT_CONTEXT_WINDOW",
        32_768,
        whole(),
        "Context window (tokens) assumed for a model that reports none.",
    ),
    Setting(
        "NUMI_UPLOAD_MAX_BYTES",
        20 * 1024 * 1024,
        whole(),
        "Largest file accepted as an attachment.",
    ),
    Setting(
        "NUMI_UPLOAD_TYPES",
        (
            "text/",
            "application/pdf",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "application/json",
            "image/png",
            "image/jpeg",
            "image/gif",
            "image/webp",
        ),
        lowercase_list,
        "Attachment types accepted (comma separated MIME types; a trailing `/` accepts a whole "
        "family). Code files count as text.",
    ),
    Setting(
        "NUMI_IMAGE_MAX_SIDE",
        1568,
        whole(),
        "Images are downscaled so their longer side is at most this many pixels before they go to a model.",
    ),
    Setting(
        "NUMI_ATTACHMENT_MAX_TEXT_CHARS",
        200_000,
        whole(),
        "Most characters of a text, code or PDF attachment sent to the model.",
    ),
    Setting(
        "NUMI_PDF_MAX_PAGES",
        500,
        whole(),
        "Most pages of a PDF attachment whose text is read; later pages are left out, and the text says so.",
    ),
    Setting(
        "NUMI_DOCUMENTS_CONTEXT_TOKENS",
        1500,
        whole(),
        'Most tokens (about four characters each) of document passages a chat whose "Use '
        'documents" is automatic carries in its system context; the best passage always goes.',
    ),
    Setting(
        "NUMI_DOCUMENTS_CONTEXT_PASSAGES",
        5,
        whole(),
        'Most document passages a chat whose "Use documents" is automatic carries in a request.',
    ),
    Setting(
        "NUMI_PDF_MAX_SECONDS",
        30.0,
        number(),
        "Most wall-clock time reading one PDF's text may take (a child process, killed at the "
        "limit; the pages read so far are kept).",
    ),
    Setting(
        "NUMI_PDF_MAX_MEMORY_MB",
        512,
        whole(),
        "Address-space limit of the child process that reads a PDF's text.",
    ),
    Setting(
        "NUMI_PDF_MAX_STREAM_MB",
        32,
        whole(),
        "Most bytes one compressed stream of a PDF may inflate to while its text is read "
        "(decompression bombs stop there).",
    ),
    Setting(
        "NUMI_MAX_REQUEST_BYTES",
        32 * 1024 * 1024,
        whole(),
        "Largest HTTP request body accepted (uploads included).",
    ),
    Setting("NUMI_MAX_MESSAGE_CHARS", 200_000, whole(), "Longest user message accepted."),
    Setting(
        "NUMI_MARKDOWN_MAX_CHARS",
        100_000,
        whole(),
        "Longest message text rendered as markdown, saved or streaming; a longer one is shown as "
        'plain, escaped text with a "Show as markdown" button.',
    ),
    Setting(
        "NUMI_MARKDOWN_ON_REQUEST_MAX_CHARS",
        300_000,
        whole(),
        'Longest answer that "Show as markdown" renders on request (about a second of CPU); a '
        "longer one stays plain text. One such render runs at a time per user.",
    ),
    Setting("NUMI_MAX_TITLE_CHARS", 200, whole(), "Longest chat title accepted."),
    Setting(
        "NUMI_MAX_SYSTEM_PROMPT_CHARS", 50_000, whole(), "Longest per-chat system prompt accepted."
    ),
    Setting("NUMI_MAX_NAME_CHARS", 100, whole(), "Longest endpoint, user or token name accepted."),
    Setting("NUMI_MAX_PROJECT_NAME_CHARS", 100, whole(1), "Longest project name accepted."),
    Setting(
        "NUMI_MAX_PROJECT_INSTRUCTIONS_CHARS",
        20_000,
        whole(1),
        "Longest project instructions accepted (they join every request of the project's chats).",
    ),
    Setting("NUMI_MAX_MEMORY_CHARS", 500, whole(1), "Longest memory (one short fact) accepted."),
    Setting(
        "NUMI_MAX_MEMORIES",
        200,
        whole(1),
        "Most memories a user keeps (their own and their projects' together): with memory on, "
        "every request carries them.",
    ),
    Setting(
        "NUMI_IMPORT_MAX_CHATS",
        2_000,
        whole(1),
        "Most chats one import may hold (a chat export, a ChatGPT export or a project); a "
        "larger file is refused (`import_too_large`) and nothing is imported.",
    ),
    Setting(
        "NUMI_IMPORT_MAX_MESSAGES",
        200_000,
        whole(1),
        "Most messages one import may hold, all its chats together (`import_too_large`).",
    ),
    Setting(
        "NUMI_IMPORT_MAX_DEPTH",
        20_000,
        whole(1),
        "Longest chain of messages (each the reply to the one before) in one imported chat "
        "(`import_too_deep`).",
    ),
    Setting(
        "NUMI_IMPORT_MAX_WIDTH",
        1_000,
        whole(1),
        "Most versions of one message (replies to the same message) in an imported chat "
        "(`import_too_wide`).",
    ),
    Setting(
        "NUMI_TASK_MIN_INTERVAL_MINUTES",
        5,
        whole(1),
        "Scheduled tasks: the shortest time between two runs of a task's schedule; a schedule "
        "that runs more often is refused (`schedule_too_frequent`).",
    ),
    Setting(
        "NUMI_TASKS_PER_USER",
        50,
        whole(0),
        "Scheduled tasks: most tasks one user may keep (administrators too); one more is "
        "refused (`too_many_tasks`); 0: no one may create tasks.",
    ),
    Setting(
        "NUMI_MIRROR_ROOT",
        None,
        text,
        "The folder under which Markdown mirrors are kept (Settings → Markdown mirror). "
        "Multi-user mode: each user's mirror is its subfolder named after the user, and there "
        "is no mirror without it. Single-user mode: when set, the folder must lie inside it.",
    ),
    Setting(
        "NUMI_MIRROR_DELAY_SECONDS",
        2.0,
        number(0.0, 3600.0),
        "The Markdown mirror writes this long after a change, so a burst of changes (a turn's "
        "saves, an import) is one update.",
    ),
    Setting(
        "NUMI_MIRROR_MIN_FREE_MB",
        100,
        whole(),
        "The Markdown mirror pauses, with the reason in Settings, rather than leave less free "
        "space than this on the disk of its folder (where the database may live too).",
    ),
    Setting(
        "NUMI_MIRROR_RETRY_SECONDS",
        60.0,
        number(0.1, 86400.0),
        "A paused Markdown mirror (full disk, folder not writable) tries again this often, "
        "and resumes by catching up on every chat.",
    ),
    Setting(
        "NUMI_TASK_SCHEDULER",
        True,
        boolean,
        "Whether this process runs scheduled tasks when they are due (`numi serve` and each "
        "gunicorn worker; several processes run each due time once). Off: it serves pages only.",
    ),
    Setting(
        "NUMI_TASK_POLL_SECONDS",
        30,
        whole(1),
        "Scheduled tasks: how often a process looks again for due tasks changed by other "
        "processes (it wakes at its own next due time anyway).",
    ),
    Setting(
        "NUMI_MAX_JSON_DEPTH",
        64,
        whole(1),
        "Deepest nesting of arrays and objects accepted in a JSON body, import file or WebSocket message.",
    ),
    Setting(
        "NUMI_HEADER_TIMEOUT_SECONDS",
        10.0,
        number(),
        "`numi serve` closes a connection whose request line and headers have not arrived "
        "this long after it started waiting for them (slowloris; idle keep-alive included).",
    ),
    Setting(
        "NUMI_WS_MESSAGES_PER_SECOND",
        20.0,
        number(),
        "Client messages one WebSocket may send per second on average; a socket over "
        "`NUMI_WS_MESSAGE_BURST` is sent `rate_limited_client` and closed (1008).",
    ),
    Setting(
        "NUMI_WS_MESSAGE_BURST",
        40,
        whole(1),
        "Client messages one WebSocket may send at once before its rate limit applies.",
    ),
    Setting(
        "NUMI_WS_USER_MESSAGES_PER_SECOND",
        # High enough that a user whose hundred open chats resume at once is not cut off
        # (each socket sends one resume); a flood of one socket meets its own limit first.
        200.0,
        number(),
        "Client messages one user's WebSockets together may send per second in one server "
        "process (burst twice that).",
    ),
    Setting(
        "NUMI_PAGE_SIZE_CHATS", 50, whole(1), "Chats per page in the sidebar and GET /api/sessions."
    ),
    Setting(
        "NUMI_PAGE_SIZE_MESSAGES",
        50,
        whole(1),
        "Messages per page in the chat view and GET /api/history.",
    ),
    Setting(
        "NUMI_MODELS_CACHE_SECONDS",
        3600,
        whole(),
        "How long an endpoint's fetched model list is reused.",
    ),
    Setting("NUMI_PROVIDER_TIMEOUT_SECONDS", 600, number(), "Read timeout for a provider stream."),
    Setting(
        "NUMI_PROVIDER_IDLE_SECONDS",
        300,
        number(),
        "A provider stream that sends no token, reasoning or tool delta for this long (keep-alive "
        "comments do not count) ends with `provider_timeout`; 0 turns the deadline off.",
    ),
    Setting(
        "NUMI_PROVIDER_FIRST_TOKEN_SECONDS",
        30,
        number(),
        "A model that sends no token, reasoning or tool delta this long after the request was "
        "sent ends with `provider_timeout`, without retries: the next fallback answers at "
        "once; 0 turns the deadline off. Raise it for a model that thinks silently before it "
        "writes (reasoning it does not stream).",
    ),
    Setting(
        "NUMI_PROVIDER_HEADERS_SECONDS",
        30,
        number(),
        "A provider that sends no response status and headers this long after the request "
        "was sent is cut (`provider_timeout`, no retries: the next fallback answers); 0 leaves "
        "the wait to `NUMI_PROVIDER_TIMEOUT_SECONDS`.",
    ),
    Setting(
        "NUMI_PROVIDER_MAX_RETRIES",
        2,
        whole(),
        "Retries of rate-limited or failing provider calls, only before any output streamed.",
    ),
    Setting(
        "NUMI_PROVIDER_MAX_RETRY_SECONDS",
        30,
        number(),
        "Most seconds one provider call spends waiting between its retries (Retry-After "
        "included); a wait that would pass it is not made and the error is shown.",
    ),
    Setting("NUMI_MAX_STEPS", 12, whole(1), "Most model steps (tool rounds) in one turn."),
    Setting(
        "NUMI_BUDGET_OUTPUT_TOKENS",
        1000,
        whole(1),
        "Answer tokens a turn reserves on its budgets before it starts (with its request's "
        "estimate); the real usage replaces it when the turn ends.",
    ),
    Setting(
        "NUMI_TOOL_TIMEOUT_SECONDS",
        60,
        number(),
        "Time a tool may run before its call fails with a timeout result.",
    ),
    Setting(
        "NUMI_MCP_TIMEOUT_SECONDS",
        30,
        number(),
        "Time limit for one MCP server session (listing tools or one tool call).",
    ),
    Setting(
        "NUMI_MCP_TOOLS_CACHE_SECONDS",
        60,
        whole(),
        "How long a server's MCP tool list is reused before it is fetched again.",
    ),
    Setting(
        "NUMI_MCP_THREADS",
        4,
        whole(1),
        "OS threads of the pool that runs MCP sessions (its own: a hanging MCP server never takes "
        "the server's shared threads).",
    ),
    Setting(
        "NUMI_MCP_RETRY_SECONDS",
        5.0,
        number(),
        "First wait before a failed MCP server's tool list is fetched again; it doubles on each failure.",
    ),
    Setting(
        "NUMI_MCP_RETRY_MAX_SECONDS",
        300.0,
        number(),
        "Longest wait between tries of a failing MCP server's tool list.",
    ),
    Setting(
        "NUMI_FRAME_INTERVAL_MS",
        40,
        whole(),
        "Streaming deltas are coalesced into one WebSocket frame per interval.",
    ),
    Setting(
        "NUMI_TURN_BUFFER_EVENTS",
        4000,
        whole(1),
        "Events a running turn keeps for reconnecting clients.",
    ),
    Setting(
        "NUMI_TURN_BUFFER_BYTES",
        2 * 1024 * 1024,
        whole(),
        "Bytes of events a running turn keeps for reconnecting clients.",
    ),
    Setting(
        "NUMI_SUBSCRIBER_QUEUE",
        512,
        whole(1),
        "Events queued for one slow client before it is resynced by snapshot.",
    ),
    Setting(
        "NUMI_SAVE_RETRY_SECONDS",
        60.0,
        number(),
        "How long a turn retries saving an answer while the database is unavailable before it "
        "keeps the answer in a recovery file in the data directory (written back at the next "
        "start).",
    ),
    Setting(
        "NUMI_TURN_RETENTION_SECONDS",
        120,
        whole(),
        "How long a finished turn's events stay for late reconnects.",
    ),
    Setting(
        "NUMI_REDIS_URL",
        None,
        text,
        "Redis for live turns shared by many processes and hosts (e.g. redis://127.0.0.1:6379/0); "
        "unset: one process, turns in memory.",
    ),
    Setting(
        "NUMI_REDIS_PREFIX",
        "numi:",
        text,
        "Prefix of every Redis key and channel Numi uses (several installs can share one Redis).",
    ),
    Setting(
        "NUMI_TURN_LEASE_MS",
        6000,
        whole(),
        "With Redis: a turn's lease; a dead owner is noticed within 2/3 to 7/6 of it, its turn closed.",
    ),
    Setting(
        "NUMI_SHUTDOWN_GRACE_SECONDS",
        10.0,
        number(),
        "On SIGTERM: how long running answers may go on to finish; then each is saved as interrupted.",
    ),
    Setting(
        "NUMI_TITLE_MODEL",
        None,
        text,
        "Model for generated chat titles; default is the chat's own model.",
    ),
    Setting(
        "NUMI_GENERATE_TITLES",
        True,
        boolean,
        "Ask the model for a short title after a chat's first answer (else the first words of the question).",
    ),
    Setting(
        "NUMI_APPROVAL_TIMEOUT_SECONDS",
        300,
        number(),
        "How long a tool call waits for the user's approval before it counts as denied.",
    ),
    Setting(
        "NUMI_FETCH_MAX_BYTES",
        2_000_000,
        whole(),
        "Most bytes `web_search` and `fetch_page` read from one response.",
    ),
    Setting(
        "NUMI_FETCH_TIMEOUT_SECONDS",
        20,
        number(),
        "Most time one web search or page fetch (with its redirects) may take.",
    ),
    Setting(
        "NUMI_RESEARCH_MAX_STEPS",
        30,
        whole(1),
        "Research mode: the default most steps of a run (the plan, each search, each page "
        "read, the report); a send may ask for another, up to NUMI_RESEARCH_LIMIT_STEPS.",
    ),
    Setting(
        "NUMI_RESEARCH_MAX_PAGES",
        12,
        whole(1),
        "Research mode: the default most pages a run reads (up to NUMI_RESEARCH_LIMIT_PAGES).",
    ),
    Setting(
        "NUMI_RESEARCH_MAX_TOKENS",
        200_000,
        whole(1),
        "Research mode: the default most model tokens (in and out) a run spends before it "
        "writes its report (up to NUMI_RESEARCH_LIMIT_TOKENS).",
    ),
    Setting(
        "NUMI_RESEARCH_TIME_LIMIT_SECONDS",
        1200,
        whole(1),
        "Research mode: the default time a run may take before it writes its report, counted "
        "across restarts (up to NUMI_RESEARCH_LIMIT_SECONDS).",
    ),
    Setting(
        "NUMI_RESEARCH_LIMIT_STEPS",
        100,
        whole(1),
        "Research mode: the most steps a send may ask for (`research_budget_over_limit` above).",
    ),
    Setting(
        "NUMI_RESEARCH_LIMIT_PAGES",
        50,
        whole(1),
        "Research mode: the most pages a send may ask for.",
    ),
    Setting(
        "NUMI_RESEARCH_LIMIT_TOKENS",
        2_000_000,
        whole(1),
        "Research mode: the most tokens a send may ask for.",
    ),
    Setting(
        "NUMI_RESEARCH_LIMIT_SECONDS",
        3600,
        whole(1),
        "Research mode: the longest time limit a send may ask for.",
    ),
    Setting(
        "NUMI_RESEARCH_LIMIT_COST",
        100.0,
        number(),
        "Research mode: the highest cost limit a send may ask for, in the currency of the "
        "user's prices (a run has no cost limit unless its send asks for one).",
    ),
    Setting(
        "NUMI_RESEARCH_PARALLEL_READS",
        3,
        whole(1, 16),
        "Research mode: pages one run reads at once, never more.",
    ),
    Setting(
        "NUMI_RESEARCH_FOLLOW_LINKS",
        3,
        whole(0, 20),
        "Research mode: links a page found by a search may add to the pages to read (the "
        "first ones in its text not read yet; 0 follows none). Followed pages add none.",
    ),
    Setting(
        "NUMI_RESEARCH_PAGE_CHARS",
        8000,
        whole(500),
        "Research mode: the most characters of one page's text a run keeps and gives the model.",
    ),
    Setting(
        "NUMI_WORKSPACE_MAX_FILE_BYTES",
        1_000_000,
        whole(),
        "Largest file the workspace tools read, search or write.",
    ),
    Setting(
        "NUMI_BASH_TIMEOUT_SECONDS",
        120,
        number(),
        "Most time one `bash` command may run before it is killed.",
    ),
    Setting(
        "NUMI_BASH_MAX_OUTPUT_CHARS",
        20_000,
        whole(),
        "Output of a `bash` command kept for the model (its start and end).",
    ),
    Setting(
        "NUMI_CODE_TIMEOUT_SECONDS",
        60,
        number(),
        "Most time one `run_python` call may run: then the kernel is interrupted, and killed if it does not stop.",
    ),
    Setting(
        "NUMI_CODE_CPU_SECONDS",
        60,
        number(),
        "Most CPU time one `run_python` call may use before the kernel is interrupted.",
    ),
    Setting(
        "NUMI_CODE_MEMORY_MB",
        4096,
        whole(256),
        "Address space a Python kernel may take (RLIMIT_AS, in MB): a larger allocation raises MemoryError.",
    ),
    Setting(
        "NUMI_CODE_MAX_OUTPUT_CHARS",
        20_000,
        whole(1000),
        "Text output of one `run_python` call kept and shown; a flood past it is interrupted.",
    ),
    Setting(
        "NUMI_CODE_MAX_CHARS",
        100_000,
        whole(1),
        "Largest code one `run_python` call may send.",
    ),
    Setting(
        "NUMI_CODE_MAX_FILE_BYTES",
        10_000_000,
        whole(),
        "Largest file (or image) a `run_python` call keeps for download; a larger one is listed with its size only.",
    ),
    Setting(
        "NUMI_CODE_IMAGE_MAX_SIDE",
        768,
        whole(64),
        "Longer side, in pixels, of the `run_python` images a model that can see gets with the result (downscaled).",
    ),
    Setting(
        "NUMI_CODE_IDLE_MINUTES",
        15,
        number(),
        "A Python kernel unused for this long is shut down (its variables are gone).",
    ),
    Setting(
        "NUMI_CODE_MAX_KERNELS",
        3,
        whole(1),
        "Python kernels one user may have running at once (one per chat).",
    ),
    Setting(
        "NUMI_CODE_ALL_USERS",
        False,
        boolean,
        "Multi-user mode: offer `run_python` to every user, not only administrators.",
    ),
    Setting(
        "NUMI_CODE_NETWORK",
        False,
        boolean,
        "Let code run by `run_python` use the network (off: a network namespace, where `unshare` works).",
    ),
)


def load_config(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Read every setting from `environ` (default: os.environ) into a config dict.

    Raises SettingError (a ValueError) naming the variable when a value does not parse.
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
            shown = without_password(raw) if setting.name == "NUMI_DATABASE_URL" else raw
            raise SettingError("invalid_setting", f"{setting.name}={shown!r}: {exc}.") from None
    return config


def finalize(config: dict[str, Any]) -> dict[str, Any]:
    """Fill in what depends on other settings: data dir, database URL, secret key, access token."""
    data_dir = Path(config.get("NUMI_DATA_DIR") or default_data_dir()).expanduser()
    try:
        private_directory(data_dir)
        check_writable(data_dir)
    except OSError as exc:
        # A wheel install started from anywhere meets this first (a read-only home, a typo
        # in NUMI_DATA_DIR): one line naming the setting, not a traceback.
        raise SettingError(
            "data_dir_unwritable",
            f"NUMI_DATA_DIR={str(data_dir)!r}: cannot create or write the data directory "
            f"({exc.strerror or exc}). Set NUMI_DATA_DIR to a directory you can write.",
        ) from None
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
    if config.get("NUMI_SQLITE_MODULE") and config["NUMI_DATABASE_URL"].startswith("sqlite"):
        import importlib  # lazy: start-up time

        # SQLAlchemy's pysqlite dialect speaks to any module with sqlite3's interface.
        options = config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", {})
        options.setdefault("module", importlib.import_module(config["NUMI_SQLITE_MODULE"]))
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
