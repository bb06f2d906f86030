"""Running turns (DESIGN §4-5, §8).

    turn.py       TurnRequest, Turn (what a producer writes to), StartGate
    channel.py    the in-process channel: a chat's event buffer, snapshot and subscribers
    table.py      the turn-table interface (TurnTable) and its in-process backend
    shared.py     its Redis backend (SharedTurns): the table and the writer, with its parts
                  redis_leases.py (leases, heartbeat, sweeper), redis_control.py (stop and
                  approve across processes) and redis_keys.py (the key layout)
    redis_channel.py, redis_scripts.py   the Redis channel view and its Lua scripts
    manager.py    TurnManager: starts turns in greenlets with the injected producer

Nothing here imports the agent, the chat or the web layer: the app factory hands the
manager its producer (`numi.agent.producer.run_turn`) and its turn-end hooks
(`numi.agent.sending.queue_after_turn`); `numi.extensions.turn_manager()` finds it.
"""
