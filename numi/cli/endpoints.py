"""`numi endpoint`: the shared provider endpoints."""

from __future__ import annotations

import os
import sys

import click
from sqlalchemy import select

from ..endpoints import (
    create_endpoint,
    fetch_models,
    find_by_name,
    missing_default_model,
    model_capabilities,
    models,
    remove_endpoint,
    update_endpoint,
)
from ..extensions import db as database
from ..models import Endpoint
from ..providers.kinds import kind_names
from .base import AppContext, checked, main


@main.group()
def endpoint():
    """Manage provider endpoints (shared by every user)."""


@endpoint.command("add")
@click.argument("name")
@click.option("--kind", type=click.Choice(kind_names()), default="openai_chat", show_default=True)
@click.option(
    "--base-url", required=True, help="e.g. http://127.0.0.1:11434/v1 or https://api.anthropic.com"
)
@click.option(
    "--api-key-env", metavar="VAR", help="Read the API key from this environment variable."
)
@click.option("--api-key-stdin", is_flag=True, help="Read the API key from standard input.")
@click.option("--default-model", help="Model new chats use.")
def endpoint_add(name, kind, base_url, api_key_env, api_key_stdin, default_model):
    """Add a shared endpoint NAME. Keys never go on the command line (shell history)."""
    api_key = _api_key(api_key_env, api_key_stdin)
    fields = {
        "name": name,
        "kind": kind,
        "base_url": base_url,
        "api_key": api_key,
        "default_model": default_model,
    }
    with AppContext() as app:
        created = checked(
            lambda: create_endpoint(None, fields, max_name=app.config["NUMI_MAX_NAME_CHARS"])
        )
        click.echo(f"Added endpoint {created.name} (id {created.id}).")
        _report_models(created, fetch_models(created))


@endpoint.command("edit")
@click.argument("name")
@click.option("--name", "new_name", help="A new name.")
@click.option("--base-url", help="A new base URL.")
@click.option(
    "--api-key-env",
    metavar="VAR",
    help="Replace the API key with this environment variable's value.",
)
@click.option(
    "--api-key-stdin",
    is_flag=True,
    help="Replace the API key with a line read from standard input.",
)
@click.option("--default-model", help="Model new chats use (empty to clear).")
@click.option("--reasoning-policy", type=click.Choice(["auto", "preserve", "strip"]))
@click.option("--enable/--disable", "enabled", default=None, help="Offer the endpoint, or not.")
def endpoint_edit(
    name, new_name, base_url, api_key_env, api_key_stdin, default_model, reasoning_policy, enabled
):
    """Change the shared endpoint NAME; options not given stay as they are."""
    if api_key_env and api_key_stdin:
        raise click.UsageError("Give --api-key-env or --api-key-stdin, not both.")
    fields = {
        key: value
        for key, value in (
            ("name", new_name),
            ("base_url", base_url),
            ("default_model", default_model),
            ("reasoning_policy", reasoning_policy),
            ("enabled", enabled),
        )
        if value is not None
    }
    api_key = _api_key(api_key_env, api_key_stdin)
    if api_key:
        fields["api_key"] = api_key
    if not fields:
        raise click.UsageError("Nothing to change: give at least one option.")
    with AppContext() as app:
        found = _shared_endpoint(name)
        checked(lambda: update_endpoint(found, fields, max_name=app.config["NUMI_MAX_NAME_CHARS"]))
        click.echo(f"Updated endpoint {found.name} (id {found.id}).")
        if found.models_fetched_at is None and {"base_url", "api_key"} & set(fields):
            _report_models(found, fetch_models(found))  # pointed at another server or key


def _shared_endpoint(name: str):
    """The shared endpoint NAME, or a one-line refusal."""
    found = find_by_name(None, name)
    if found is None:
        raise click.ClickException(f"No shared endpoint named {name!r}.")
    return found


def _report_models(endpoint, problem: str | None) -> None:
    """One line on the fetched model list: how many, and the default model's context
    size and tools as the server reported them (or why the list is missing)."""
    if problem:
        click.echo(f"Models not fetched ({problem}); they will be fetched again later.")
        return
    line = f"{len(endpoint.models)} model{'s' if len(endpoint.models) != 1 else ''} listed"
    if endpoint.default_model:
        caps = model_capabilities(endpoint, endpoint.default_model)
        window = f"{caps.context_window:,} tokens" if caps.context_window else "unknown"
        line += (
            f"; {endpoint.default_model}: context {window} ({caps.sources['context_window']}),"
            f" tools {'on' if caps.tools else 'off'} ({caps.sources['tools']})"
        )
    click.echo(line + ".")


def _api_key(api_key_env: str | None, api_key_stdin: bool) -> str | None:
    """The key from an environment variable or standard input (never from the command line)."""
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise click.ClickException(f"{api_key_env} is not set.")
        return api_key
    if api_key_stdin:
        return sys.stdin.readline().strip() or None
    return None


@endpoint.command("list")
def endpoint_list():
    """List shared and per-user endpoints."""

    with AppContext():
        rows = database.session.execute(
            select(Endpoint).where(Endpoint.deleted_at.is_(None)).order_by(Endpoint.id)
        ).scalars()
        for e in rows:
            owner = "shared" if e.user_id is None else f"user {e.user_id}"
            click.echo(
                f"{e.id}\t{e.name}\t{e.kind}\t{e.base_url}\t{e.default_model or '-'}\t{owner}"
            )


@endpoint.command("remove")
@click.argument("name")
def endpoint_remove(name):
    """Remove the shared endpoint NAME."""
    with AppContext():
        found = _shared_endpoint(name)
        remove_endpoint(found)
        click.echo(f"Removed endpoint {name}.")


@endpoint.command("models")
@click.argument("name")
def endpoint_models(name):
    """Fetch and list the models of the shared endpoint NAME (also a connection test)."""
    with AppContext():
        found = _shared_endpoint(name)
        for model in checked(lambda: models(found, max_age_seconds=0, refresh=True)):
            click.echo(model["id"])
        problem = missing_default_model(found)
        if problem:
            raise click.ClickException(problem)
