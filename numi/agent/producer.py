"""The turn producer: the one function the `TurnManager` runs in a greenlet for each turn.

The app factory hands it to the manager (`numi.turns` imports nothing of the agent). A
compare turn runs its lanes (`lanes.CompareAgent`), any other turn one loop (`runtime.Agent`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_modules import lazy_module
from ..turns.turn import Turn
from .lanes import CompareAgent
from .runtime import Agent

# Research's loop is loaded by the first research turn, not at start-up.
if TYPE_CHECKING:
    from . import research
else:
    research = lazy_module("numi.agent.research")


def run_turn(turn: Turn) -> None:
    """Run one turn to its end: its lanes for a compare turn, else one agent loop."""
    if turn.request.options.get("compare"):
        CompareAgent(turn).run()
    elif turn.request.options.get("research"):
        research.ResearchAgent(turn).run()
    else:
        Agent(turn).run()
