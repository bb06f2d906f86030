"""PostgreSQL under streaming turns: no connection is held (checked out of the pool inside a
transaction) while a provider streams, so the pool stays free for page loads."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from numi.testing import Scenario
from turn_support import Api, Socket, make_chat, of_type, turn_server_env, types

pytestmark = pytest.mark.postgres


def test_no_connection_is_held_while_providers_stream(
    live_server_factory, postgres_module_url, scripted
):
    name = "numi-pool-test"
    url = sa.engine.make_url(postgres_module_url)
    app_url = url.update_query_dict({"application_name": name}).render_as_string(
        hide_password=False
    )
    server = live_server_factory(
        **turn_server_env(NUMI_DATABASE_URL=app_url, NUMI_DB_POOL_SIZE=3, NUMI_DB_MAX_OVERFLOW=0)
    )
    api = Api(server.url)
    chats = [make_chat(api, scripted) for _ in range(6)]
    for _ in chats:
        scripted.enqueue(Scenario().text("Some words, then", chunks=2).stall())
    sockets = [Socket(server, chat["id"]) for chat in chats]
    try:
        for sock in sockets:
            sock.send(type="send", message="Stall midway")
        for sock in sockets:
            sock.events_until("content")
        # Six turns stream (stalled) on a pool of three: the pages still load...
        for chat in chats:
            status, _ = api.get(f"/api/history/{chat['id']}")
            assert status == 200
        # ...and no connection of the server sits in a transaction meanwhile.
        observer = sa.create_engine(postgres_module_url, poolclass=sa.pool.NullPool)
        with observer.connect() as conn:
            states = (
                conn.execute(
                    sa.text("SELECT state FROM pg_stat_activity WHERE application_name = :name"),
                    {"name": name},
                )
                .scalars()
                .all()
            )
        observer.dispose()
        assert states, "the server's connections are visible"
        assert [s for s in states if s != "idle"] == [], states
        scripted.release()
        for sock in sockets:
            events = sock.events_until("turn_end")
            assert "done" in types(events) and not of_type(events, "error")
    finally:
        for sock in sockets:
            sock.close()
