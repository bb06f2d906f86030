"""The agent: one turn's loop of model calls and tool runs, and what goes into a request."""
