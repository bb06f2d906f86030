"""SSE framing (numi.providers.sse) over every way a byte stream can be cut into reads."""

from __future__ import annotations

import pytest

from numi.providers.sse import iter_events, iter_json_events

STREAM = (
    b": keep-alive\n\n"
    b'event: message_start\ndata: {"a": 1}\n\n'
    b'data: {"b":\r\ndata:  2}\r\n\r\n'
    b'id: 7\rretry: 10\rdata: {"c": 3}\r\r'
    b"event: ping\n\n"
    b'data: {"d": "\xc3\xa9"}\n\n'
    b"data: [DONE]\n\n"
    b'data: {"after": 1}\n\n'
    b"data: unfinished"
)
EXPECTED = [
    ("message_start", b'{"a": 1}'),
    (None, b'{"b":\n 2}'),
    (None, b'{"c": 3}'),
    (None, '{"d": "é"}'.encode()),
    (None, b"[DONE]"),
    (None, b'{"after": 1}'),
]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, len(STREAM)])
def test_events_are_the_same_however_the_stream_is_cut(size):
    chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert list(iter_events(chunks)) == EXPECTED
    assert list(iter_json_events(chunks)) == [
        ("message_start", {"a": 1}),
        (None, {"b": 2}),
        (None, {"c": 3}),
        (None, {"d": "é"}),
    ]


def test_a_cr_at_the_end_of_one_read_and_its_lf_in_the_next_are_one_line_end():
    assert list(iter_events([b"data: 1\r", b"\ndata: 2\r", b"\n\r", b"\n"])) == [(None, b"1\n2")]
