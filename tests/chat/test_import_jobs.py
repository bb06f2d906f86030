"""Imports run as background jobs (issue 34, High): one import no longer freezes the server.

A live multi-user server imports a big generated file while another user is served; the
job reports its progress, shows nothing until all of it is in, refuses a second import of
the same user, and leaves nothing behind when it fails midway. The caps of one import
(chats, messages, depth, width) refuse a file with a stable code, changing nothing.
"""

from __future__ import annotations

import io
import json
import os
import signal
from pathlib import Path

import gevent
import pytest
from import_support import api_import, preview_page, run_import

from numi.testing.exports import chatgpt_chain, chatgpt_wide, numi_chat

from turn_support import Api, wait_until


def counts(app) -> tuple[int, int]:
    """(chats, messages) in the database, hidden ones included."""
    from sqlalchemy import func, select

    from numi.extensions import db
    from numi.models import Chat, Message

    with app.app_context():
        return (
            db.session.execute(select(func.count()).select_from(Chat)).scalar_one(),
            db.session.execute(select(func.count()).select_from(Message)).scalar_one(),
        )


# --- caps ----------------------------------------------------------------------------------

CAPS = {
    "NUMI_IMPORT_MAX_CHATS": 2,
    "NUMI_IMPORT_MAX_MESSAGES": 40,
    "NUMI_IMPORT_MAX_DEPTH": 30,
    "NUMI_IMPORT_MAX_WIDTH": 5,
}


@pytest.fixture
def capped(make_app):
    app = make_app(**CAPS)
    return app, app.test_client()


@pytest.mark.parametrize(
    "document, code",
    [
        (chatgpt_chain(2) * 3, "import_too_large"),  # three conversations: over 2 chats
        (numi_chat(41), "import_too_large"),  # over 40 messages
        (chatgpt_chain(31), "import_too_deep"),  # a chain over 30
        (chatgpt_wide(6), "import_too_wide"),  # six versions of one answer
    ],
    ids=["chats", "messages", "depth", "width"],
)
def test_an_import_over_a_cap_is_refused_with_its_code_and_changes_nothing(capped, document, code):
    app, client = capped
    before = counts(app)
    job = run_import(client, json=document)
    assert job["state"] == "failed" and job["error"]["code"] == code, job
    assert job["error"]["message"] and job["result"] is None
    assert counts(app) == before


def test_an_import_at_the_caps_is_imported(capped):
    app, client = capped
    for document in (chatgpt_chain(30), chatgpt_wide(5), numi_chat(30), chatgpt_chain(2) * 2):
        job = run_import(client, json=document)
        assert job["state"] == "done", job
    assert counts(app)[0] == 5


def test_a_job_is_its_owners_only(client_a, client_b):
    job = run_import(client_a, json=numi_chat(4))
    assert client_b.get(f"/api/imports/{job['id']}").status_code == 404
    assert client_b.get(f"/imports/{job['id']}").status_code == 404
    assert client_a.get(f"/api/imports/{job['id'] + 1}").status_code == 404


def test_a_job_whose_server_died_ends_and_leaves_nothing(multi_app, users, client_a):
    """A running job that stopped beating (its process was killed) is ended as interrupted
    when its user next asks, and the chat it had written hidden is deleted."""
    from datetime import timedelta

    from numi.chat.import_jobs import STALE_SECONDS
    from numi.chat.import_writer import pending_mark
    from numi.extensions import db
    from numi.models import Chat, ImportJob, Message, utcnow

    before = counts(multi_app)
    with multi_app.app_context():
        long_ago = utcnow() - timedelta(seconds=STALE_SECONDS + 1)
        job = ImportJob(user_id=users["a"].id, kind="chats", total=10, done=1, updated_at=long_ago)
        db.session.add(job)
        db.session.flush()
        chat = Chat(user_id=users["a"].id, title="Half", deleted_at=pending_mark(job.id))
        db.session.add(chat)
        db.session.flush()
        db.session.add(Message(chat_id=chat.id, parent_id=0, role="user", content="first"))
        db.session.commit()
        job_id = job.id
    assert client_a.get("/api/sessions").get_json()["sessions"] == [], "hidden while running"
    ended = client_a.get(f"/api/imports/{job_id}").get_json()["job"]
    assert ended["state"] == "failed" and ended["error"]["code"] == "import_interrupted"
    assert counts(multi_app) == before
    assert run_import(client_a, json=numi_chat(2))["state"] == "done", "the user may import again"


# --- a live multi-user server ----------------------------------------------------------------

# Big enough that its job runs for a while after a request has seen it writing: the
# conditions below are "seen while running", never a time. Two ChatGPT conversations.
BIG_CHATS, BIG_DEPTH = 2, 2_000
BIG_MESSAGES = BIG_CHATS * BIG_DEPTH


def big_export(title: str) -> list:
    return chatgpt_chain(BIG_DEPTH, title) * BIG_CHATS


@pytest.fixture(scope="module")
def multi_server(live_server_factory):
    server = live_server_factory(NUMI_AUTH="multi")
    tokens = {}
    for name in ("alice", "bob", "carol"):
        server.cli("user", "create", name, "--password-stdin", input="long enough password\n")
        tokens[name] = server.cli("token", "create", "--user", name).stdout.strip()
    yield server, {name: Api(server.url, token=token) for name, token in tokens.items()}
    server.stop()


def _start(api: Api, document) -> dict:
    status, body = api.post("/api/import", document)
    assert status == 202, body
    return body["job"]


def _job(api: Api, job_id: int) -> dict:
    status, body = api.get(f"/api/imports/{job_id}")
    assert status == 200, body
    return body["job"]


def _writing(api: Api, job_id: int) -> dict:
    """Wait until the job has written part of the file (and not all of it); returns it."""

    def seen():
        job = _job(api, job_id)
        assert job["state"] == "running", job
        return job if 0 < job["progress"]["done"] < job["progress"]["total"] else None

    return wait_until(seen, 60, "the import to be writing")


def test_a_big_import_runs_in_the_background_while_others_are_served(multi_server):
    server, api = multi_server
    alice, bob = api["alice"], api["bob"]
    job = _start(alice, big_export("Big"))
    assert job["state"] == "running"
    writing = _writing(alice, job["id"])
    assert writing["progress"]["total"] == BIG_MESSAGES and writing["kind"] == "chats"

    # While it writes: another user's pages and API answer, and the importing user sees
    # nothing of the half-written chat.
    status, sessions = bob.get("/api/sessions")
    assert status == 200 and sessions["sessions"] == []
    status, created = bob.post("/api/session", {"title": "Bob works on"})
    assert status == 201, created
    assert alice.get("/api/sessions")[1]["sessions"] == []
    # A second import of the same user is refused while the first runs; another's is not.
    status, body = alice.post("/api/import", numi_chat(2))
    assert status == 409 and body["error"]["code"] == "import_running", body
    later = _job(alice, job["id"])
    assert later["state"] == "running", "the other user was served while the import ran"
    assert later["progress"]["done"] >= writing["progress"]["done"]
    carol = api_import(api["carol"], numi_chat(2, "Carol's"))
    assert carol["state"] == "done", carol

    done = wait_until(
        lambda: (j := _job(alice, job["id"]))["state"] != "running" and j, 120, "the import"
    )
    assert done["state"] == "done", done
    assert done["progress"] == {"done": BIG_MESSAGES, "total": BIG_MESSAGES}
    chats = [c["id"] for c in done["result"]["chats"]]
    assert len(chats) == BIG_CHATS
    assert sorted(c["id"] for c in alice.get("/api/sessions")[1]["sessions"]) == sorted(chats)
    status, history = alice.get(f"/api/history/{chats[-1]}")
    assert status == 200 and history["messages"][-1]["content"] == f"Step {BIG_DEPTH - 1}."


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(p) for p in text]
    return found


def _worker_of(server) -> int | None:
    """The pid of the server's import worker subprocess, if one runs."""
    for pid in _children(server.proc.pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:
            continue
        if b"numi.web.import_worker" in command:
            return pid
    return None


def test_an_import_that_fails_midway_leaves_nothing(multi_server):
    """The worker reading the file dies (as the OOM killer would do) while part of the
    file is written: the job fails with a code and every row it wrote is gone."""
    server, api = multi_server
    bob = api["bob"]
    sessions_before = bob.get("/api/sessions")[1]["sessions"]
    job = _start(bob, big_export("Doomed"))
    _writing(bob, job["id"])
    worker = wait_until(lambda: _worker_of(server), 30, "the import worker")
    os.kill(worker, signal.SIGKILL)  # the worker this test's import started
    ended = wait_until(
        lambda: (j := _job(bob, job["id"]))["state"] != "running" and j, 60, "the job to end"
    )
    assert ended["state"] == "failed" and ended["error"]["code"] == "import_failed", ended
    assert bob.get("/api/sessions")[1]["sessions"] == sessions_before

    import sqlalchemy as sa

    engine = sa.create_engine(server.database_url)
    try:
        with engine.connect() as connection:
            doomed = connection.execute(
                sa.text("SELECT count(*) FROM chats WHERE title = 'Doomed'")
            ).scalar_one()
    finally:
        engine.dispose()
    assert doomed == 0, "no hidden chat or message of the failed import remains"


# --- the Settings form's preview step ------------------------------------------------------


def test_the_forms_preview_step_writes_nothing_and_offers_the_import(app, client):
    """Settings → Import's Preview (HTMX): the preview under the form, with the button that
    imports the same file; without JavaScript, the progress page says it; nothing written."""
    body = json.dumps(numi_chat(4, title="Preview me")).encode()
    before = counts(app)
    htmx = {"HX-Request": "true"}

    def form(step, headers=None):
        data = {"file": (io.BytesIO(body), "chat.json"), "step": step}
        return client.post("/import", data=data, headers=headers or {})

    response = form("preview", htmx)
    assert response.status_code == 200 and 'id="import-' in response.get_data(as_text=True)
    page = preview_page(client, response)
    assert "1 chat, 4 messages" in page and "Nothing was written yet." in page
    assert 'name="step" value="import"' in page and "Import 1 chat<" in page
    assert counts(app) == before

    plain = form("preview")
    assert plain.status_code == 303 and plain.headers["Location"].startswith("/imports/")

    def imported():
        # The preview without JavaScript may still run: one import at a time per user.
        gevent.sleep(0.01)
        response = form("import", htmx)
        return response if response.status_code != 409 else None

    assert wait_until(imported, what="the import").headers["HX-Redirect"].startswith("/imports/")
