"""`python -m numi.agent.tools.mcp`: the stdio bridge's child process (bridge._bridge_main)."""

from .bridge import _bridge_main

if __name__ == "__main__":
    _bridge_main()
