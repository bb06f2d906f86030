"""Cancelling a stream closes the HTTP connection, from any greenlet/thread. The tests wait
on the server seeing the disconnect (bounded waits, no wall-clock thresholds: how fast
that happens is measured in bench/)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from provider_test_support import of_type, request
from turn_support import wait_until

from numi.providers import RetryPolicy, StreamError, TextDelta
from numi.testing import Scenario


def test_close_after_first_event_disconnects(scripted, adapter):
    scripted.enqueue(Scenario().text("Start").stall().text("never"))
    stream = adapter.stream(request())

    first = next(event for event in stream if isinstance(event, TextDelta))
    stream.close()

    assert first.text == "Start"
    assert scripted.last_request.disconnected.wait(10), "the server saw the connection close"
    assert list(stream) == []  # a cancelled stream just ends


def test_close_from_another_thread_while_blocked_reading(scripted, adapter):
    scripted.enqueue(Scenario().text("Start").stall())
    stream = adapter.stream(request())
    events = []
    consumer = threading.Thread(target=lambda: events.extend(stream))
    consumer.start()
    scripted.wait_for_requests(1)
    # "Start" has arrived: the consumer is now blocked on the stalled socket.
    wait_until(lambda: of_type(events, TextDelta), what="the first delta")

    stream.cancel()
    consumer.join(10)

    assert not consumer.is_alive()
    assert [e.text for e in of_type(events, TextDelta)] == ["Start"]
    assert not of_type(events, StreamError)  # cancelled, not failed
    assert scripted.last_request.disconnected.wait(2)


def test_cancel_interrupts_a_retry_backoff(scripted, make_adapter, kind):
    adapter = make_adapter(kind, retry=RetryPolicy(max_retries=3, base_delay=30, max_delay=30))
    scripted.enqueue(Scenario.http_error(500))
    stream = adapter.stream(request())
    events = []
    consumer = threading.Thread(target=lambda: events.extend(stream))
    consumer.start()
    scripted.wait_for_requests(1)
    assert scripted.last_request.finished.wait(
        10
    )  # the 500 was sent: the consumer is in its backoff

    stream.close()
    consumer.join(10)  # the backoff is 30 s: joining at all shows it was interrupted

    assert not consumer.is_alive() and events == []
    assert len(scripted.requests) == 1


def test_cancel_under_gevent_from_another_greenlet(tmp_path):
    # The web app runs turns in greenlets; "stop" comes from another one.
    script = tmp_path / "cancel_gevent.py"
    script.write_text(
        textwrap.dedent(
            """
        from gevent import monkey; monkey.patch_all()
        import gevent, time
        from numi.providers import get_adapter, ChatRequest, TextDelta, RetryPolicy
        from numi.testing import ScriptedProvider, Scenario

        with ScriptedProvider() as server:
            for kind in ("openai_chat", "openai_responses", "anthropic"):
                url = server.anthropic_base_url if kind == "anthropic" else server.openai_base_url
                server.enqueue(Scenario().text("Start", chunks=1).text(" more", chunks=2).delay(0.01).stall())
                adapter = get_adapter(kind, url, "k", retry=RetryPolicy(max_retries=0))
                adapter.client  # import the SDK now: a first import blocks the hub for a while
                stream = adapter.stream(ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}]))
                seen = []
                consumer = gevent.spawn(lambda: seen.extend(stream))
                while "".join(e.text for e in seen if isinstance(e, TextDelta)) != "Start more":
                    gevent.sleep(0.01)  # until the stream is at its stall
                stream.close()
                consumer.join(10)
                assert consumer.dead, kind
                assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "Start more", (kind, seen)
                assert server.last_request.disconnected.wait(2), kind
        print("ok")
        """
        )
    )
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "ok", result.stderr[-2000:]
