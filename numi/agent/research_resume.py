"""Research runs resumed when a process starts: a run that a stopped or crashed process left
unfinished (`running` or `writing`) is answered again by a new turn for its question, which
reads the run's saved steps and goes on from the last one (`research.ResearchAgent`): no
saved search runs again and no saved page is fetched again, and its progress view says
"resumed after a restart".

`numi serve` and each gunicorn worker run `keep_resuming` in a greenlet: a round at start,
then one every lease period (`NUMI_TURN_LEASE_MS`, at least 1 s: one indexed query). A run whose chat another
turn holds (another live process's, or with Redis a dead owner's until its lease lapses and
a sweeper closes it) is left for a later round: so with several processes on PostgreSQL and
Redis, a live process takes over a run whose owner died. A run resumed `MAX_RESUMES` times
(a run that crashes its turn each time) is ended as failed instead of tried forever.
"""

from __future__ import annotations

import logging

import gevent
from sqlalchemy import select

from ..chat.request_meta import stored_request
from ..errors import NumiError
from ..extensions import db, turn_manager
from ..models import Chat, Message, User
from ..turns.turn import TurnRequest
from . import research_store as store

log = logging.getLogger(__name__)

MAX_RESUMES = 5


def keep_resuming(app) -> None:
    """Resume unfinished runs now, then every lease period, until the process stops."""
    interval = max(1.0, app.config["NUMI_TURN_LEASE_MS"] / 1000)
    while True:
        resume_research(app)
        gevent.sleep(interval)


def resume_research(app) -> list[str]:
    """Start a turn for each unfinished run whose chat is idle; the chats resumed."""
    resumed: list[str] = []
    with app.app_context():
        try:
            manager = turn_manager()
            for run in store.unfinished_runs():
                if manager.stopping:
                    break
                if manager.is_running(run.chat_id):
                    continue
                request = _request(run)
                if request is None or run.resumes >= MAX_RESUMES:
                    store.set_status(run, "failed", run.elapsed_seconds)
                    continue
                db.session.commit()
                try:
                    manager.start(request)
                except NumiError as exc:
                    log.info("research in chat %s not resumed here: %s", run.chat_id, exc.code)
                    continue
                resumed.append(run.chat_id)
        except Exception:
            log.exception("resuming research runs failed")
        finally:
            db.session.remove()
    if resumed:
        log.info("resumed %d research run(s) after a restart", len(resumed))
    return resumed


def _request(run) -> TurnRequest | None:
    """The turn that answers the run's question again (None: its question, chat or user is
    gone)."""
    question = db.session.execute(
        select(Message).where(Message.chat_id == run.chat_id, Message.request_id == run.request_id)
    ).scalar_one_or_none()
    chat = db.session.get(Chat, run.chat_id)
    user = db.session.get(User, run.user_id)
    if question is None or user is None or chat is None or chat.deleted_at is not None:
        return None
    metadata = stored_request(question.content_parts) or {}
    return TurnRequest(
        user_id=run.user_id,
        chat_id=run.chat_id,
        message=question.content or "",
        request_id=run.request_id,
        timezone=metadata.get("timezone"),
        tz_offset_minutes=metadata.get("tz_offset"),
        is_admin=bool(user.is_admin),
        options={"research": run.budget},
        metadata=metadata,
    )
