"""Running turns (DESIGN §4-5, §8).

    turn.py       TurnRequest, Turn (what a producer writes to), StartGate
    channel.py    the in-process channel: a chat's event buffer, snapshot and subscribers
    table.py      the turn-table interface (TurnTable) and its in-process backend
    shared.py     its Redis backend (SharedTurns): leases, control, writer, sweeper
    redis_channel.py, redis_scripts.py   the Redis channel view and its Lua scripts
    manager.py    TurnManager: starts turns in greenlets with the injected producer

Nothing here imports the agent or the web layer: the app factory hands the manager its
producer (`numi.agent.runtime.run_turn`) and its turn-end hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import current_app

if TYPE_CHECKING:
    from flask import Flask

    from .manager import TurnManager

EXTENSION = "numi.turns"  # the key of the app's one TurnManager in `app.extensions`


def turn_manager(app: Flask | None = None) -> TurnManager:
    """The app's TurnManager (the current app's when `app` is None)."""
    return (app if app is not None else current_app).extensions[EXTENSION]
