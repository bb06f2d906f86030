"""Saves that outlive a database outage: a finished answer is never thrown away.

A turn's saves (each step's message, tool results, a partial answer) go through
`DurableSaves.save`. When the database cannot take one (down, locked, disk full:
`numi.errors.is_storage_failure`), the turn keeps the message in memory and tries again
with back-off, after telling the chat's clients (`save_retry`: "Saving… the database is
unavailable"). No transaction is held meanwhile, and the turn keeps its chat, so nothing
else writes there. A SQLite lock is waited for briefly per try (`brief_lock_waits`), and
the turn yields between tries: SQLite's own wait would stop every greenlet. When the
database is back the save goes through and the turn goes on.

After NUMI_SAVE_RETRY_SECONDS, at once for a failure that retrying cannot mend, and at once
when the turn is cancelled (Stop, or the server stopping: `Turn.waiting_for_database` lets
the TurnManager cancel a waiting save without the shutdown grace), the message goes to a
recovery file in the data directory (numi.recovery), which the next start writes back; the
turn then ends with `save_deferred`. The message names no server path: the log does.

If even that file cannot be written (a full disk), the message stays in memory and the
turn goes on trying the database and the file until one takes it. Only when the turn is
cancelled meanwhile is it given up: the answer goes to the server log and the turn ends
with `save_lost`, which says so rather than promise it comes back.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import gevent.event
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from .. import recovery
from ..chat.context import ChatContextService
from ..database import brief_lock_waits
from ..errors import NumiError, first_line, is_storage_failure
from ..extensions import db
from ..models import Message
from ..turns.turn import Turn

log = logging.getLogger(__name__)

# Waits between tries: short first (a lock is often released at once), then every 5 s.
BACKOFF = (0.25, 0.5, 1.0, 2.0, 4.0, 5.0)


def save_deferred() -> NumiError:
    """The turn's answer is in a recovery file, not the database: the turn ends here."""
    return NumiError(
        "save_deferred",
        "The database was unavailable, so this answer could not be saved yet. It is kept on "
        "the server and added to this chat when Numi next starts.",
        503,
    )


def save_lost() -> NumiError:
    """The turn's answer could be kept neither in the database nor on disk: only the server
    log has it, and the user is told so."""
    return NumiError(
        "save_lost",
        "The database was unavailable and the server's disk refused a copy too, so this "
        "answer could not be kept. The operator can recover it from the server log.",
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
        is unavailable. Raises NumiError `save_deferred` once the message is in a recovery
        file, `save_lost` when it is only in the log, and ChatDeleted or IntegrityError as
        `save` does."""
        turn = self.turn
        started = time.monotonic()
        attempt = 0
        told = kept_in_memory = False
        database_may_take_it = True
        woken = gevent.event.Event()
        unregister = turn.on_cancel(woken.set)  # a cancel ends the wait between tries
        try:
            while True:
                if database_may_take_it:
                    try:
                        message = self._attempt(fields)
                    except IntegrityError:
                        raise
                    except SQLAlchemyError as exc:
                        self.context.release()  # a broken connection goes back to be replaced
                        database_may_take_it = is_storage_failure(exc)
                        failure = first_line(exc)
                    else:
                        self.tip_id = message.id
                        if told:
                            log.warning("saved a message of chat %s after %d retries",
                                        self.context.chat_id, attempt)  # fmt: skip
                            turn.emit("save_retry", {"saved": True, "message": "Saved."})
                        return message
                waited = time.monotonic() - started
                if not database_may_take_it or waited >= self.patience or turn.cancelled:
                    if not kept_in_memory:
                        log.error(
                            "saving a message of chat %s failed for %.0f s (%s): keeping it on disk",
                            self.context.chat_id, waited, failure,
                        )  # fmt: skip
                    self._keep_on_disk(fields, quiet=kept_in_memory)  # raises once kept
                    if turn.cancelled:
                        self._give_up(fields)
                    kept_in_memory = True
                if not told:
                    told = True
                    log.warning(
                        "saving a message of chat %s failed (%s); retrying for up to %s s",
                        self.context.chat_id, failure, self.patience,
                    )  # fmt: skip
                    turn.emit(
                        "save_retry",
                        {
                            "saved": False,
                            "message": "Saving… the database is unavailable. The answer is "
                            "kept and saved as soon as it is back.",
                        },
                    )
                delay = BACKOFF[min(attempt, len(BACKOFF) - 1)]
                attempt += 1
                if not kept_in_memory:
                    delay = min(delay, max(0.0, self.patience - waited))
                turn.waiting_for_database = True
                try:
                    woken.wait(delay)
                finally:
                    turn.waiting_for_database = False
        finally:
            unregister()

    def _attempt(self, fields: dict[str, Any]) -> Message:
        with brief_lock_waits(db.session):
            return self.context.save(**fields)

    def _keep_on_disk(self, fields: dict[str, Any], *, quiet: bool) -> None:
        """Write the message to the turn's recovery file and raise `save_deferred`; return
        when the disk refuses (logged once, unless `quiet`)."""
        request, lane = self.turn.request, self.turn.lane
        try:
            path = recovery.keep(
                self.data_dir,
                chat_id=request.chat_id,
                user_id=request.user_id,
                # The lanes of a compare turn share its id: each keeps a file of its own.
                turn_id=self.turn.id if lane is None else f"{self.turn.id}-lane{lane}",
                parent_id=self.tip_id,
                messages=[fields],
            )
        except OSError as exc:
            if not quiet:
                log.error(
                    "the answer of chat %s cannot be kept on disk either (%s): keeping it in "
                    "memory and trying the database and the disk again",
                    request.chat_id, exc,
                )  # fmt: skip
            return
        log.warning("the answer of chat %s is kept in %s; the next start saves it to its chat",
                    request.chat_id, path)  # fmt: skip
        raise save_deferred()

    def _give_up(self, fields: dict[str, Any]) -> None:
        # Cancelled (Stop, or the server stopping) with nowhere to keep the answer: the log
        # is the last place it can go, and the user is told so.
        request = self.turn.request
        log.error(
            "the answer of chat %s could not be kept (no database, no disk); here it is: %s",
            request.chat_id, json.dumps(fields, ensure_ascii=False, default=str),
        )  # fmt: skip
        raise save_lost()
