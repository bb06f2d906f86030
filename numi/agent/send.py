"""What a send asks for: the `Send`, read from a client's payload at the edge.

Every way a question arrives (the WebSocket's `send`, POST /api/chat_stream, the home
page's form, an edit, a regenerate or a retry, a queued follow-up) turns its payload into a
`Send` with `Send.from_payload` before anything changes, so a malformed field is refused
with its stable code and `numi.agent.sending.start_turn` reads typed fields, never a dict.
The checks here need no database: whether the chat, the attachments and the compared
endpoints are the user's is `numi.agent.starting`'s, when the turn starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..chat import followups
from ..chat.attachments import attachment_ids
from ..chat.request_meta import request_flags
from ..errors import invalid
from ..setting_values import parse_bool
from .lanes import compare_routes
from .research_budget import NAMES as RESEARCH_FIELDS
from .research_budget import ResearchBudget, research_mode

# The widest offset from UTC a client may state, in minutes (UTC-12 to UTC+14, with room).
MAX_TZ_OFFSET_MINUTES = 16 * 60


@dataclass(frozen=True)
class Send:
    """One question to answer, its fields checked."""

    message: str
    # The client's id for this question: a resend with the same id is a retry, not a copy.
    request_id: str | None = None
    # Wait behind a running turn instead of being refused (`turn_running`).
    queue: bool = False
    # (endpoint_id, model) of each lane of a compare; None: one answer.
    compare: tuple[tuple[int, str], ...] | None = None
    attachments: tuple[int, ...] = ()
    timezone: str | None = None
    tz_offset: int | None = None
    # The switches the request set, kept with the question (chat.request_meta).
    flags: dict[str, bool] = field(default_factory=dict)
    # Research mode (`"mode": "research"`): the run's budget; None: an ordinary answer.
    research: ResearchBudget | None = None
    # Values the privacy gateway lets through as they are, in this send's requests only.
    exempt: tuple[str, ...] = ()

    @classmethod
    def from_payload(cls, payload: dict[str, Any], config: Any) -> Send:
        """A client's send, checked; raises NumiError with a stable code and changes
        nothing. The time zone and its offset are hints: a malformed one is dropped."""
        message = followups.check_text(payload.get("message"), config["NUMI_MAX_MESSAGE_CHARS"])
        request_id = payload.get("request_id")
        if request_id == "":
            request_id = None
        elif request_id is not None and (not isinstance(request_id, str) or len(request_id) > 100):
            raise invalid("request_id must be text of at most 100 characters.")
        queue = parse_bool(payload.get("queue"), "queue")
        compare = compare_routes(payload.get("compare"))
        research = None
        if research_mode(payload):
            if compare is not None:
                raise invalid(
                    "A research run answers once: send it without compare.", "research_unsupported"
                )
            research = ResearchBudget.from_payload(_research_fields(payload), config)
        return cls(
            message=message,
            request_id=request_id,
            queue=queue,
            compare=compare,
            attachments=tuple(attachment_ids(payload.get("attachments"))),
            timezone=_timezone(payload.get("timezone")),
            tz_offset=_tz_offset(payload.get("tz_offset")),
            flags=request_flags(payload),
            research=research,
            exempt=_exempt(payload.get("exempt")),
        )

    @property
    def queues(self) -> bool:
        """Whether this send may wait behind a running turn: a compare or a research run
        never queues (it starts now or is refused with `turn_running`)."""
        return self.queue and self.compare is None and self.research is None


def _research_fields(payload: dict[str, Any]) -> Any:
    """The budget a send asked for: its `research` object, or a form's flat fields
    (`research_max_steps`, ...)."""
    if payload.get("research") not in (None, ""):
        return payload["research"]
    return {
        name: payload["research_" + name]
        for name in RESEARCH_FIELDS
        if payload.get("research_" + name) not in (None, "")
    }


MAX_EXEMPT = 20
MAX_EXEMPT_CHARS = 500


def _exempt(value: Any) -> tuple[str, ...]:
    """The values a send lets through unredacted this once (the context panel's "Send as is
    once"): a list of up to MAX_EXEMPT texts, each as the panel marked it."""
    if value in (None, ""):
        return ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = list(dict.fromkeys(value))  # a value marked in several places, pressed once
    if (
        not isinstance(value, list)
        or len(value) > MAX_EXEMPT
        or not all(isinstance(v, str) and 0 < len(v) <= MAX_EXEMPT_CHARS for v in value)
    ):
        raise invalid(
            f"exempt must be a list of at most {MAX_EXEMPT} texts of at most "
            f"{MAX_EXEMPT_CHARS} characters.",
            "invalid_exempt",
        )
    return tuple(value)


def _timezone(value: Any) -> str | None:
    return value if isinstance(value, str) and len(value) <= 64 else None


def _tz_offset(value: Any) -> int | None:
    try:
        offset = int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None
    if offset is not None and not -MAX_TZ_OFFSET_MINUTES <= offset <= MAX_TZ_OFFSET_MINUTES:
        return None
    return offset
