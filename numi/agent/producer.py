"""The turn producer: the one function the `TurnManager` runs in a greenlet for each turn.

The app factory hands it to the manager (`numi.turns` imports nothing of the agent). A
compare turn runs its lanes (`lanes.CompareAgent`), any other turn one loop (`runtime.Agent`).
"""

from __future__ import annotations

from ..turns.turn import Turn
from .lanes import CompareAgent
from .research import ResearchAgent
from .runtime import Agent


def run_turn(turn: Turn) -> None:
    """Run one turn to its end: its lanes for a compare turn, else one agent loop."""
    if turn.request.options.get("compare"):
        CompareAgent(turn).run()
    elif turn.request.options.get("research"):
        ResearchAgent(turn).run()
    else:
        Agent(turn).run()
