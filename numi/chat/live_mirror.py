"""The live Markdown mirror: a user's chats kept as Markdown files in a folder (Settings →
Markdown mirror), updated within seconds of any change (issue 42).

Every committed change to a chat or a message (a finished turn, a rename, a move to a
project, a delete, an edit, an import) is noted by a session hook (`watch_changes`) and
handed to the app's `MirrorKeeper`, which waits `NUMI_MIRROR_DELAY_SECONDS` so that a burst
is one update. It then reads the changed chats (numi/chat/markdown_mirror.py's
`chat_files`, a short read with no transaction kept) and writes their files in a thread of
its own (`write_files`: temporary file then rename, never over a file without the
`generated_by: numi` marker), so a slow or stuck disk never holds the hub or a turn. A
deleted chat's file moves to `.trash/` in the folder.

The first update of a user in a process, and every update after a pause, checks the whole
folder against every chat (a restart in the middle of mirroring, or changes while paused,
are caught up on). A full disk (less than `NUMI_MIRROR_MIN_FREE_MB` left, or ENOSPC) or a
folder that cannot be written pauses the mirror with the reason kept in the user's setting
for Settings to show; it tries again every `NUMI_MIRROR_RETRY_SECONDS` and on the next
change, and resumes by itself.

The folder: in multi-user mode the admin's `NUMI_MIRROR_ROOT`/<user>, nothing a user types;
in single-user mode a full path the user names (inside `NUMI_MIRROR_ROOT` when that is set).
Never inside the data directory; symlinks are resolved before the check, and again before
each update.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import gevent
from flask import Flask, has_app_context
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from ..cpu_pool import hub_pool
from ..errors import NumiError, first_line, invalid, is_storage_failure
from ..extensions import db
from ..models import Chat, Message, Project, User
from ..services import services
from .export import export_filename
from .markdown_mirror import (
    ChatFile,
    MirrorResult,
    chat_files,
    live_chat_ids,
    mirrored_files,
    write_files,
)

log = logging.getLogger(__name__)

# session.info keys: chat id -> its owner (None when only a message of it was seen); the
# users whose whole folder changes (a project renamed or deleted renames its subfolder).
_CHANGED = "numi_mirror_changed"
_USERS = "numi_mirror_users"
# One thread per process for the mirror's file work: a slow disk waits there, not in the CPU
# pool (renders) or gevent's threadpool (host name look-ups).
_POOL = "numi_mirror_files"
# A catch-up reads and writes this many chats at a time; the hub serves others in between.
_BATCH = 50
_MB = 1024 * 1024


@dataclass(frozen=True)
class MirrorState:
    """What Settings → Markdown mirror shows."""

    folder: str | None  # None: off
    paused: str | None  # why the mirror waits, in words
    chooses_folder: bool  # single-user mode: the user names the folder
    root: str | None


def state(config: Mapping[str, Any], user: User) -> MirrorState:
    setting = user.mirror
    paused = setting.get("paused")
    return MirrorState(
        folder=setting.get("folder"),
        paused=paused["message"] if isinstance(paused, dict) else None,
        chooses_folder=config["NUMI_AUTH"] != "multi",
        root=config.get("NUMI_MIRROR_ROOT"),
    )


def turn_on(app: Flask, user: User, raw: str | None) -> Path:
    """Mirror the user's chats to the folder `raw` names (single-user mode; multi-user mode
    ignores it), after checking it can be written; the first update starts at once."""
    folder = resolve_folder(app.config, user, raw)
    _files(_check_writable, folder, app.config["NUMI_MIRROR_MIN_FREE_MB"])
    user.mirror = {"folder": str(folder)}
    db.session.commit()
    keeper(app).sync_user(user.id)
    return folder


def turn_off(user: User) -> None:
    """Stop mirroring (the files stay as they are)."""
    user.mirror_json = None
    db.session.commit()


def resolve_folder(config: Mapping[str, Any], user: User, raw: str | None) -> Path:
    """The checked folder of the user's mirror, symlinks resolved."""
    root_setting = config.get("NUMI_MIRROR_ROOT")
    root = Path(root_setting).expanduser().resolve() if root_setting else None
    if config["NUMI_AUTH"] == "multi":
        if root is None:
            raise invalid(
                "The Markdown mirror needs a root folder set by the admin (NUMI_MIRROR_ROOT) "
                "in multi-user mode.",
                "mirror_no_root",
            )
        stem = export_filename(user.username, "md")[: -len(".md")]
        # Two names that read alike once made safe for a file name keep apart by the id.
        folder = root / (stem if stem == user.username else f"{stem}-{user.id}")
    else:
        text = (raw or "").strip()
        if not text or "\x00" in text or len(text) > 1000:
            raise invalid("Name the folder to keep the Markdown files in.", "mirror_folder_invalid")
        folder = Path(text).expanduser()
        if not folder.is_absolute():
            if root is None:
                raise invalid(
                    "Give the folder's full path (for example /home/me/Notes/Numi).",
                    "mirror_folder_invalid",
                )
            folder = root / folder
    folder = folder.resolve()
    if root is not None and not folder.is_relative_to(root):
        raise invalid(f"The mirror folder must lie inside {root}.", "mirror_outside_root")
    data = Path(config["NUMI_DATA_DIR"]).expanduser().resolve()
    if folder.is_relative_to(data):
        raise invalid(
            "The mirror folder cannot lie inside Numi's data directory.",
            "mirror_folder_in_data_dir",
        )
    return folder


def keeper(app: Flask) -> MirrorKeeper:
    return services(app).mirror


class MirrorKeeper:
    """The app's live mirror in this process (`Services.mirror`)."""

    def __init__(self, app: Flask):
        self.app = app
        self.changed: dict[str, int | None] = {}
        self.catch_up: set[int] = set()  # users whose whole folder is checked next
        self.caught_up: set[int] = set()  # users whose whole folder this process checked
        self.writer: gevent.Greenlet | None = None
        self.retries: dict[int, gevent.Greenlet] = {}

    def touch(self, changed: Mapping[str, int | None]) -> None:
        """Chats changed: their files are updated after the delay (never blocks)."""
        for chat_id, owner in changed.items():
            if owner is not None or chat_id not in self.changed:
                self.changed[chat_id] = owner
        self._wake()

    def sync_user(self, user_id: int) -> None:
        """Check the user's whole folder against every chat after the delay."""
        self.catch_up.add(user_id)
        self._wake()

    def idle(self) -> bool:
        """Nothing waits to be written (for tests and a stopping process)."""
        return self.writer is None and not self.changed and not self.catch_up

    def stop(self) -> None:
        """End the writer and the retries (what was not written is caught up on later)."""
        gevent.killall([g for g in chain([self.writer], self.retries.values()) if g])
        self.writer, self.changed, self.catch_up = None, {}, set()
        self.retries.clear()

    def _wake(self) -> None:
        if self.writer is None:
            delay = self.app.config["NUMI_MIRROR_DELAY_SECONDS"]
            self.writer = gevent.spawn_later(delay, self._run)

    def _run(self) -> None:
        database_down = False
        try:
            with self.app.app_context():
                while (self.changed or self.catch_up) and not database_down:
                    changed, self.changed = self.changed, {}
                    catch_up, self.catch_up = self.catch_up, set()
                    try:
                        self._update(changed, catch_up)
                    except Exception as exc:
                        if not is_storage_failure(exc):
                            log.exception("The Markdown mirror could not be updated")
                            continue
                        # An outage, not a bug: the changes wait for the database.
                        log.warning(
                            "The Markdown mirror waits for the database: %s", first_line(exc)
                        )
                        for chat_id, owner in changed.items():
                            self.changed.setdefault(chat_id, owner)
                        self.catch_up |= catch_up
                        database_down = True
                    finally:
                        db.session.remove()
        finally:
            self.writer = None
            if database_down:
                retry = self.app.config["NUMI_MIRROR_RETRY_SECONDS"]
                self.writer = gevent.spawn_later(retry, self._run)

    def _update(self, changed: dict[str, int | None], catch_up: set[int]) -> None:
        owners = {chat_id: owner for chat_id, owner in changed.items() if owner is not None}
        unknown = [chat_id for chat_id, owner in changed.items() if owner is None]
        if unknown:
            owners.update(
                db.session.execute(
                    select(Chat.id, Chat.user_id).where(Chat.id.in_(unknown))
                ).tuples()
            )
        by_user: dict[int, set[str]] = defaultdict(set)
        for chat_id, owner in owners.items():
            by_user[owner].add(chat_id)
        users = db.session.execute(
            select(User).where(User.id.in_(set(by_user) | catch_up), User.mirror_json.is_not(None))
        ).scalars()
        for user_id, setting in [(user.id, user.mirror) for user in users]:
            if setting.get("folder"):
                whole = user_id in catch_up or user_id not in self.caught_up
                self._mirror(user_id, setting, by_user[user_id], whole or "paused" in setting)

    def _mirror(self, user_id: int, setting: dict, chat_ids: set[str], whole: bool) -> None:
        user = db.session.get(User, user_id)
        min_free = self.app.config["NUMI_MIRROR_MIN_FREE_MB"]
        try:
            folder = resolve_folder(self.app.config, user, setting["folder"])
            if whole:
                result = self._catch_up(user_id, folder, min_free)
            else:
                files = chat_files(user_id, chat_ids)
                db.session.commit()  # no transaction held while the files are written
                gone = chat_ids - {file.chat_id for file in files}
                result = _files(_write, folder, files, gone, None, min_free)
        except NumiError as paused:  # a full disk, or a folder no longer allowed
            self._pause(user_id, paused)
            return
        except FileNotFoundError:
            # Another process of this Numi moved the file first (both follow the same
            # change): not a reason to pause; the whole folder is checked again later.
            self.caught_up.discard(user_id)
            self._retry_later(user_id)
            return
        except OSError as error:
            self._pause(user_id, _os_pause(error))
            return
        if whole:
            self.caught_up.add(user_id)
        for path, reason in result.skipped:
            log.warning("Markdown mirror: skipped %s: %s", path, reason)
        if "paused" in setting:
            user = db.session.get(User, user_id)
            if user is not None and user.mirror.get("folder") == setting["folder"]:
                user.mirror = {"folder": setting["folder"]}
                db.session.commit()
            log.info("The Markdown mirror of user %s resumed", user_id)

    def _catch_up(self, user_id: int, folder: Path, min_free: int) -> MirrorResult:
        """The whole folder brought up to date: every live chat written, the files of chats
        that are gone moved to `.trash/`."""
        live = live_chat_ids(user_id)
        db.session.commit()
        known = _files(_scan, folder, min_free)
        result = MirrorResult()
        for start in range(0, len(live), _BATCH):
            files = chat_files(user_id, live[start : start + _BATCH])
            db.session.commit()
            done = _files(_write, folder, files, (), known, min_free)
            result.written += done.written
            result.skipped += done.skipped
        gone = set(known) - set(live)
        if gone:
            result.trashed = _files(_write, folder, [], gone, known, min_free).trashed
        return result

    def _pause(self, user_id: int, paused: NumiError) -> None:
        user = db.session.get(User, user_id)
        setting = user.mirror if user is not None else {}
        if setting.get("folder"):
            setting["paused"] = {"code": paused.code, "message": paused.message}
            user.mirror = setting
            db.session.commit()
            log.warning("The Markdown mirror of user %s paused: %s", user_id, paused.message)
        self.caught_up.discard(user_id)
        self._retry_later(user_id)

    def _retry_later(self, user_id: int) -> None:
        retry = self.retries.get(user_id)
        if retry is None or retry.dead:
            seconds = self.app.config["NUMI_MIRROR_RETRY_SECONDS"]
            self.retries[user_id] = gevent.spawn_later(seconds, self._retry, user_id)

    def _retry(self, user_id: int) -> None:
        self.retries.pop(user_id, None)
        self.sync_user(user_id)


def watch_changes() -> None:
    """Hand every committed change of a chat or a message to the app's keeper (once per
    process: the hooks are on SQLAlchemy's Session class, and find the app when they run)."""
    if not event.contains(Session, "after_flush", _note_changes):
        event.listen(Session, "after_flush", _note_changes)
        event.listen(Session, "after_commit", _tell_keeper)
        event.listen(Session, "after_rollback", _forget_changes)


def mirror_after_turn(turn: Any) -> None:
    """A turn-end hook of the turn manager: a turn saves its messages with statements the
    session hook does not see, so its chat is noted when it ends."""
    services().mirror.touch({turn.request.chat_id: turn.request.user_id})


def note_changes(owner: int, chat_ids: Collection[str]) -> None:
    """Chats changed by a statement the session hook does not see (a bulk UPDATE): their
    files are updated once the current transaction commits."""
    changed = db.session.info.setdefault(_CHANGED, {})
    changed.update(dict.fromkeys(chat_ids, owner))


def _note_changes(session: Session, _context: Any) -> None:
    changed = session.info.setdefault(_CHANGED, {})
    for item in chain(session.new, session.dirty, session.deleted):
        if isinstance(item, Chat):
            changed[item.id] = item.user_id
        elif isinstance(item, Message):
            changed.setdefault(item.chat_id, None)
        elif isinstance(item, Project):
            session.info.setdefault(_USERS, set()).add(item.user_id)


def _tell_keeper(session: Session) -> None:
    changed, users = session.info.pop(_CHANGED, None), session.info.pop(_USERS, None)
    if (changed or users) and has_app_context():
        found = services().mirror
        if changed:
            found.touch(changed)
        for user_id in users or ():
            found.sync_user(user_id)


def _forget_changes(session: Session) -> None:
    session.info.pop(_CHANGED, None)
    session.info.pop(_USERS, None)


def _files(function, *args):
    """`function(*args)` in the mirror's own thread; the calling greenlet waits."""
    return hub_pool(_POOL, 1).apply(function, args)


def _scan(folder: Path, min_free: int) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    _check_room(folder, 0, min_free)
    return mirrored_files(folder)


def _write(
    folder: Path,
    files: list[ChatFile],
    trash: Collection[str],
    known: dict[str, Path] | None,
    min_free: int,
) -> MirrorResult:
    folder.mkdir(parents=True, exist_ok=True)
    needed = sum(len(f.body.encode()) + sum(a.size for a in f.attachments) for f in files)
    _check_room(folder, needed, min_free)
    return write_files(folder, files, trash, known)


def _check_room(folder: Path, needed: int, min_free: int) -> None:
    free = shutil.disk_usage(folder).free
    if free - needed < min_free * _MB:
        raise NumiError(
            "mirror_disk_full",
            f"The disk of the mirror folder is full ({free // _MB} MB free; the mirror leaves "
            f"at least {min_free} MB). It goes on by itself once there is room.",
            507,
        )


def _check_writable(folder: Path, min_free: int) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".numi-", suffix=".probe")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise _os_pause(error) from None
    _check_room(folder, 0, min_free)


def _os_pause(error: OSError) -> NumiError:
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return NumiError(
            "mirror_disk_full",
            "The disk of the mirror folder is full. It goes on by itself once there is room.",
            507,
        )
    return NumiError(
        "mirror_folder_not_writable",
        f"The mirror folder cannot be written ({error.strerror or error}). It goes on by "
        "itself once it can.",
        400,
    )
