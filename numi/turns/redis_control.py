"""Stop and approve reach the process that runs a chat's turn: a part of the Redis turn
table (`shared.SharedTurns`), over pub/sub (`p ctl:<process>`)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import gevent

from ..errors import NumiError
from .channel import TurnState
from .table import TurnHost

log = logging.getLogger(__name__)

# How long a Stop asked for while Redis is down waits for it to come back.
STOP_PENDING_SECONDS = 300


class RedisControl:
    """Stop and approve for turns other processes run, and this process's listener."""

    # Set by SharedTurns.__init__ (this class is one part of it).
    redis_module: Any
    client: Any
    manager: TurnHost
    prefix: str
    lease_ms: int
    control_channel: str
    pending_stops: set[str]

    key: Callable[[str, str], str]
    _unreachable: Callable[[Exception], NumiError]
    fold: Callable[..., tuple[TurnState | None, int]]

    def _owner(self, chat_id: str) -> str | None:
        holder = self.client.get(self.key(chat_id, "lease"))
        return holder.decode().rsplit(":", 1)[0] if holder else None

    def _send_control(self, owner: str, message: dict[str, Any]) -> bool:
        return self.client.publish(f"{self.prefix}ctl:{owner}", json.dumps(message)) > 0

    def stop(self, chat_id: str, lane: int | None = None) -> bool:
        """Send Stop to the process that runs the chat's turn (with `lane`, for one lane of
        a compare turn). With Redis unreachable the stop of a whole turn is kept and sent
        once Redis is back (raising stop_pending to say so); a lane's is refused."""
        message: dict[str, Any] = {"op": "stop", "chat_id": chat_id}
        if lane is not None:
            message["lane"] = lane
        try:
            owner = self._owner(chat_id)
            return owner is not None and self._send_control(owner, message)
        except self.redis_module.RedisError as exc:
            if lane is not None:
                raise self._unreachable(exc) from None
            log.warning("stop of chat %s waits for Redis (%s)", chat_id, exc)
        if chat_id not in self.pending_stops:
            self.pending_stops.add(chat_id)
            gevent.spawn(self._stop_when_back, chat_id)
        raise NumiError(
            "stop_pending",
            "The server cannot reach Redis, so Stop cannot reach the answer yet; "
            "it goes through as soon as Redis is back.",
            503,
        )

    def _stop_when_back(self, chat_id: str) -> None:
        """Deliver a stop asked for while Redis was down. Once Redis answers, the owner may
        need up to a lease period to take its lease back (the recovery window)."""
        given_up = time.monotonic() + STOP_PENDING_SECONDS
        back_at = None
        try:
            while time.monotonic() < given_up:
                gevent.sleep(0.25)
                try:
                    owner = self._owner(chat_id)
                    # (Sent only once the owner listens again: its control channel
                    # reconnects after the outage too.)
                    if owner is not None and self._send_control(
                        owner, {"op": "stop", "chat_id": chat_id}
                    ):
                        log.warning("stop of chat %s sent now that Redis is back", chat_id)
                        return
                except self.redis_module.RedisError:
                    back_at = None
                    continue
                if chat_id in self.manager.turns:  # this process runs it after all
                    self.manager.stop_local(chat_id)
                    return
                if owner is not None:
                    continue
                back_at = back_at or time.monotonic()
                if time.monotonic() - back_at > 2 * self.lease_ms / 1000.0:
                    return  # nothing runs there any more
        finally:
            self.pending_stops.discard(chat_id)

    def approve(self, chat_id: str, call_id: str, decision: str, digest: str | None) -> bool:
        try:
            owner = self._owner(chat_id)
        except self.redis_module.RedisError as exc:
            raise self._unreachable(exc) from None
        if owner is None:
            return False
        state, _ = self.fold(chat_id)
        pending = state.pending_approvals.get(call_id) if state is not None else None
        if pending is None:
            return False
        # Checked here too, so the client gets the error; the owner checks again.
        expected = pending.get("digest")
        if decision == "approve" and expected is not None and digest != expected:
            raise NumiError(
                "approval_mismatch",
                "That approval does not match the call shown on its card; nothing was run.",
                409,
            )
        return self._send_control(
            owner,
            {
                "op": "approve",
                "chat_id": chat_id,
                "call_id": call_id,
                "decision": decision,
                "digest": digest,
            },
        )

    def _listen(self) -> None:
        """Apply stop and approve messages other processes send for this process's turns."""
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(self.control_channel)
                for message in pubsub.listen():
                    if message.get("type") != "message":
                        continue
                    try:
                        self._apply_control(json.loads(message["data"]))
                    except Exception:
                        log.exception("bad control message")
            except self.redis_module.RedisError as exc:
                log.warning("control channel lost (%s); reconnecting", exc)
                gevent.sleep(0.5)
            finally:
                try:
                    pubsub.close()
                except Exception:
                    pass

    def _apply_control(self, message: dict[str, Any]) -> None:
        chat_id = str(message.get("chat_id"))
        if message.get("op") == "stop":
            self.manager.stop_local(chat_id, message.get("lane"))
        elif message.get("op") == "approve":
            self.manager.approve_local(
                chat_id,
                str(message.get("call_id")),
                str(message.get("decision")),
                message.get("digest"),
            )
