"""`numi import FILE`: the Import of Settings from the command line, through the same job.

The file goes through `web.import_runner.start_import` exactly as an upload does: the same
format detection from its content, caps, background job, all-or-nothing reveal and skip of
chats the user already has; the command waits for the job and prints what it added.
"""

from __future__ import annotations

import click
import gevent
from sqlalchemy import select

from ..chat import import_jobs
from ..errors import NumiError
from ..extensions import db as database
from ..identity import local_user
from ..models import User
from .base import AppContext, main

# How often the command looks at its job: the job's greenlet runs in this process meanwhile.
_POLL_SECONDS = 0.2


@main.command("import")
@click.argument("file", type=click.File("rb"))
@click.option("--user", "username", help="The user whose chats it adds to (multi-user mode).")
@click.option(
    "--preview",
    is_flag=True,
    help="Read and check the file and say what it would add; write nothing.",
)
def import_file(file, username, preview):
    """Import FILE (an export of Numi, ChatGPT, Open WebUI, Claude.ai, LibreChat, LobeHub,
    Chatbox, Cherry Studio, Jan, LM Studio or big-AGI; a project, prompts or memories file)
    as Settings → Import does."""
    # lazy: start-up time (the web layer stays out of the other commands)
    from ..web.import_runner import is_blank, spooled, start_import

    upload = file if file.seekable() else spooled(file)
    if is_blank(upload):
        raise click.ClickException("The file is empty. (invalid_import)")
    with AppContext() as app:
        owner = _owner(app, username)
        try:
            job = start_import(app, owner.id, upload, preview=preview)
        except NumiError as exc:
            raise click.ClickException(f"{exc.message} ({exc.code})") from None
        while job.running:
            gevent.sleep(_POLL_SECONDS)
            database.session.expire_all()
            job = import_jobs.get_job(owner.id, job.id)
        if job.state != "done":
            raise click.ClickException(f"{job.error_message} ({job.error_code})")
        if preview:
            click.echo(_preview_line(job.result["preview"]))
        else:
            click.echo(_summary(job.kind, job.result, job.total))


def _owner(app, username: str | None) -> User:
    if username:
        found = database.session.execute(
            select(User).where(User.username == username)
        ).scalar_one_or_none()
        if found is None:
            raise click.ClickException(f"No user {username!r}.")
        return found
    if app.config["NUMI_AUTH"] != "single":
        raise click.ClickException("Give --user NAME: whose chats the file adds to.")
    return local_user()


def _preview_line(found: dict) -> str:
    source = f" from {found['format']}" if found.get("format") else ""
    named = found.get("attachments", 0)
    files = f", {named} attachments (names only)" if named else ""
    lines = [
        f"{found['chats']} chats, {found['messages']} messages{files}{source}; "
        f"{found['imported_before']} imported before (skipped by an import); "
        f"{found.get('unreadable', 0)} unreadable. Nothing was written."
    ]
    for entry in found.get("unreadable_chats", []):
        title = f" {entry['title']!r}" if entry.get("title") else ""
        lines.append(f"  unreadable: conversation {entry['index'] + 1}{title}: {entry['reason']}")
    return "\n".join(lines)


def _summary(kind: str, result: dict, messages: int) -> str:
    if kind == "project":
        return f"Imported the project {result['project']['name']!r}."
    if kind in ("prompts", "memories"):
        skipped = result["skipped"]
        skipped = skipped if isinstance(skipped, int) else len(skipped)
        return f"Imported {len(result[kind])} {kind}; {skipped} already there."
    added = len(result["chats"])
    return (
        f"Imported {added} chat{'' if added == 1 else 's'} ({messages} messages in the file); "
        f"{result.get('skipped', 0)} already imported before."
    )
