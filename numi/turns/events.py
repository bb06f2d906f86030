"""The event types a turn's channel carries: the one list, read by the channels (which refuse
any other type), by the HTML view's dispatch and by the house test, which checks that
docs/architecture.md §7 names each.

A new event type is added here, described in §7, and drawn (or deliberately not) by
`numi.web.live.fragments.HtmlView`.
"""

EVENT_TYPES: tuple[str, ...] = (
    "turn_start",
    "accepted",
    "reasoning",
    "content",
    "tool_preparing",
    "tool_approval",
    "tool_start",
    "tool_output",
    "tool_end",
    "model_route",
    "tools_omitted",
    "context_trimmed",
    "context_compacting",
    "context_compacted",
    "context_retry",
    "message_saved",
    "metrics",
    "done",
    "error",
    "turn_end",
    "title_update",
    "queue",
    "save_retry",
    "lanes",
    "research_plan",
    "research_step",
    "research_source",
    "snapshot",
)

KNOWN = frozenset(EVENT_TYPES)


def check_event_type(type_: str) -> None:
    """Refuse an event type that is not in `EVENT_TYPES`: a programming error, caught by the
    first test that emits it, so that no type reaches clients undocumented."""
    if type_ not in KNOWN:
        raise ValueError(f"unknown event type {type_!r}: add it to numi.turns.events.EVENT_TYPES")
