"""A chat's privacy gateway: its placeholders kept with the chat, and the provider adapter
that redacts each request on its way out and restores the stream on its way back.

The gateway wraps the adapter at the one point every request of a chat passes on its way to
a provider (a turn's steps, a compaction's summary, a title), so it covers the request
exactly as it was built, whichever part of Numi added a text to it. New placeholders are
stored, in their own short transaction, before the request leaves: an answer that names
`[EMAIL_3]` can always be restored, after a restart too. Two lanes of a compare turn that
make the same placeholder for different values at once meet the table's unique
constraint; the later one reads the other's and redacts again.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from typing import Any

from sqlalchemy import bindparam, insert, select
from sqlalchemy.exc import IntegrityError

from ..cpu_pool import run_cpu
from ..extensions import db
from ..models import RedactedValue
from ..providers.events import ChatRequest
from ..redaction import Placeholders, RedactionRules, redact_request
from ..redaction.placeholders import exempt_keys
from ..redaction.request import RestoringStream

log = logging.getLogger(__name__)

_values = RedactedValue.__table__.c
_LOAD = select(_values.placeholder, _values.value).where(_values.chat_id == bindparam("chat_id"))
_STORE = insert(RedactedValue.__table__)


# Requests up to this many characters are redacted on the hub (up to about 5 ms of CPU).
ON_THE_HUB_CHARS = 50_000


def _chars(request: ChatRequest) -> int:
    total = len(request.system or "")
    for message in request.messages:
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(len(p.get("text") or "") for p in content if isinstance(p, dict))
    return total


def placeholders_of(chat_id: str) -> Placeholders:
    """The chat's placeholders as stored."""
    return Placeholders(tuple(row) for row in db.session.execute(_LOAD, {"chat_id": chat_id}))


class ChatGateway:
    """One chat's gateway for one turn (or one lane of it)."""

    def __init__(self, chat_id: str, exempt: Iterable[str] = ()):
        self.chat_id = chat_id
        # Values the user let through as they are for this turn's requests only (the
        # context panel's "Send as is once"): nothing of it is stored.
        self.exempt = exempt_keys(exempt)
        self._placeholders: Placeholders | None = None
        # What the last request that left carried replaced, by label (the answer's meta).
        self.counts: Counter[str] = Counter()

    def placeholders(self) -> Placeholders:
        if self._placeholders is None:
            self._placeholders = placeholders_of(self.chat_id)
        return self._placeholders

    def redact(self, request: ChatRequest, rules: RedactionRules) -> ChatRequest:
        """`request` as it may leave: redacted, its new placeholders stored."""
        redacted = None
        for _attempt in range(5):
            placeholders = self.placeholders()
            if _chars(request) > ON_THE_HUB_CHARS:
                # About 0.1 ms per KB: a long history goes to the CPU pool, the hub serves
                # other streams meanwhile.
                redacted = run_cpu(redact_request, request, rules, placeholders, self.exempt)
            else:
                redacted = redact_request(request, rules, placeholders, self.exempt)
            if not placeholders.added or self._store(placeholders.added):
                placeholders.added.clear()
                break
            self._placeholders = None  # another lane stored first: take its, redact again
        else:
            raise RuntimeError("the chat's placeholders kept changing")  # pragma: no cover
        # No transaction stays open while the provider streams.
        db.session.remove()
        self.counts = redacted.counts
        return redacted.request

    def _store(self, added: list[tuple[str, str]]) -> bool:
        try:
            db.session.execute(
                _STORE,
                [{"chat_id": self.chat_id, "placeholder": p, "value": v} for p, v in added],
            )
            db.session.commit()
            return True
        except IntegrityError:
            db.session.rollback()
            log.info("chat %s: a placeholder was made meanwhile, redacting again", self.chat_id)
            return False

    def adapter(self, adapter: Any, rules: RedactionRules | None) -> Any:
        """`adapter` as this chat's requests use it: redacting when `rules` are on."""
        if rules is None or not rules.enabled:
            return adapter
        return RedactingAdapter(adapter, self, rules)

    def meta(self) -> dict[str, Any]:
        """What the answer's meta keeps of the last request: items replaced, by label."""
        if not self.counts:
            return {}
        return {"redacted": {"items": sum(self.counts.values()), "by_label": dict(self.counts)}}


class RedactingAdapter:
    """A provider adapter behind the chat's gateway: `stream` redacts the request and
    restores what comes back; everything else is the adapter's own."""

    def __init__(self, adapter: Any, gateway: ChatGateway, rules: RedactionRules):
        self._adapter = adapter
        self._gateway = gateway
        self._rules = rules

    def stream(self, request: ChatRequest) -> RestoringStream:
        sent = self._gateway.redact(request, self._rules)
        values = self._gateway.placeholders().values
        return RestoringStream(self._adapter.stream(sent), values)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._adapter, name)
