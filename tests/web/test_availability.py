"""Availability (issue 28): one client's hostile input must not stall every other client.
Each test times another client's request during the attack against the same request during
a harmless request of the same size, in the same run."""

from __future__ import annotations

import pytest

import http.client
import time

from availability_support import slowest_during

# Compares timings within one run: runs alone, after the parallel suite (Makefile).
pytestmark = pytest.mark.alone

# An unterminated string of escaped quotes after 65 brackets: the old nesting pre-check
# retried its string pattern at every quote (quadratic: 20 KB took about a second).
HOSTILE_SIZE = 24_000
HOSTILE_JSON = "[" * 65 + '"' + '\\"' * (HOSTILE_SIZE // 2)
HARMLESS_JSON = "[" * 65 + '"' + "ab" * (HOSTILE_SIZE // 2)


def _post(server, body: str) -> tuple[int, float]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    start = time.perf_counter()
    connection.request(
        "POST",
        "/api/session",
        body=body.encode(),
        headers={"Content-Type": "application/json", **server.headers},
    )
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status, time.perf_counter() - start


def test_a_hostile_json_body_does_not_stall_other_clients(live_server):
    url, headers = live_server.url + "/api/sessions", live_server.headers
    harmless_slowest, (status, harmless_seconds) = slowest_during(
        lambda: _post(live_server, HARMLESS_JSON), url, headers
    )
    assert status == 400  # invalid JSON either way: nothing is created
    hostile_slowest, (status, hostile_seconds) = slowest_during(
        lambda: _post(live_server, HOSTILE_JSON), url, headers
    )
    assert status == 400
    # Before the fix: the hostile body took ~1.5 s against ~5 ms, and so did the other
    # client's request that waited behind it.
    assert hostile_seconds < 5 * harmless_seconds + 0.2, (hostile_seconds, harmless_seconds)
    assert hostile_slowest < 5 * harmless_slowest + 0.2, (hostile_slowest, harmless_slowest)
