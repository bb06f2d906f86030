"""`numi user` and `numi token`: users, API tokens and the access token."""

from __future__ import annotations

import getpass
import sys

import click
from sqlalchemy import select

from ..extensions import db as database
from ..identity import hash_token, new_token
from ..models import ApiToken, User
from ..passwords import hash_password
from .base import AppContext, main, make_app


@main.group()
def user():
    """Manage users (multi-user mode)."""


@user.command("create")
@click.argument("username")
@click.option("--admin", is_flag=True, help="May manage shared endpoints and use workspace tools.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def user_create(username, admin, password_stdin):
    """Create USERNAME; asks for the password unless --password-stdin."""

    if not 1 <= len(username) <= 100:
        raise click.ClickException("A username has 1 to 100 characters.")
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass("Password: ")
        if getpass.getpass("Repeat: ") != password:
            raise click.ClickException("The passwords differ.")
    if len(password) < 8:
        raise click.ClickException("A password has at least 8 characters.")
    with AppContext():
        if database.session.execute(
            select(User).where(User.username == username)
        ).scalar_one_or_none():
            raise click.ClickException(f"User {username!r} exists already.")
        database.session.add(
            User(username=username, password_hash=hash_password(password), is_admin=admin)
        )
        database.session.commit()
        click.echo(f"Created user {username}{' (admin)' if admin else ''}.")


@user.command("list")
def user_list():
    """List users."""

    with AppContext():
        for u in database.session.execute(select(User).order_by(User.id)).scalars():
            click.echo(f"{u.id}\t{u.username}\t{'admin' if u.is_admin else ''}")


@main.group()
def token():
    """API bearer tokens (multi-user mode) and the access token (single-user mode)."""


@token.command("show")
def token_show():
    """Print single-user mode's access token (NUMI_ACCESS_TOKEN or the generated one)."""
    app = make_app()
    if app.config["NUMI_AUTH"] != "single":
        raise click.ClickException("Only single-user mode (NUMI_AUTH=single) has an access token.")
    click.echo(app.config["NUMI_ACCESS_TOKEN"])


@token.command("create")
@click.option("--user", "username", required=True, help="The user the token acts as.")
@click.option("--name", default="api", show_default=True, help="A label for the token.")
def token_create(username, name):
    """Create a bearer token for /api/*; it is shown once."""

    with AppContext():
        found = database.session.execute(
            select(User).where(User.username == username)
        ).scalar_one_or_none()
        if found is None:
            raise click.ClickException(f"No user {username!r}.")
        secret = new_token()
        database.session.add(
            ApiToken(user_id=found.id, name=name[:100], token_hash=hash_token(secret))
        )
        database.session.commit()
        click.echo(secret)
