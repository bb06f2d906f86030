"""The one error type that crosses layers: a stable code, a human message, an HTTP status.

Lower layers raise `NumiError`; the web layer renders it as JSON (`{error: {code, message}}`),
as an HTML fragment, or as a WebSocket/SSE `error` event. The message is shown to the user,
so it never contains a stack trace, a secret or raw provider output.
"""

from __future__ import annotations

import errno


class NumiError(Exception):
    status = 400
    # turn_running: the request_id of the turn that runs (a retry of the same question
    # is told apart from another question).
    request_id: str | None = None

    def __init__(self, code: str, message: str, status: int | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        if status is not None:
            self.status = status

    def to_dict(self) -> dict:
        return {"code": self.code, "message": self.message}

    def line(self) -> str:
        """The refusal as a command or a server prints it at start: one line with the code."""
        return f"Error: {self.message} ({self.code})"


class NotFound(NumiError):
    """A missing, deleted or foreign object. Always 404: never reveal that it exists."""

    status = 404

    def __init__(self, what: str = "chat"):
        super().__init__("not_found", f"No such {what}.", 404)


def invalid(message: str, code: str = "invalid_input") -> NumiError:
    """A 400 for input that fails validation."""
    return NumiError(code, message, 400)


def no_model() -> NumiError:
    """The refusal of a chat with no model to answer with (a turn, a compaction, the home
    page's first question): one wording wherever it is found."""
    return NumiError("no_model", "Choose a model for this chat first (Settings → Endpoints).", 400)


def turn_running() -> NumiError:
    """The refusal of a change (a send, an edit, a compaction, a delete) while a turn runs in
    the chat it would touch: one code and one wording wherever it is found."""
    return NumiError(
        "turn_running", "A turn is still running; stop it or wait for its answer first.", 409
    )


def live_unavailable() -> NumiError:
    """The refusal of a send while the live turn state (Redis) cannot be reached: nothing
    was saved, and the client can send again."""
    return NumiError(
        "live_unavailable", "The server cannot reach Redis; try again in a moment.", 503
    )


def server_stopping() -> NumiError:
    """The refusal of a send while the server shuts down (SIGTERM): nothing was saved."""
    return NumiError("server_stopping", "The server is restarting; send again in a moment.", 503)


def storage_unavailable() -> NumiError:
    """The refusal while the database or the data directory cannot be written: an outage
    of the machine, not a bug of the request (503, so clients and balancers retry)."""
    return NumiError(
        "storage_unavailable",
        "The database cannot be reached or written (down, locked, full or read-only). "
        "Nothing was changed; try again when it is back.",
        503,
    )


_STORAGE_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EFBIG}


def is_storage_failure(exc: BaseException) -> bool:
    """The database or the data directory failed (connection refused or lost, locked, disk
    full, read-only) rather than the code: SQLAlchemy's OperationalError and InterfaceError
    and the file errors of a full or read-only disk. An IntegrityError stays a bug."""
    from sqlalchemy.exc import DBAPIError  # lazy: start-up time

    if isinstance(exc, DBAPIError):
        return exc.connection_invalidated or type(exc).__name__ in (
            "OperationalError",
            "InterfaceError",
        )
    if isinstance(exc, OSError):
        return exc.errno in _STORAGE_ERRNOS
    return False


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text (a database error's SQL and parameters left
    out), for a one-line log entry."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
