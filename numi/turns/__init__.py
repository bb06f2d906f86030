"""Running turns: the TurnManager, per-chat event buffers and subscribers."""
