"""A send's payload is checked at the edge into a typed, frozen `Send` (issue 36): what every
route builds before anything changes, and all `start_turn` reads."""

from __future__ import annotations

import dataclasses

import pytest

from numi.agent.send import Send
from numi.errors import NumiError

CONFIG = {"NUMI_MAX_MESSAGE_CHARS": 50}


def test_a_form_payload_becomes_typed_fields():
    send = Send.from_payload(
        {
            "message": "Hello",
            "request_id": "r-1",
            "queue": "true",
            "compare": ["3:model-a", {"endpoint_id": "4", "model": " model-b "}],
            "attachments": ["7", 8, "7"],
            "timezone": "Europe/Paris",
            "tz_offset": "-120",
            "allow_bash": "false",
        },
        CONFIG,
    )
    assert send == Send(
        message="Hello",
        request_id="r-1",
        queue=True,
        compare=((3, "model-a"), (4, "model-b")),
        attachments=(7, 8),
        timezone="Europe/Paris",
        tz_offset=-120,
        flags={"queue": True, "allow_bash": False},
    )
    assert not send.queues, "a compare never queues"
    with pytest.raises(dataclasses.FrozenInstanceError):
        send.message = "changed"


def test_hints_that_do_not_parse_are_dropped():
    send = Send.from_payload(
        {"message": "Hi", "request_id": "", "timezone": "x" * 65, "tz_offset": "soon"}, CONFIG
    )
    assert (send.request_id, send.timezone, send.tz_offset) == (None, None, None)
    assert Send.from_payload({"message": "Hi", "tz_offset": 17 * 60}, CONFIG).tz_offset is None


@pytest.mark.parametrize(
    "payload, code",
    [
        ({}, "empty_message"),
        ({"message": "   "}, "empty_message"),
        ({"message": "x" * 51}, "too_long"),
        ({"message": "Hi", "request_id": 5}, "invalid_input"),
        ({"message": "Hi", "request_id": "r" * 101}, "invalid_input"),
        ({"message": "Hi", "queue": "maybe"}, "invalid_input"),
        ({"message": "Hi", "compare": "3:a"}, "compare_too_few"),
        ({"message": "Hi", "compare": {"endpoint_id": 3}}, "compare_invalid"),
        ({"message": "Hi", "compare": ["3:a", "x"]}, "compare_invalid"),
        ({"message": "Hi", "attachments": ["one"]}, "invalid_input"),
    ],
)
def test_a_bad_field_is_refused_with_its_code(payload, code):
    with pytest.raises(NumiError) as refused:
        Send.from_payload(payload, CONFIG)
    assert refused.value.code == code
