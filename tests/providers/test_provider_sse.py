"""SSE framing (numi.providers.sse) over every way a byte stream can be cut into reads."""

from __future__ import annotations

import json

import pytest

from numi.providers.sse import iter_events, iter_json_events, parse_json

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


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": [1, 2.5, -3e2, true, false, null], "b": "\\u00e9\\n"}',
        '{"é": "ü"}'.encode(),
        b"12345678901234567890123456789",  # beyond 64 bits
        b"1e400",  # beyond a double
        b'"\\ud800"',  # a lone surrogate escape: json.loads takes it, jiter does not
        b"NaN",
        b"[1, 2",
        b"[1,]",
        b'{"a": 1} trailing',
        b"\xef\xbb\xbf{}",  # a BOM
        b"\xff",
        b"",
    ],
)
def test_event_json_is_json_loads_value_or_error(data):
    try:
        expected = json.loads(data.decode("utf-8"))
    except ValueError as exc:
        with pytest.raises(type(exc)):
            parse_json(data)
    else:
        got = parse_json(data)
        assert got == expected or (got != got and expected != expected)  # NaN
        assert type(got) is type(expected)
