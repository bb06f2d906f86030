"""`numi key`: API keys for /v1 (the OpenAI- and Anthropic-compatible API) and /mcp."""

from __future__ import annotations

import click
from sqlalchemy import select

from ..errors import NumiError
from ..extensions import db as database
from ..gateway import keys as key_store
from ..identity import local_user
from ..models import User
from .base import AppContext, main


@main.group()
def key():
    """API keys that open /v1 and /mcp (and nothing else)."""


def _user_id(username: str | None) -> int:
    if username is None:
        return local_user().id
    found = database.session.execute(
        select(User).where(User.username == username)
    ).scalar_one_or_none()
    if found is None:
        raise click.ClickException(f"No user {username!r}.")
    return found.id


@key.command("create")
@click.option("--name", required=True, help='What the key is for ("Zed", "laptop script").')
@click.option(
    "--user",
    "username",
    default=None,
    help="Its owner (multi-user mode; default: the single user).",
)
@click.option("--no-keep", is_flag=True, help="Keep none of its conversations as chats.")
@click.option(
    "--use",
    "uses",
    multiple=True,
    type=click.Choice(key_store.USES),
    help="What it may do (repeat it): chat (/v1 and MCP's ask), history, documents, web, "
    "mcp. "
    "Default: chat.",
)
def key_create(name, username, no_keep, uses):
    """Make a key; the key is printed once (Numi keeps only its hash)."""
    with AppContext():
        try:
            _key, secret = key_store.create_key(
                _user_id(username), name, keep=not no_keep, uses=list(uses) or None
            )
        except NumiError as exc:
            raise click.ClickException(exc.line()) from None
        click.echo(secret)


@key.command("list")
@click.option("--user", "username", default=None, help="Whose keys (default: the single user).")
def key_list(username):
    """The keys: id, name, prefix, uses, last use, whether revoked."""
    with AppContext():
        for item in key_store.list_keys(_user_id(username)):
            state = "revoked" if item.revoked_at else f"last used {item.last_used_at or 'never'}"
            uses = ",".join(key_store.key_uses(item.scopes))
            click.echo(f"{item.id}\t{item.name}\t{item.prefix}…\t{uses}\t{state}")


@key.command("revoke")
@click.argument("key_id", type=int)
@click.option("--user", "username", default=None, help="Its owner (default: the single user).")
def key_revoke(key_id, username):
    """Revoke a key now."""
    with AppContext():
        try:
            key_store.revoke_key(_user_id(username), key_id)
        except NumiError as exc:
            raise click.ClickException(exc.line()) from None
        click.echo(f"Revoked key {key_id}.")
