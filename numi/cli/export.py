"""`numi export`: every chat to files, for backups (`--all`) or as a readable Markdown mirror
(`--markdown`, numi/chat/markdown_mirror.py)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from sqlalchemy import select

from .. import prompts as prompt_store
from ..chat.export import export_filename, render_export
from ..chat.markdown_mirror import mirror_user
from ..extensions import db as database
from ..models import Chat, User
from .base import AppContext, main


@main.command("export")
@click.option(
    "--all",
    "directory",
    type=click.Path(file_okay=False, writable=True),
    metavar="DIR",
    help="Write every live chat into DIR/<user>/ (one file per chat), and the user's saved "
    "prompts into DIR/<user>/prompts.json.",
)
@click.option(
    "--markdown",
    "markdown_directory",
    type=click.Path(file_okay=False, writable=True),
    metavar="DIR",
    help="Mirror every live chat as one Markdown file in DIR/<user>/ (front matter, the shown "
    "branch; a subfolder per project). Run again to update the files in place: changed chats "
    "are rewritten, renamed ones renamed; a file Numi did not write is never overwritten.",
)
@click.option("--user", "username", help="Only this user's chats.")
@click.option(
    "--fmt",
    type=click.Choice(["json", "md", "txt", "html"]),
    default="json",
    show_default=True,
    help="json re-imports losslessly (POST /api/import or Settings → Import).",
)
def export_all(directory, markdown_directory, username, fmt):
    """Export chats to files, for backups (--all) or as a Markdown mirror (--markdown)."""
    if (directory is None) == (markdown_directory is None):
        raise click.UsageError("Give one of --all DIR or --markdown DIR.")
    with AppContext():
        stmt = select(User).order_by(User.id)
        if username:
            stmt = stmt.where(User.username == username)
        found = list(database.session.execute(stmt).scalars())
        if username and not found:
            raise click.ClickException(f"No user {username!r}.")
        if markdown_directory is not None:
            _mirror(found, Path(markdown_directory))
            return
        total = 0
        for owner in found:
            chats = (
                database.session.execute(
                    select(Chat)
                    .where(
                        Chat.user_id == owner.id,
                        Chat.deleted_at.is_(None),
                        Chat.temporary.is_(False),  # temporary chats are never kept
                    )
                    .order_by(Chat.created_at, Chat.id)
                )
                .scalars()
                .all()
            )
            document = prompt_store.export_document(owner.id)
            if not chats and not document["prompts"]:
                continue
            folder = Path(directory) / export_filename(owner.username, fmt).rsplit(".", 1)[0]
            folder.mkdir(parents=True, exist_ok=True)
            if document["prompts"]:
                # The user's saved prompts travel with their chats (Import reads this file too).
                (folder / "prompts.json").write_text(
                    json.dumps(document, ensure_ascii=False, indent=2), encoding="utf-8"
                )
            for chat in chats:
                exported = render_export(owner.id, chat, fmt)
                # The id keeps two chats with one title apart and makes reruns overwrite, not pile up.
                stem = exported.filename.rsplit(".", 1)[0]
                (folder / f"{stem}-{chat.id[:8]}.{fmt}").write_text(exported.body, encoding="utf-8")
                total += 1
            database.session.expunge_all()
        click.echo(f"Exported {total} chat{'' if total == 1 else 's'} to {directory}.")


def _mirror(users: list[User], directory: Path) -> None:
    written = unchanged = renamed = 0
    for owner in users:
        result = mirror_user(owner.id, directory / export_filename(owner.username, "md")[:-3])
        written, unchanged = written + len(result.written), unchanged + len(result.unchanged)
        renamed += len(result.renamed)
        for path, reason in result.skipped:
            click.echo(f"Skipped {path}: {reason}.", err=True)
        database.session.expunge_all()
    click.echo(
        f"Markdown mirror in {directory}: {written} written, {unchanged} unchanged, "
        f"{renamed} renamed."
    )
