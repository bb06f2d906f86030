"""`numi dev`: tools for demos, development and benchmarks."""

from __future__ import annotations

import click

from .base import main


@main.group()
def dev():
    """Tools for demos, development and benchmarks."""


@dev.command("fake-provider")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8766, show_default=True)
@click.option(
    "--tokens-per-second",
    type=float,
    default=0,
    help="Pace of the default answer (0: as fast as possible).",
)
def fake_provider(host, port, tokens_per_second):
    """Run the scripted provider server (OpenAI Chat, Responses and Anthropic wire formats)."""
    # Every `numi` command imports this module (to list its commands).
    from ..testing.__main__ import serve as serve_fake  # lazy: start-up time

    serve_fake(host, port, tokens_per_second=tokens_per_second)
