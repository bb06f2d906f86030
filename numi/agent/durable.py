"""Saves that outlive a database outage: a finished answer is never thrown away.

A turn's saves (each step's message, tool results, a partial answer) go through
`DurableSaves.save`. When the database cannot take one (down, locked past its busy timeout,
disk full: `numi.errors.is_storage_failure`), the turn keeps the message in memory and
tries again with back-off, after telling the chat's clients (`save_retry`: "Saving… the
database is unavailable"). No transaction is held meanwhile, and the turn keeps its chat,
so nothing else writes there. When the database is back the save goes through and the turn
goes on. After NUMI_SAVE_RETRY_SECONDS (or at once, for a failure that retrying cannot
mend) the message goes to a recovery file in the data directory (numi.recovery), which the
next start writes back; the turn then ends with `save_deferred`, whose message names the
file. If even that file cannot be written, the answer goes to the server log.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import gevent
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from .. import recovery
from ..chat.context import ChatContextService
from ..errors import NumiError, first_line, is_storage_failure
from ..models import Message
from ..turns.turn import Turn

log = logging.getLogger(__name__)

# Waits between tries: short first (a lock is often released at once), then every 5 s.
BACKOFF = (0.25, 0.5, 1.0, 2.0, 4.0, 5.0)


def save_deferred(where: str) -> NumiError:
    """The turn's answer is in a recovery file, not the database: the turn ends here."""
    return NumiError(
        "save_deferred",
        f"The database was unavailable, so this answer could not be saved. It is kept in "
        f"{where} and is added to this chat when Numi next starts.",
        503,
    )


class DurableSaves:
    """The saves of one turn, retried through outages and kept on disk after a bound."""

    def __init__(self, app, turn: Turn, context: ChatContextService):
        self.turn = turn
        self.context = context
        self.data_dir = app.config["NUMI_DATA_DIR"]
        self.patience = app.config["NUMI_SAVE_RETRY_SECONDS"]
        self.tip_id: int | None = None  # the last row this turn saved or continues from

    def save(self, **fields: Any) -> Message:
        """Save one message (ChatContextService.save's fields); retried while the database
        is unavailable. Raises NumiError `save_deferred` once the message is in a recovery file, and
        ChatDeleted or IntegrityError as `save` does."""
        started = time.monotonic()
        attempt = 0
        told = False
        while True:
            try:
                message = self.context.save(**fields)
            except IntegrityError:
                raise
            except SQLAlchemyError as exc:
                self.context.release()  # a broken connection goes back to be replaced
                waited = time.monotonic() - started
                if not is_storage_failure(exc) or waited >= self.patience:
                    log.error(
                        "saving a message of chat %s failed for %.0f s (%s): keeping it on disk",
                        self.context.chat_id, waited, first_line(exc),
                    )  # fmt: skip
                    self._defer(fields)
                if not told:
                    told = True
                    log.warning(
                        "saving a message of chat %s failed (%s); retrying for up to %s s",
                        self.context.chat_id, first_line(exc), self.patience,
                    )  # fmt: skip
                    self.turn.emit(
                        "save_retry",
                        {
                            "saved": False,
                            "message": "Saving… the database is unavailable. The answer is "
                            "kept and saved as soon as it is back.",
                        },
                    )
                delay = BACKOFF[min(attempt, len(BACKOFF) - 1)]
                attempt += 1
                gevent.sleep(min(delay, max(0.0, self.patience - waited)))
                continue
            self.tip_id = message.id
            if told:
                log.warning("saved a message of chat %s after %d retries", self.context.chat_id,
                            attempt)  # fmt: skip
                self.turn.emit("save_retry", {"saved": True, "message": "Saved."})
            return message

    def _defer(self, fields: dict[str, Any]) -> None:
        request = self.turn.request
        try:
            path = recovery.keep(
                self.data_dir,
                chat_id=request.chat_id,
                user_id=request.user_id,
                turn_id=self.turn.id,
                parent_id=self.tip_id,
                messages=[fields],
            )
        except OSError as exc:
            # The disk refuses as well: the log is the last place the answer can go.
            log.error(
                "the answer of chat %s could not be kept on disk either (%s); here it is: %s",
                request.chat_id, exc, json.dumps(fields, ensure_ascii=False, default=str),
            )  # fmt: skip
            raise save_deferred("the server log") from None
        raise save_deferred(str(path))
