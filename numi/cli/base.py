"""The `numi` command group and what its commands share: the app (with the one-line
refusal of a bad setting), an app context with the schema up to date, and NumiErrors as
click errors."""

from __future__ import annotations

import sys
from typing import NoReturn

import click
from flask import Flask

from .. import __version__, create_app
from ..database import upgrade
from ..errors import NumiError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="numi")
def main():
    """Numi: a lightweight, self-hosted chat workstation for LLMs."""


def make_app(*, announce: bool = True) -> Flask:
    """The app from the environment's settings; a bad one stops here in one line."""
    try:
        app = create_app()
    except NumiError as exc:
        fail(exc)
    if announce:
        announce_data_dir(app)
    return app


def announce_data_dir(app: Flask) -> None:
    # A command run with another NUMI_DATA_DIR than the server's would silently act on
    # another database: say which one (stderr, so output stays parseable).
    click.echo(f"numi: data directory {app.config['NUMI_DATA_DIR']}", err=True)


def fail(exc: NumiError) -> NoReturn:
    """A NumiError that stops a command before it starts (a bad setting, a data directory
    that cannot be written or is in use): one line with its code, exit status 2."""
    click.echo(exc.line(), err=True)
    sys.exit(2)


def upgraded(app: Flask) -> Flask:
    """Bring the schema up to date before a command uses it; a database that is missing
    or cannot be reached stops here in one line."""
    try:
        upgrade(app)
    except NumiError as exc:
        fail(exc)
    return app


def ready_app() -> Flask:
    """The app with its schema up to date, its data directory named once it is (a refusal
    stays the one line)."""
    app = upgraded(make_app(announce=False))
    announce_data_dir(app)
    return app


class AppContext:
    """App + app context for a CLI command, with the schema brought up to date."""

    def __enter__(self) -> Flask:
        self.app = ready_app()
        self.ctx = self.app.app_context()
        self.ctx.push()
        return self.app

    def __exit__(self, *exc):
        self.ctx.pop()
        return False


def checked(action):
    """Run `action`; a NumiError it raises becomes a click error (one line, exit status 1)."""
    try:
        return action()
    except NumiError as exc:
        raise click.ClickException(f"{exc.message} ({exc.code})") from None
