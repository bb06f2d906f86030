"""Whether a chat's running turn in Redis answers a request, and in a live process
(`request_turn`).

A turn's lease outlives its process by up to one lease period (kill -9, a crash): in that
window the chat still looks busy, and a retry of the dead turn's own question (the same
request_id) must not be taken for that turn, which will never answer it. A process that
runs is subscribed to its control channel (SharedTurns._listen); a dead one's connection
is closed, so Redis counts no subscriber for it.
"""

from __future__ import annotations

from typing import Any


def request_turn(shared: Any, chat_id: str, request_id: str) -> str | None:
    """ "live" when the chat's running turn answers this request_id in a process that is
    alive (this one: among the manager's turns), "dead" when its process is gone, None
    when the running turn (if any) is another request's. Raises redis' errors."""
    pipe = shared.client.pipeline(transaction=False)
    pipe.hmget(shared.key(chat_id, "turn"), "request_id", "running")
    pipe.get(shared.key(chat_id, "lease"))
    (stored, running), holder = pipe.execute()
    if running != b"1" or (stored or b"").decode() != request_id:
        return None
    if holder is None:
        return "dead"  # its lease lapsed: the sweeper closes it
    owner = holder.decode().rsplit(":", 1)[0]
    if owner == shared.process:
        turn = shared.manager.turns.get(chat_id)
        alive = turn is not None and turn.request.request_id == request_id
    else:
        listeners = shared.client.pubsub_numsub(f"{shared.prefix}ctl:{owner}")
        alive = bool(listeners and listeners[0][1])
    return "live" if alive else "dead"
