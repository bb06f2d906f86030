"""`numi db`: the database schema."""

from __future__ import annotations

import click

from .base import main, ready_app


@main.group()
def db():
    """Database schema commands."""


@db.command("upgrade")
def db_upgrade():
    """Apply all pending migrations."""
    ready_app()
    click.echo("Database is up to date.")
