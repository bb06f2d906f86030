"""Waiting for indexing that does not end says where each job waits and whose hub runs it
(issue 36): a document uploaded on another thread is indexed by that thread's hub, which
stops with the thread, and the wait names it so instead of hanging with no clue. The wait
lasts until its deadline by the monotonic clock."""

from __future__ import annotations

import io
import re
import threading

import pytest

from numi.knowledge.index import stop_indexing, wait_for_indexing


# gevent's joinall comes back at once for a greenlet of a thread that has ended: the wait
# goes on to its deadline, as it should, without listing this test in the run's warnings.
@pytest.mark.ends_waits_early
def test_a_job_spawned_on_a_thread_that_ended_is_named_when_the_wait_times_out(sqlite_app):
    app = sqlite_app
    uploaded: dict = {}

    def upload() -> None:
        response = app.test_client().post(
            "/api/upload",
            data={"file": (io.BytesIO(b"Kilns fire stoneware."), "kiln.txt")},
            content_type="multipart/form-data",
        )
        uploaded["status"] = response.status_code

    thread = threading.Thread(target=upload)
    thread.start()
    thread.join()
    assert uploaded["status"] == 201

    with pytest.raises(TimeoutError) as waited:
        wait_for_indexing(app, timeout=0.5)
    message = str(waited.value)
    assert "1 document(s) still indexing after 0.5 s" in message
    # The wait lasted until its deadline by the clock, however often the hub's wait ended.
    waited = float(re.search(r"\(([0-9.]+) s by the clock", message).group(1))
    assert waited >= 0.5, message
    assert "the hub of another thread (gone;" in message, message
    assert "attachments.py:" in message, message  # spawned by the upload's view
    stop_indexing(app)
