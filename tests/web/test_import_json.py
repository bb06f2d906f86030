"""A JSON array read one element at a time (numi/web/import_json.py): the same values as
`json.loads` whatever the chunks, the file's faults refused with a code, and the memory of
one element, not of the file (issue 42: a 200 MB export)."""

from __future__ import annotations

import io
import json
import tracemalloc

import pytest

from numi.errors import NumiError
from numi.web.import_json import JsonItems


def _stingy(raw: bytes, most: int):
    """A read function that never gives more than `most` bytes at a time, as a pipe may."""
    stream = io.BytesIO(raw)
    return lambda size: stream.read(min(size, most))


@pytest.mark.parametrize("most", [1, 3, 1 << 20])
def test_the_elements_are_those_of_the_whole_array_however_the_bytes_arrive(most):
    document = [
        {"title": "Crème brûlée 🍮", "n": 1.5e3, "deep": [[{"x": None}]]},
        12345,
        'a string with \\ and " and \u2028',
        [],
        {},
        True,
        -0.25,
    ]
    raw = b"\xef\xbb\xbf \n" + json.dumps(document, ensure_ascii=False).encode() + b" \n"
    assert list(JsonItems(_stingy(raw, most), max_depth=64).items()) == document


def test_an_empty_array_has_no_elements_and_the_first_character_is_seen():
    reader = JsonItems(_stingy(b"  [ ]", 1), max_depth=64)
    assert reader.first() == "["
    assert list(reader.items()) == []
    assert JsonItems(_stingy(b"  {}", 1), max_depth=64).first() == "{"
    assert JsonItems(_stingy(b"   ", 1), max_depth=64).first() == ""


@pytest.mark.parametrize(
    "raw, code, says",
    [
        (b'[{"a": 1}, {"b": ', "invalid_import", "cut short"),
        (b'[{"a": 1} {"b": 2}]', "invalid_import", "not valid JSON"),
        (b'[{"a": 1}] trailing', "invalid_import", "after its closing bracket"),
        (b'[{"a": 1},', "invalid_import", "cut short"),
        (b'{"a": [1]}', "invalid_import", "not a JSON array"),
        (b'["\xff\xfe"]', "invalid_import", "not UTF-8"),
        (b"[" + b"[" * 100 + b"]" * 100 + b"]", "too_deep", "deeper than 64"),
    ],
    ids=["cut", "no-comma", "trailing", "open", "object", "not-utf8", "deep"],
)
def test_a_faulty_file_is_refused_with_a_code(raw, code, says):
    with pytest.raises(NumiError) as refused:
        list(JsonItems(_stingy(raw, 4), max_depth=64).items())
    assert refused.value.code == code
    assert says in refused.value.message


def test_a_big_array_is_read_in_the_memory_of_one_element():
    """16 MB of conversations, produced as they are read: the reader's peak allocation is
    a few of its chunks, not the file (json.loads of the same bytes needs far more than
    the file)."""
    element = json.dumps({"title": "t", "text": "word " * 2000}).encode()  # 10 KB each
    count = 1600

    def produced():
        yield b"["
        for i in range(count):
            yield (b"," if i else b"") + element
        yield b"]"

    pieces = produced()
    pending = bytearray()

    def read(size: int) -> bytes:
        while len(pending) < size:
            piece = next(pieces, None)
            if piece is None:
                break
            pending.extend(piece)
        out = bytes(pending[:size])
        del pending[:size]
        return out

    tracemalloc.start()
    try:
        seen = sum(1 for _ in JsonItems(read, max_depth=64).items())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == count
    assert peak < 12 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB for a 16 MB array"
