"""/healthz tells an outage of the database from a bug: 503 while PostgreSQL is down."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


def _health(server) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(server.url + "/healthz", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_healthz_is_503_while_postgres_is_down_and_200_when_it_is_back(
    private_postgres, live_server_factory
):
    server = live_server_factory(NUMI_DATABASE_URL=private_postgres.url())
    assert _health(server) == (200, {"ok": True})
    private_postgres.stop()
    try:
        status, body = _health(server)
        assert status == 503, body
        assert body["error"]["code"] == "storage_unavailable"
        assert "Traceback" not in server.log()
    finally:
        private_postgres.start()
    assert _health(server) == (200, {"ok": True})
    server.stop()
